"""Temperature scaling for an NLI model's probabilities (Guo et al., 2017).

One scalar T divides the logits; it is fitted on held-out pairs by minimising the negative
log-likelihood. It never changes the argmax (accuracy stays), only how confident the
probabilities are, which is what the diagnosis thresholds read. The fit works from the role's
own probabilities at T = 1: log p equals the logits up to a per-row constant, which softmax
ignores, so any runtime (ONNX or transformers) can be calibrated the same way.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.corpora.readers import NLI_LABELS, NLIPair
from ragmend.fileio import atomic_write_json

_EPS = 1e-12


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    p = _softmax(logits / temperature)
    return float(-np.mean(np.log(p[np.arange(len(labels)), labels] + _EPS)))


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = 15) -> float:
    """Top-label ECE: |accuracy - confidence| averaged over equal-width confidence bins."""
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        in_bin = (conf > lo) & (conf <= hi)
        if in_bin.any():
            total += in_bin.mean() * abs(correct[in_bin].mean() - conf[in_bin].mean())
    return float(total)


def fit_temperature(logits: np.ndarray, labels: np.ndarray, lo: float = 0.05, hi: float = 20.0) -> float:
    """argmin_T NLL(logits / T) by golden-section search on log T (NLL is unimodal in it)."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = nll(logits, labels, math.exp(c)), nll(logits, labels, math.exp(d))
    for _ in range(80):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = nll(logits, labels, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = nll(logits, labels, math.exp(d))
    return math.exp((a + b) / 2)


def calibrate(model: Any, pairs: list[NLIPair], source: str) -> dict[str, Any]:
    """Fit T for an NLI role object on `pairs`; returns the calibration record (not yet saved)."""
    if not pairs:
        raise ValueError("calibration needs at least one pair")
    order = {lab: i for i, lab in enumerate(NLI_LABELS)}
    labels = np.array([order[p.label] for p in pairs])
    previous, model.temperature = model.temperature, 1.0
    try:
        probs = model.predict([(p.premise, p.hypothesis) for p in pairs]).probs.astype(np.float64)
    finally:
        model.temperature = previous
    logits = np.log(probs + _EPS)
    t = fit_temperature(logits, labels)
    calibrated = _softmax(logits / t)
    return {
        "temperature": round(t, 4),
        "fitted_on": source,
        "n": len(pairs),
        "accuracy": round(float((probs.argmax(axis=1) == labels).mean()), 4),
        "nll_before": round(nll(logits, labels), 4),
        "nll_after": round(nll(logits, labels, t), 4),
        "ece_before": round(expected_calibration_error(probs, labels), 4),
        "ece_after": round(expected_calibration_error(calibrated, labels), 4),
    }


def save_calibration(model_dir: Path, record: dict[str, Any]) -> Path:
    return atomic_write_json(model_dir / "calibration.json", record)
