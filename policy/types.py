"""The values the policy hands to other packages and to its store. Frozen: they cross into engine/,
the server's metrics and admin endpoints, and the state store.

Per-arm statistics are kept as SUMS (sum of x x^T, sum of r x, counts), never as derived
quantities (A^-1, theta, a mean): sums add, so increments from several replicas, or from an
offline warm start, merge by addition (docs/policy.md, "State store").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

PolicyKind = Literal["linucb", "lints", "beta_ts"]
POLICY_KINDS: tuple[PolicyKind, ...] = ("linucb", "lints", "beta_ts")


def frozen_array(values: np.ndarray | list, shape: tuple[int, ...]) -> np.ndarray:
    """A float64 copy that cannot be written to (so a frozen value stays frozen)."""
    arr = np.array(values, dtype=np.float64, copy=True)
    if arr.shape != shape:
        raise ValueError(f"expected shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


# eq=False: numpy arrays do not compare to one bool; compare with ArmStats.same_as in tests.
@dataclass(frozen=True, eq=False, kw_only=True)
class ArmStats:
    """Sufficient statistics of one arm, as sums over its updates.

    A = ridge_lambda * I + xtx and b = xty (Eq. 3); the Beta posterior of the context-free
    policy is Beta(1 + successes, 1 + failures). All kinds keep all of them, so the kind can
    change (configuration, import) without forgetting what was learned.
    """

    pulls: int
    reward_sum: float
    successes: int  # updates whose reward reached the binarisation threshold
    failures: int
    xtx: np.ndarray  # (d, d): sum of x x^T
    xty: np.ndarray  # (d,): sum of r x

    @classmethod
    def zero(cls, dim: int) -> ArmStats:
        return cls(
            pulls=0,
            reward_sum=0.0,
            successes=0,
            failures=0,
            xtx=frozen_array(np.zeros((dim, dim)), (dim, dim)),
            xty=frozen_array(np.zeros(dim), (dim,)),
        )

    @property
    def dim(self) -> int:
        return int(self.xty.shape[0])

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.pulls if self.pulls else None

    def plus(self, x: np.ndarray, reward: float, success: bool) -> ArmStats:
        """These sums with one more observation (Eq. 3 without the prior)."""
        return ArmStats(
            pulls=self.pulls + 1,
            reward_sum=self.reward_sum + reward,
            successes=self.successes + int(success),
            failures=self.failures + int(not success),
            xtx=frozen_array(self.xtx + np.outer(x, x), self.xtx.shape),
            xty=frozen_array(self.xty + reward * x, self.xty.shape),
        )

    def same_as(self, other: ArmStats, rtol: float = 0.0) -> bool:
        counts = (self.pulls, self.successes, self.failures) == (other.pulls, other.successes, other.failures)
        return bool(
            counts
            and np.isclose(self.reward_sum, other.reward_sum, rtol=rtol, atol=0.0)
            and np.allclose(self.xtx, other.xtx, rtol=rtol, atol=0.0)
            and np.allclose(self.xty, other.xty, rtol=rtol, atol=0.0)
        )


@dataclass(frozen=True, eq=False)
class PolicyState:
    """Everything the store holds: the context layout it was learned with and each arm's sums."""

    feature_names: tuple[str, ...]
    arms: dict[str, ArmStats] = field(default_factory=dict)  # do not mutate; build a new state

    @property
    def dim(self) -> int:
        return len(self.feature_names)

    @property
    def total_pulls(self) -> int:
        return sum(s.pulls for s in self.arms.values())

    def arm(self, name: str) -> ArmStats:
        return self.arms.get(name) or ArmStats.zero(self.dim)


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One selection and why: every feasible arm's score split into its two parts.

    LinUCB: exploit = x^T theta_a, explore = alpha * sqrt(x^T A_a^-1 x).
    LinTS: exploit = x^T theta_a, explore = the sampled deviation (score - exploit).
    BetaTS: exploit = the posterior mean, explore = the sampled deviation.
    """

    arm: str
    kind: PolicyKind
    scores: dict[str, float]  # feasible arm -> score that was maximised, in the order given
    exploit: dict[str, float]
    explore: dict[str, float]
    seed: int  # the seed of this decision's RNG: replays its draws (Thompson samples, ties)
    masked: tuple[str, ...] = ()  # arms not weighed: not feasible, or disabled (policy.enabled_actions)

    @property
    def score(self) -> float:
        return self.scores[self.arm]


@dataclass(frozen=True, kw_only=True)
class ArmSummary:
    """Per-arm figures for metrics and the admin endpoint."""

    arm: str
    pulls: int
    mean_reward: float | None  # None before the first update
    successes: int
    failures: int
