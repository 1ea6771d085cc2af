"""The paper's Thompson sampling baseline: context-free Beta-Bernoulli.

Each arm has a Beta(1 + successes, 1 + failures) posterior over its chance of a "good" repair;
a reward counts as a success when it reaches the threshold (the reference code binarises the
Eq. 2 reward with `0 if r < threshold else 1`, at 0.4). The context is accepted
(and checked) for a uniform interface but not used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragmend.policy.bandit import Bandit
from ragmend.policy.types import ArmStats, PolicyKind


def binarise(reward: float, threshold: float) -> bool:
    return reward >= threshold


class BetaTS(Bandit):
    kind: PolicyKind = "beta_ts"

    def __init__(self, arms: Sequence[str], dim: int, threshold: float = 0.4, seed: int | Sequence[int] = 0):
        super().__init__(arms, dim, seed)
        if not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
            raise ValueError(f"beta_threshold must be in [0, 1], got {threshold}")
        self.threshold = float(threshold)
        self.successes = dict.fromkeys(self.arms, 0)
        self.failures = dict.fromkeys(self.arms, 0)

    def posterior(self, arm: str) -> tuple[int, int]:
        """(alpha, beta) of the arm's Beta posterior."""
        return 1 + self.successes[arm], 1 + self.failures[arm]

    def load_arm(self, arm: str, stats: ArmStats) -> None:
        self.successes[arm], self.failures[arm] = stats.successes, stats.failures

    def _update(self, arm: str, x: np.ndarray, reward: float) -> None:
        if binarise(reward, self.threshold):
            self.successes[arm] += 1
        else:
            self.failures[arm] += 1

    def _score(self, arm: str, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        a, b = self.posterior(arm)
        mean = a / (a + b)
        return mean, float(rng.beta(a, b)) - mean
