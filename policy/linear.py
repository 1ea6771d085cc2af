"""Linear contextual bandits: one small ridge-regression core per arm, and the two policies that
differ from it only in how an arm is scored (the shape of MABWiser's mabwiser/linear.py).

RidgeArm keeps A = lambda I + sum x x^T, its inverse, b = sum r x and theta = A^-1 b. The inverse
follows each update by the Sherman-Morrison rank-1 formula (O(d^2), never a per-call inverse):
    A^-1 <- A^-1 - (A^-1 x)(A^-1 x)^T / (1 + x^T A^-1 x)
and is recomputed from A every `refresh_every` updates, or at once when a cheap check finds
that it has drifted (A (A^-1 x) should give x back), so rounding error stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragmend.policy.bandit import Bandit
from ragmend.policy.types import ArmStats, PolicyKind

DRIFT_TOL = 1e-8  # relative residual of A (A^-1 x) = x that triggers a full re-inversion
# Rows per block of an update: a block of A^-1 and one of A (128 KiB each) stay in cache together.
BLOCK_BYTES = 1 << 17


class RidgeArm:
    """Online ridge regression for one arm (Eq. 3)."""

    def __init__(self, dim: int, ridge_lambda: float = 1.0, refresh_every: int = 1000):
        if ridge_lambda <= 0:
            raise ValueError("ridge_lambda must be > 0 (A must start invertible)")
        self.dim = dim
        self.ridge_lambda = float(ridge_lambda)
        self.refresh_every = refresh_every
        self.refreshes = 0  # periodic or drift-triggered re-inversions (not the ones in load)
        self.load(ArmStats.zero(dim))

    def load(self, stats: ArmStats) -> None:
        """Set the model from sums (a store, an import, another replica's merged increments)."""
        self.A = self.ridge_lambda * np.eye(self.dim) + stats.xtx
        self.b = np.array(stats.xty, dtype=np.float64)
        if stats.xtx.any():
            self._invert()
        else:
            # The prior alone: its inverse is exact and free, where an O(d^3) inversion per arm
            # would dominate the start of a policy with a large context.
            self.A_inv = np.eye(self.dim) / self.ridge_lambda
            self.theta = self.A_inv @ self.b
            self.since_refresh = 0

    def refresh(self) -> None:
        """A^-1 from A itself: the bound on accumulated Sherman-Morrison rounding error."""
        self._invert()
        self.refreshes += 1

    def _invert(self) -> None:
        inv = np.linalg.inv(self.A)
        self.A_inv = (inv + inv.T) / 2  # A is symmetric; keep its inverse exactly so
        self.theta = self.A_inv @ self.b
        self.since_refresh = 0

    def partial_fit(self, x: np.ndarray, reward: float) -> None:
        a_inv_x = self.A_inv @ x
        denom = 1.0 + float(x @ a_inv_x)
        # A^-1 -= w w^T with w = A^-1 x / sqrt(denom): the Sherman-Morrison term, bitwise symmetric.
        w = a_inv_x / math.sqrt(denom)
        # Sherman-Morrison gives the new inverse applied to x for free: A_new^-1 x = A_old^-1 x / denom.
        probe = a_inv_x / denom
        self.b += reward * x
        residual = np.empty(self.dim)
        # Block by block: each block of rows of A^-1 and A is updated and then used (theta, the
        # drift check) while it is in cache, so each matrix is read and written once per update
        # rather than once per numpy operation; at large d the update is memory-bound.
        rows = max(1, BLOCK_BYTES // (8 * self.dim))
        for i in range(0, self.dim, rows):
            inv_rows, a_rows = self.A_inv[i : i + rows], self.A[i : i + rows]
            inv_rows -= np.multiply.outer(w[i : i + rows], w)
            a_rows += np.multiply.outer(x[i : i + rows], x)
            self.theta[i : i + rows] = inv_rows @ self.b
            residual[i : i + rows] = a_rows @ probe
        residual -= x
        self.since_refresh += 1
        drifted = float(np.linalg.norm(residual)) > DRIFT_TOL * max(1.0, float(np.linalg.norm(x)))
        if drifted or self.since_refresh >= self.refresh_every:
            self.refresh()

    def predict(self, x: np.ndarray) -> float:
        """The ridge estimate x^T theta."""
        return float(x @ self.theta)

    def variance(self, x: np.ndarray) -> float:
        """x^T A^-1 x: the width of the confidence ellipsoid in direction x (>= 0)."""
        return max(0.0, float(x @ self.A_inv @ x))


class LinearBandit(Bandit):
    """A RidgeArm per arm; subclasses only say how to score an arm (LinUCB, LinTS)."""

    kind: PolicyKind

    def __init__(
        self,
        arms: Sequence[str],
        dim: int,
        ridge_lambda: float = 1.0,
        seed: int | Sequence[int] = 0,
        refresh_every: int = 1000,
    ):
        super().__init__(arms, dim, seed)
        self.models = {a: RidgeArm(dim, ridge_lambda, refresh_every) for a in self.arms}

    def load_arm(self, arm: str, stats: ArmStats) -> None:
        self.models[arm].load(stats)

    def _update(self, arm: str, x: np.ndarray, reward: float) -> None:
        self.models[arm].partial_fit(x, reward)

    def coefficients(self, arm: str) -> np.ndarray:
        """theta_a, for explanation (one weight per context feature)."""
        return self.models[self._known(arm)].theta.copy()


class LinUCB(LinearBandit):
    """Eq. 1: a* = argmax_a x^T theta_a + alpha * sqrt(x^T A_a^-1 x)."""

    kind: PolicyKind = "linucb"

    def __init__(
        self,
        arms: Sequence[str],
        dim: int,
        alpha: float = 2.0,
        ridge_lambda: float = 1.0,
        seed: int | Sequence[int] = 0,
        refresh_every: int = 1000,
    ):
        super().__init__(arms, dim, ridge_lambda=ridge_lambda, seed=seed, refresh_every=refresh_every)
        self.set_alpha(alpha)

    def set_alpha(self, alpha: float) -> None:
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha}")
        self.alpha = float(alpha)

    def _score(self, arm: str, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        m = self.models[arm]
        return m.predict(x), self.alpha * math.sqrt(m.variance(x))


class LinTS(LinearBandit):
    """Linear Thompson sampling: theta~_a ~ N(theta_a, v^2 A_a^-1), score x^T theta~_a.

    Only x^T theta~_a is ever used, and for a fixed x it is exactly N(x^T theta_a, v^2 x^T A_a^-1 x);
    so the scalar is sampled directly (one normal per arm, O(d^2)) instead of the d-dimensional
    theta~ (a factorisation per arm per call, O(d^3)). Same distribution, same decisions.
    """

    kind: PolicyKind = "lints"

    def __init__(
        self,
        arms: Sequence[str],
        dim: int,
        v: float = 0.5,
        ridge_lambda: float = 1.0,
        seed: int | Sequence[int] = 0,
        refresh_every: int = 1000,
    ):
        super().__init__(arms, dim, ridge_lambda=ridge_lambda, seed=seed, refresh_every=refresh_every)
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"lints_v must be a finite number > 0, got {v}")
        self.v = float(v)

    def _score(self, arm: str, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        m = self.models[arm]
        return m.predict(x), self.v * math.sqrt(m.variance(x)) * float(rng.standard_normal())
