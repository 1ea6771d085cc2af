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
