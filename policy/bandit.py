"""What every policy shares: the arm set, input checks, one seeded RNG per decision, the argmax
with random tie-breaking, and the Decision it returns. A policy only says how it scores an arm
(`_score`), how one observation changes it (`_update`) and how it is set from stored sums
(`load_arm`): the river-style select / update pair on top of MABWiser-style per-arm models.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ragmend.errors import InputError
from ragmend.policy.types import ArmStats, Decision, PolicyKind, PolicyState

# Scores within this (relative) distance of the best are ties. At the start every arm scores the
# same; always taking the first would never explore the others under alpha = 0.
TIE_RTOL = 1e-12
TieBreak = Literal["random", "first"]


class Bandit(ABC):
    kind: PolicyKind

    def __init__(self, arms: Sequence[str], dim: int, seed: int | Sequence[int] = 0):
        arms = tuple(arms)
        if not arms:
            raise ValueError("a policy needs at least one arm")
        if len(set(arms)) != len(arms):
            raise ValueError(f"arm names must be unique, got {list(arms)}")
        if dim < 1:
            raise ValueError("the context needs at least one feature")
        self.arms = arms
        self.dim = dim
        # Draws one seed per decision; the decision's own Generator is built from it, so a logged
        # Decision.seed replays that decision's draws whatever happened before it.
        self._seeds = np.random.default_rng(seed)

    # --- what a policy implements -------------------------------------------------------------

    @abstractmethod
    def _score(self, arm: str, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        """(exploit, explore) of one arm; the arm's score is their sum."""

    @abstractmethod
    def _update(self, arm: str, x: np.ndarray, reward: float) -> None: ...

    @abstractmethod
    def load_arm(self, arm: str, stats: ArmStats) -> None:
        """Set one arm from its sums (replacing what was there)."""

    # --- shared -------------------------------------------------------------------------------

    def load(self, state: PolicyState) -> None:
        if state.dim != self.dim:
            raise InputError(f"policy state has {state.dim} context features, this policy {self.dim}")
        for arm in self.arms:
            self.load_arm(arm, state.arm(arm))

    def select(
        self, x: np.ndarray, feasible: Sequence[str], seed: int | None = None, ties: TieBreak = "random"
    ) -> Decision:
        """The arm to pull among `feasible` (masking is the caller's: only these are scored).

        seed: replay a logged decision; by default the next seed of this policy's sequence.
        ties: "random" (a seeded draw among the best), or "first": the first of them in
        `feasible`'s order, for a caller whose order is a preference (the router's configured
        plans, so a router that has learned nothing starts on the first, not on a random one).
        """
        x = self.check_x(x)
        candidates = self._feasible(feasible)
        if seed is None:
            seed = int(self._seeds.integers(2**63))
        rng = np.random.default_rng(seed)
        scores, exploit, explore = {}, {}, {}
        for arm in candidates:
            e, u = self._score(arm, x, rng)
            exploit[arm], explore[arm], scores[arm] = e, u, e + u
        best = max(scores.values())
        best_arms = [a for a in candidates if scores[a] >= best - TIE_RTOL * max(1.0, abs(best))]
        if len(best_arms) == 1 or ties == "first":
            chosen = best_arms[0]
        else:
            chosen = best_arms[int(rng.integers(len(best_arms)))]
        kept = set(candidates)
        return Decision(
            arm=chosen,
            kind=self.kind,
            scores=scores,
            exploit=exploit,
            explore=explore,
            seed=seed,
            masked=tuple(a for a in self.arms if a not in kept),
        )

    def update(self, arm: str, x: np.ndarray, reward: float) -> None:
        """Learn from one observation of the chosen arm (only that arm changes)."""
        self._update(self._known(arm), self.check_x(x), check_reward(reward))

    def check_x(self, x: np.ndarray) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float64)
        if arr.shape != (self.dim,):
            raise InputError(f"context must be a vector of {self.dim} numbers, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise InputError("context holds a NaN or an infinity")
        return arr

    def _known(self, arm: str) -> str:
        if arm not in self.arms:
            raise InputError(f"unknown action {arm!r}; the policy's actions are {', '.join(self.arms)}")
        return arm

    def _feasible(self, feasible: Sequence[str]) -> list[str]:
        if isinstance(feasible, str):
            raise InputError("feasible must be a list of action names, not one string")
        out = list(dict.fromkeys(feasible))  # order kept, duplicates dropped
        if not out:
            raise InputError("no feasible action to choose from (mask before calling select)")
        unknown = [a for a in out if a not in self.arms]
        if unknown:
            raise InputError(f"unknown action(s) {unknown}; the policy's actions are {', '.join(self.arms)}")
        return out


def check_reward(reward: float) -> float:
    r = float(reward)
    if not math.isfinite(r):
        raise InputError(f"reward must be a finite number, got {reward}")
    return r
