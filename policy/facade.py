"""The Policy facade the engine calls: context builder + bandit + store + reward, under one lock.

    policy = Policy.from_settings(settings, arms)           # arms: names, from the engine
    x = policy.context(embedding, diagnosis, latency_left_s, memory_left_bytes)
    decision = policy.select(x, feasible_actions)          # masking happened before
    ... run decision.arm, diagnose the second pass, meter its cost ...
    reward = policy.reward(diagnosis_after, latency_s, memory_bytes)
    policy.update(decision.arm, x, reward)                  # persisted, then learned

The lock makes select / update / admin calls safe from the server's worker threads; a select
costs tens of microseconds, an update one SQLite commit (an fsync), so one lock is enough.

The policy sees arm names only; the engine passes EVERY action of its catalogue, always: the store
keeps statistics for all of them, and `policy.enabled_actions` only says which arms may be
selected (they are masked before selection, like actions that do not fit the budget). Disabling an
action therefore keeps what was learned about it, and enabling it again takes it back. The tunable
part of the configuration (LIVE_POLICY_KEYS: kind, alpha, learn, enabled actions, budgets) changes
at runtime through `configure` or the set_* shortcuts, atomically under the lock, without touching
the stored sums.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, cast

import numpy as np
from pydantic import ValidationError
from typing_extensions import TypeVar

from ragmend.budgets import Budgets
from ragmend.diagnosis.types import Diagnosis
from ragmend.errors import ConfigError, InputError, RagmendError, StoreUnavailable, describe_validation
from ragmend.policy.bandit import Bandit, TieBreak, check_reward
from ragmend.policy.beta import BetaTS, binarise
from ragmend.policy.context import ContextBuilder
from ragmend.policy.exchange import state_from_json, state_to_json
from ragmend.policy.layout import upgrade_layout
from ragmend.policy.linear import LinearBandit, LinTS, LinUCB
from ragmend.policy.reward import Reward, RewardVariant, compute_reward
from ragmend.policy.store import MemoryStore, PolicyStore, SQLiteStore
from ragmend.policy.types import ArmStats, ArmSummary, Decision, PolicyKind, PolicyState
from ragmend.settings import PolicySettings, Settings, live_keys

log = logging.getLogger(__name__)

# What a running policy may change: the fields marked LIVE in ragmend/settings.py. The rest of
# PolicySettings fixes the context layout or the meaning of the stored sums (context_dim,
# ridge_lambda, beta_threshold...): a restart. `repair` and `refresh_cooldown_s` are the engine's
# to act on; the policy records them so its config stays the one in force.
LIVE_POLICY_KEYS = live_keys(PolicySettings)
# The budgets the context vector is normalised by (ContextBuilder).
_CONTEXT_BUDGET_KEYS = ("request_latency_budget_s", "memory_budget_bytes", "budget_scale")


def check_enabled_actions(
    enabled: Sequence[str],
    arms: Sequence[str],
    error: type[RagmendError] = ConfigError,
    key: str = "policy.enabled_actions",
    what: str = "action",
) -> None:
    """Refuse enabled arm names that are not arms, with one message wherever they come from (the
    configuration at start, a hot reload, the admin API); `key` and `what` name the setting and
    its arms (the router's plans)."""
    unknown = [a for a in enabled if a not in arms]
    if unknown:
        raise error(f"{key}: unknown {what}(s) {unknown}; {what}s: {', '.join(arms)}")


class ArmsDisabled(InputError):
    """Every arm offered to select() is disabled (policy.enabled_actions changed meanwhile)."""


def action_budgets(cfg: PolicySettings, memory_source: str = "nvml") -> Budgets:
    """The scaled per-action budgets of `cfg` for a memory reading of this source: accelerator
    memory (nvml) is held to memory_budget_bytes, host RSS growth (the no-GPU fallback, a different
    quantity: allocator noise of a CPU pass is megabytes) to rss_memory_budget_bytes."""
    memory = cfg.rss_memory_budget_bytes if memory_source == "rss" else cfg.memory_budget_bytes
    return Budgets(cfg.latency_budget_s, memory).scaled(cfg.budget_scale)


def context_builder(cfg: PolicySettings) -> ContextBuilder:
    """The repair's context builder of `cfg`'s layout and budgets."""
    return ContextBuilder(context_dim=cfg.context_dim, projection_seed=cfg.projection_seed).with_budgets(cfg)


class ContextLayout(Protocol):
    """What the policy needs of a context builder (the repair's ContextBuilder, the router's
    PlanContextBuilder): the layout its stored sums are kept in, and the same layout under other
    budgets (a runtime change of them)."""

    @property
    def dim(self) -> int: ...

    def feature_names(self) -> tuple[str, ...]: ...

    def pooled_from(self) -> Mapping[str, tuple[str, ...]]:
        """Features of this layout that sum features of an older one (policy/layout.py)."""
        ...

    def with_budgets(self, cfg: PolicySettings) -> ContextLayout: ...


def state_path(settings: Settings) -> Path:
    """policy.state_path, or <data_dir>/policy.sqlite."""
    p = settings.policy.state_path
    return p.expanduser() if p is not None else settings.data_dir / "policy.sqlite"


def state_location(settings: Settings) -> str:
    """Where the learned state is, for messages: the SQLite file, or the database (no password)."""
    if settings.store.kind == "postgres" and settings.store.dsn is not None:
        from ragmend.pg import describe

        return describe(settings.store.dsn.get_secret_value())
    return str(state_path(settings))


def state_exists(settings: Settings) -> bool:
    """Whether there is a state to read (a database always has one: empty until learned)."""
    return settings.store.kind == "postgres" or state_path(settings).exists()


def make_store(settings: Settings, namespace: str = "default") -> PolicyStore:
    """The policy store `store.kind` names: SQLite at state_path, or PostgreSQL (ragmend/pg.py)."""
    if settings.store.kind == "postgres":
        from ragmend.policy.pgstore import PostgresStore

        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        return PostgresStore(
            settings.store.dsn.get_secret_value(), namespace, timeout_s=settings.store.connect_timeout_s
        )
    return SQLiteStore(state_path(settings))


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


# The context layout of a policy: the repair's unless it is built with another (the router's).
Layout = TypeVar("Layout", bound=ContextLayout, default=ContextBuilder)


class Policy(Generic[Layout]):
    def __init__(
        self,
        config: PolicySettings,
        store: PolicyStore,
        arms: Sequence[str],
        builder: Layout | None = None,
        max_staleness_s: float = 1.0,
    ):
        """`arms`: the names of the actions to choose among (the engine passes its catalogue).
        `max_staleness_s`: over a store other processes write to (`store.shared`), every arm's
        statistics are read again before a selection when this policy's copy is older."""
        self.arms: tuple[str, ...] = tuple(arms)
        check_enabled_actions(config.enabled_actions, self.arms)
        self.config = config
        self.builder: Layout = builder if builder is not None else cast(Layout, context_builder(config))
        self.store = store
        self._lock = threading.RLock()
        self._kind_changes = 0  # a new bandit's seeds differ from the one it replaces
        upgrade_layout(store, self.builder.feature_names(), self.builder.pooled_from())
        state = store.load(self.builder.feature_names(), self.arms)
        # The decision seeds continue from the number of updates already learned, so a restarted
        # server does not replay the exploration draws of its previous start.
        self.bandit = make_bandit(config, self.arms, self.builder.dim, seed=(config.seed, state.total_pulls))
        self.max_staleness_s = max_staleness_s
        self._loaded_at = 0.0  # time.monotonic() of the last read of every arm (set by _load)
        self._load(state)

    @classmethod
    def from_settings(
        cls, settings: Settings, arms: Sequence[str], store: PolicyStore | None = None
    ) -> Policy:
        """The configured policy over its configured store (`store.kind`: SQLite under files,
        PostgreSQL shared by replicas), or over `store` (e.g. a MemoryStore)."""
        if store is None:
            store = make_store(settings)
        return Policy(settings.policy, store, arms, max_staleness_s=settings.store.max_staleness_s)

    @classmethod
    def in_memory(cls, arms: Sequence[str], config: PolicySettings | None = None) -> Policy:
        return Policy(config or PolicySettings(), MemoryStore(), arms)

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
        """x (Appendix B) of the repair's layout. See ContextBuilder.build for what the budgets mean."""
        if not isinstance(self.builder, ContextBuilder):
            raise TypeError(f"this policy's context is a {type(self.builder).__name__}, not the repair's")
        return self.builder.build(embedding, diagnosis, latency_left_s, memory_left_bytes)

    def select(
        self, x: np.ndarray, feasible: Sequence[str], seed: int | None = None, ties: TieBreak = "random"
    ) -> Decision:
        """The action to run among `feasible` (actions that fit the remaining budget); `ties` as in
        Bandit.select.

        Disabled arms are dropped here too: the caller masked with the enabled actions it read,
        and an admin may have disabled one since. ArmsDisabled when none is left."""
        if isinstance(feasible, str):
            raise InputError("feasible must be a list of action names, not one string")
        with self._lock:
            enabled = set(self.config.enabled_actions)
            offered = list(feasible)
            # Unknown names stay in: the bandit names them in its error.
            allowed = [a for a in offered if a in enabled or a not in self.arms]
            if offered and not allowed:
                raise ArmsDisabled(f"every feasible action is disabled: {', '.join(offered)}")
            self._refresh_if_stale()
            return self.bandit.select(x, allowed, seed=seed, ties=ties)

    def _refresh_if_stale(self) -> None:
        """Other replicas' updates, read before selecting when ours are older than the bound:
        only the arms whose pull count changed are reloaded (one O(d^3) inverse each)."""
        if (
            not getattr(self.store, "shared", False)
            or time.monotonic() - self._loaded_at < self.max_staleness_s
        ):
            return
        try:
            state = self.store.load(self.builder.feature_names(), self.arms)
        except StoreUnavailable as e:
            # A selection with this replica's own copy beats a failed request; the next one
            # tries again (the copy's age is not reset).
            log.warning("policy: other replicas' statistics not read (%s); selecting with this copy", e)
            return
        for arm in self.arms:
            fresh = state.arm(arm)
            if fresh.pulls != self._stats[arm].pulls:
                self.bandit.load_arm(arm, fresh)
                self._stats[arm] = fresh
        self._loaded_at = time.monotonic()

    def budgets_for(self, memory_source: str = "nvml") -> Budgets:
        """The scaled per-action budgets for a memory reading of this source (action_budgets;
        "nvml": accelerator memory)."""
        return action_budgets(self.config, memory_source)

    def reward(
        self,
        diagnosis: Diagnosis,
        latency_s: float,
        memory_bytes: float | None,
        memory_source: str = "nvml",
        abstained: bool = False,
        presented_conflict: bool = False,
    ) -> Reward:
        """Eq. 2 for the repaired answer, with the configured variant and scaled budgets;
        `abstained`: the answer is an abstention over the evidence `diagnosis` judged;
        `presented_conflict`: it is both sides of the conflict `diagnosis` found."""
        variant: RewardVariant = self.config.reward_variant
        budgets = self.budgets_for(memory_source)
        return compute_reward(
            diagnosis,
            latency_s,
            memory_bytes=memory_bytes,
            budgets=budgets,
            variant=variant,
            abstained=abstained,
            presented_conflict=presented_conflict,
        )

    def update(self, arm: str, x: np.ndarray, reward: Reward | float) -> bool:
        """Learn from the outcome of `arm` in context x. Persists first, then updates memory.

        Returns False (and changes nothing) when learning is off.
        """
        r = check_reward(reward.total if isinstance(reward, Reward) else reward)
        with self._lock:
            if not self.config.learn:
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
        return self.config.learn

    @property
    def enabled_actions(self) -> tuple[str, ...]:
        return self.config.enabled_actions

    def configure(self, **changes: Any) -> tuple[str, ...]:
        """Change the tunable settings (LIVE_POLICY_KEYS) at runtime; returns the keys that changed.

        Validated as the configuration is (PolicySettings' constraints: InputError naming
        policy.<key>), all or nothing, under the lock: a request in flight sees the old settings
        or the new ones, never half of each. The stored sums are never touched: a new kind is
        rebuilt from them (LinUCB and LinTS share the ridge sums, BetaTS reads the counts), a
        disabled arm keeps its statistics. Not persisted: the configuration file is.
        """
        fixed = sorted(set(changes) - set(LIVE_POLICY_KEYS))
        if fixed:
            raise InputError(
                f"policy setting(s) {', '.join(fixed)} cannot change at runtime (restart with the new "
                f"configuration); runtime: {', '.join(LIVE_POLICY_KEYS)}"
            )
        with self._lock:
            old = self.config
            try:
                new = PolicySettings.model_validate({**old.model_dump(), **changes})
            except ValidationError as e:
                raise InputError(
                    "invalid configuration: " + describe_validation(e, prefix="policy")
                ) from None
            check_enabled_actions(new.enabled_actions, self.arms, InputError)
            changed = tuple(k for k in LIVE_POLICY_KEYS if getattr(new, k) != getattr(old, k))
            if not changed:
                return ()
            bandit = self.bandit
            if new.kind != old.kind:
                self._kind_changes += 1
                seed = (new.seed, sum(s.pulls for s in self._stats.values()), self._kind_changes)
                bandit = make_bandit(new, self.arms, self.dim, seed=seed)
                # From the sums in memory (the store's, as of the last load or update): no I/O under
                # the lock, and nothing the running policy had is lost.
                bandit.load(PolicyState(self.builder.feature_names(), dict(self._stats)))
            elif new.alpha != old.alpha and isinstance(bandit, LinUCB):
                bandit.set_alpha(new.alpha)
            if any(k in changed for k in _CONTEXT_BUDGET_KEYS):
                # The context's latency_left / memory_left are fractions of these budgets; a restart
                # with the new values would normalise the same way. Same layout: the state still fits.
                self.builder = cast(Layout, self.builder.with_budgets(new))
            self.bandit, self.config = bandit, new
            return changed

    @property
    def alpha(self) -> float | None:
        return self.bandit.alpha if isinstance(self.bandit, LinUCB) else None

    def stats(self) -> dict[str, ArmSummary]:
        """Pulls and mean reward of every arm, enabled or not (for metrics and the admin API):
        over a shared store, no older than the staleness bound, as a selection would see them."""
        with self._lock:
            self._refresh_if_stale()
            return {
                a: ArmSummary(
                    arm=a,
                    pulls=s.pulls,
                    mean_reward=s.mean_reward,
                    successes=s.successes,
                    failures=s.failures,
                )
                for a, s in self._stats.items()
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
        self._loaded_at = time.monotonic()
