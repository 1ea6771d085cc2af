"""Small statistics shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentiles_ms(seconds: Sequence[float]) -> dict[str, float]:
    a = np.asarray(seconds, dtype=np.float64) * 1000.0
    if not len(a):
        return {"n": 0}
    return {
        "n": len(a),
        "p50_ms": round(float(np.percentile(a, 50)), 3),
        "p95_ms": round(float(np.percentile(a, 95)), 3),
        "mean_ms": round(float(a.mean()), 3),
    }


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64))) if len(values) else 0.0


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half);
    nan when either class is empty."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # Midrank of each distinct value: the ranks below it plus the average of its own block.
    midrank = np.cumsum(counts) - (counts - 1) / 2.0
    ranks = midrank[inverse]
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auroc_interval(
    scores: np.ndarray, labels: np.ndarray, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the AUROC (items resampled with replacement)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(scores), size=(resamples, len(scores)))
    values = np.array([auroc(scores[d], labels[d]) for d in draws])
    lo, hi = np.nanpercentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def stratified_auroc(scores: np.ndarray, labels: np.ndarray, strata: np.ndarray) -> float:
    """AUROC over the positive-negative pairs that share a stratum (the per-stratum AUROCs weighted
    by their pair counts): what pooling strata with different base rates cannot inflate."""
    scores, labels, strata = np.asarray(scores), np.asarray(labels, dtype=bool), np.asarray(strata)
    total = weight = 0.0
    for s in np.unique(strata):
        m = strata == s
        pairs = float(labels[m].sum() * (~labels[m]).sum())
        if pairs:
            total += pairs * auroc(scores[m], labels[m])
            weight += pairs
    return total / weight if weight else float("nan")
