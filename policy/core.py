"""The Policy facade the engine calls: context builder + bandit + store + reward, under one lock.

    policy = Policy.from_settings(settings)
    x = policy.context(embedding, diagnosis, latency_left_s, memory_left_bytes)
    decision = policy.select(x, feasible_actions)          # masking happened before
    ... run decision.arm, diagnose the second pass, meter its cost ...
    reward = policy.reward(diagnosis_after, latency_s, memory_bytes)
    policy.update(decision.arm, x, reward)                  # persisted, then learned

The lock makes select / update / admin calls safe from the server's worker threads; a select
costs tens of microseconds, an update one SQLite commit (an fsync), so one lock is enough.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from diagnosis.types import Diagnosis
from policy.bandit import Bandit, check_reward
from policy.beta import BetaTS, binarise
from policy.context import ContextBuilder
from policy.exchange import state_from_json, state_to_json
from policy.linear import LinearBandit, LinTS, LinUCB
from policy.reward import Budgets, Reward, RewardVariant, compute_reward
from policy.store import MemoryStore, PolicyStore, SQLiteStore
from policy.types import ArmStats, ArmSummary, Decision, PolicyKind, PolicyState
from ragmend.errors import InputError
from ragmend.settings import PolicySettings, Settings


def state_path(settings: Settings) -> Path:
    """policy.state_path, or <data_dir>/policy.sqlite."""
    p = settings.policy.state_path
    return p.expanduser() if p is not None else settings.data_dir / "policy.sqlite"


def make_bandit(cfg: PolicySettings, arms: Sequence[str], dim: int, seed: int | Sequence[int]) -> Bandit:
    if cfg.kind == "linucb":
        return LinUCB(
            arms,
            dim,
            alpha=cfg.alpha,
            ridge_lambda=cfg.ridge_lambda,
            seed=seed,
            refresh_every=cfg.refresh_every,
        )
    if cfg.kind == "lints":
        return LinTS(
            arms,
            dim,
            v=cfg.lints_v,
            ridge_lambda=cfg.ridge_lambda,
            seed=seed,
            refresh_every=cfg.refresh_every,
        )
    return BetaTS(arms, dim, threshold=cfg.beta_threshold, seed=seed)


class Policy:
    def __init__(self, config: PolicySettings, store: PolicyStore, builder: ContextBuilder | None = None):
        self.config = config
        self.builder = builder or ContextBuilder(
            context_dim=config.context_dim,
            projection_seed=config.projection_seed,
            latency_budget_s=config.request_latency_budget_s,
            memory_budget_bytes=config.memory_budget_bytes * config.budget_scale,
        )
        self.arms: tuple[str, ...] = tuple(config.enabled_actions)
        self.budgets = Budgets(config.latency_budget_s, config.memory_budget_bytes).scaled(
            config.budget_scale
        )
        self.store = store
        self._lock = threading.RLock()
        self._learn = config.learn
        state = store.load(self.builder.feature_names(), self.arms)
        # The decision seeds continue from the number of updates already learned, so a restarted
        # server does not replay the exploration draws of its previous start.
        self.bandit = make_bandit(config, self.arms, self.builder.dim, seed=(config.seed, state.total_pulls))
        self._load(state)

    @classmethod
    def from_settings(cls, settings: Settings, store: PolicyStore | None = None) -> Policy:
        """The configured policy over its SQLite state (or `store`, e.g. a MemoryStore)."""
        return cls(settings.policy, store if store is not None else SQLiteStore(state_path(settings)))

    @classmethod
    def in_memory(cls, config: PolicySettings | None = None) -> Policy:
        return cls(config or PolicySettings(), MemoryStore())

    # --- per request ----------------------------------------------------------------------------

    @property
    def kind(self) -> PolicyKind:
        return self.bandit.kind

    @property
    def dim(self) -> int:
        return self.builder.dim

    def context(
        self,
        embedding: np.ndarray | None,
        diagnosis: Diagnosis,
        latency_left_s: float,
        memory_left_bytes: float | None,
    ) -> np.ndarray:
        """x (Appendix B). See ContextBuilder.build for what the budgets mean."""
        return self.builder.build(embedding, diagnosis, latency_left_s, memory_left_bytes)

    def select(self, x: np.ndarray, feasible: Sequence[str], seed: int | None = None) -> Decision:
        """The action to run among `feasible` (enabled actions that fit the remaining budget)."""
        with self._lock:
            return self.bandit.select(x, feasible, seed=seed)

    def budgets_for(self, memory_source: str = "nvml") -> Budgets:
        """The scaled per-action budgets for a memory reading of this source: accelerator memory
        (nvml) is held to memory_budget_bytes, host RSS growth (the no-GPU fallback, a different
        quantity: allocator noise of a CPU pass is megabytes) to rss_memory_budget_bytes."""
        if memory_source != "rss":
            return self.budgets
        return Budgets(self.config.latency_budget_s, self.config.rss_memory_budget_bytes).scaled(
            self.config.budget_scale
        )

    def reward(
        self, diagnosis: Diagnosis, latency_s: float, memory_bytes: float | None, memory_source: str = "nvml"
    ) -> Reward:
        """Eq. 2 for the repaired answer, with the configured variant and scaled budgets."""
        variant: RewardVariant = self.config.reward_variant
        return compute_reward(diagnosis, latency_s, memory_bytes, self.budgets_for(memory_source), variant)

    def update(self, arm: str, x: np.ndarray, reward: Reward | float) -> bool:
        """Learn from the outcome of `arm` in context x. Persists first, then updates memory.

        Returns False (and changes nothing) when learning is off.
        """
        r = check_reward(reward.total if isinstance(reward, Reward) else reward)
        with self._lock:
            if not self._learn:
                return False
            x = self.bandit.check_x(x)
            if arm not in self.arms:
                raise InputError(f"unknown action {arm!r}; the policy's actions are {', '.join(self.arms)}")
            before = self._stats[arm]
            after = self.store.apply(arm, x, r, binarise(r, self.config.beta_threshold))
            if after.pulls == before.pulls + 1:
                self.bandit.update(arm, x, r)  # O(d^2) Sherman-Morrison
            else:
                # Another writer shares the store and added to this arm since we last looked:
                # take the merged sums (one O(d^3) inverse) rather than only our own increment.
                self.bandit.load_arm(arm, after)
            self._stats[arm] = after
            return True

    # --- operations (admin endpoint, metrics, CLI) ---------------------------------------------

    @property
    def learn(self) -> bool:
        return self._learn

    def set_learn(self, learn: bool) -> None:
        with self._lock:
            self._learn = bool(learn)

    def set_alpha(self, alpha: float) -> None:
        """Change LinUCB's exploration weight at runtime (not persisted: configuration is)."""
        with self._lock:
            if not isinstance(self.bandit, LinUCB):
                raise InputError(f"alpha applies to the linucb policy; this one is {self.kind}")
            try:
                self.bandit.set_alpha(alpha)
            except ValueError as e:
                raise InputError(str(e)) from None

    @property
    def alpha(self) -> float | None:
        return self.bandit.alpha if isinstance(self.bandit, LinUCB) else None

    def stats(self) -> dict[str, ArmSummary]:
        """Pulls and mean reward of each enabled arm (for metrics)."""
        with self._lock:
            return {
                a: ArmSummary(a, s.pulls, s.mean_reward, s.successes, s.failures)
                for a, s in self._stats.items()
                if a in self.arms
            }

    def coefficients(self, arm: str) -> dict[str, float]:
        """theta_a by feature name (linear kinds): what the policy has learned about an arm."""
        with self._lock:
            if not isinstance(self.bandit, LinearBandit):
                raise InputError(f"the {self.kind} policy has no per-feature coefficients")
            theta = self.bandit.coefficients(arm)
        return dict(zip(self.builder.feature_names(), theta.tolist(), strict=True))

    def export_state(self) -> dict[str, Any]:
        """The stored state as versioned JSON (policy.exchange)."""
        with self._lock:
            state = self.store.export_state()
        return state_to_json(
            state,
            kind=self.kind,
            ridge_lambda=self.config.ridge_lambda,
            beta_threshold=self.config.beta_threshold,
        )

    def import_state(self, data: Any) -> None:
        """Replace the learned state with an export. Raises InputError when it does not fit."""
        state = state_from_json(data, feature_names=self.builder.feature_names(), arms=self.arms)
        with self._lock:
            self.store.import_state(state)
            self._load(self.store.load(self.builder.feature_names(), self.arms))

    def reset(self) -> None:
        """Forget everything learned (every arm back to its prior)."""
        with self._lock:
            self.store.reset()
            self._load(self.store.load(self.builder.feature_names(), self.arms))

    def reload(self) -> None:
        """Re-read the store (another replica's updates, a state imported by another process)."""
        with self._lock:
            self._load(self.store.load(self.builder.feature_names(), self.arms))

    def close(self) -> None:
        self.store.close()

    def _load(self, state: PolicyState) -> None:
        self.bandit.load(state)
        self._stats: dict[str, ArmStats] = {a: state.arm(a) for a in self.arms}
