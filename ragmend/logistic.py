"""L2 logistic regression: fitted by the evaluation and the verdict trainer, applied by the
diagnosis at request time (diagnosis/verdict.py), so it sits below both."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Logistic:
    """A fitted logistic regression over standardised features."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.coef + self.intercept

    def proba(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(x)))


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    l2: float = 1.0,
    steps: int = 500,
    balanced: bool = True,
    weights: np.ndarray | None = None,
    signs: np.ndarray | None = None,
) -> Logistic:
    """L2 logistic regression by Newton's method on standardised features; the intercept is not
    shrunk. `balanced`: each class weighs half, however many samples it has (a ranking score);
    unbalanced, the probabilities are calibrated to the fitting data's base rate. `weights`: one
    per sample, multiplied in (for example so that each data set of a mix weighs the same).
    `signs`: per feature +1 (its weight may not be negative), -1 (not positive) or 0 (free); a
    weight the data would push past its sign is held at 0 (an active set: Newton on the free
    weights, a held weight released again where the gradient points into its allowed side)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-9
    z = np.column_stack([(x - mean) / scale, np.ones(len(x))])
    y = np.asarray(y, dtype=np.float64)
    sw = (
        np.where(y > 0, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1)) * len(y)
        if balanced
        else np.ones(len(y))
    )
    if weights is not None:
        sw = sw * np.asarray(weights, dtype=np.float64)
    sign = np.zeros(z.shape[1]) if signs is None else np.append(np.asarray(signs, dtype=np.float64), 0.0)
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    held = np.zeros(z.shape[1], dtype=bool)
    for _ in range(z.shape[1] + 1):  # each round holds or releases at least one weight
        free = ~held
        for _ in range(steps):
            p = 1 / (1 + np.exp(-(z @ w)))
            grad = z.T @ (sw * (p - y)) + reg * w
            hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg + 1e-9)
            step = np.zeros_like(w)
            step[free] = np.linalg.solve(hess[np.ix_(free, free)], grad[free])
            w -= step
            if np.abs(step).max() < 1e-8:
                break
        wrong = (sign * w < 0) & free
        p = 1 / (1 + np.exp(-(z @ w)))
        grad = z.T @ (sw * (p - y)) + reg * w
        release = held & (sign * grad < 0)  # the loss falls moving into the allowed side
        if not wrong.any() and not release.any():
            break
        w[wrong] = 0.0
        held = (held | wrong) & ~release
    return Logistic(mean, scale, w[:-1], float(w[-1]))
