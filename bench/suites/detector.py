"""`ragmend detector eval`: the hallucination detector alone on RAGTruth, measured as the
published detectors are: response-level precision / recall / F1 per task and overall, AUROC, and
character-level span F1, at one threshold chosen on the sources of RAGTruth's train sample held
out of the detector's training (123 of its 391 responses: corpora/cases.py `ragtruth_held`) and
applied unchanged to TEST (2,598), with seconds per response.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.stats import auroc, median
from ragmend.bench.suites.detect import decision_figures, span_figures
from ragmend.corpora.cases import RAGTRUTH_TEST, RAGTRUTH_TRAIN, Case, ragtruth_cases, ragtruth_held
from ragmend.models.detector import Detection, Detector, open_detector

THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.05, 0.96, 0.05))

Scored = list[tuple[Case, Detection, float]]  # each response, its detection, its seconds


def score_cases(detector: Detector, cases: Sequence[Case], log: Callable[[str], None]) -> Scored:
    out: Scored = []
    for n, case in enumerate(cases, start=1):
        t0 = time.perf_counter()
        d = detector.detect(case.query, [p.text for p in case.passages], case.response)
        out.append((case, d, time.perf_counter() - t0))
        if n % 100 == 0:
            log(f"{n}/{len(cases)}")
    return out


def figures(scored: Scored, threshold: float) -> dict[str, Any]:
    """Per task and overall, at `threshold`."""
    out: dict[str, Any] = {}
    for task in [*sorted({c.group for c, _, _ in scored}), "all"]:
        rows = [(c, d) for c, d, _ in scored if task in ("all", c.group)]
        p = np.array([d.p_unsupported for _, d in rows])
        y = np.array([c.unsupported for c, _ in rows])
        spans = [tuple((a, b) for a, b, q in d.token_probs if q >= threshold) for _, d in rows]
        out[task] = {
            "n": len(rows),
            "hallucinated": int(y.sum()),
            "response": decision_figures(p >= threshold, y),
            "auroc": round(float(auroc(p, y)), 4) if y.any() and not y.all() else None,
            "spans": span_figures(spans, [c.spans for c, _ in rows]),
        }
    return out


def best_threshold(scored: Scored) -> float:
    """The threshold of THRESHOLDS with the highest overall response-level F1."""
    return max(THRESHOLDS, key=lambda t: figures(scored, t)["all"]["response"]["f1"] or 0.0)


def run_detector_eval(
    model_dir: Path,
    data_root: Path,
    threshold: float | None,
    limit: int | None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The threshold from the train sample's held sources (unless given), then TEST at it."""
    detector = open_detector(model_dir)
    report: dict[str, Any] = {"model": str(model_dir)}
    if threshold is None:
        held = [c for c in ragtruth_cases(data_root / RAGTRUTH_TRAIN, "train") if ragtruth_held(c)]
        scored = score_cases(detector, held, log)
        threshold = best_threshold(scored)
        report["train_sample_held"] = {"threshold": threshold, **figures(scored, threshold)}
    test = score_cases(detector, ragtruth_cases(data_root / RAGTRUTH_TEST, "test", limit), log)
    seconds = [s for _, _, s in test]
    report["test"] = {
        "data": f"{RAGTRUTH_TEST} ({'all' if limit is None else f'a sample of {limit}'})",
        "threshold": threshold,
        **figures(test, threshold),
        "p50_s": round(median(seconds), 4),
        "windows_p50": float(np.median([d.windows for _, d, _ in test])),
    }
    return report
