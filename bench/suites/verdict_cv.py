"""Out-of-fold figures of the verdict on its DEV cases (`ragmend verdict cv`): how a choice of
features or fitting would do on cases it was not fitted on, read without touching a test split.

Cases sharing their sources stay in one fold (RAGTruth has six responses per source: split
apart, a fold would be scored on the very passages it was fitted on); each fold's cases are
scored by a verdict fitted on every other case, the local generator's answers included.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragmend.bench.stats import auroc
from ragmend.bench.suites.detect import decision_figures
from ragmend.corpora.cases import Case
from ragmend.diagnosis.premises import premise_text
from ragmend.diagnosis.verdict import refutation
from ragmend.train.verdict import Example, fit_verdict

# The bars of diagnosis.refute_threshold compared (None: the score alone decides).
REFUTE_BARS: tuple[float | None, ...] = (None, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)


def source_group(case: Case) -> str:
    """Which cases share a fold: those judged against the same first passage."""
    return premise_text(case.passages[0]) if case.passages else f"{case.set}/{case.id}"


def cross_validate(
    exs: Sequence[Example],
    cases: Mapping[tuple[str, str], Case],
    folds: int = 5,
    sets: Sequence[str] = ("ragtruth", "fever", "hotpotqa"),
    refute_bars: Sequence[float | None] = REFUTE_BARS,
) -> dict[str, Any]:
    """Per data set of `sets` (those with both labels): n, out-of-fold AUROC and F1 at each
    fold's own operating threshold, and under `refute`, by bar of diagnosis.refute_threshold,
    the decision's F1, precision, recall and share of supported answers flagged when a claim
    contradicted at the bar also fails an answer (decision.VERDICT_RULES)."""
    fold = [zlib.crc32(source_group(cases[(ex.set, ex.id)]).encode()) % folds for ex in exs]
    scored: dict[str, list[tuple[bool, float, bool, float]]] = {s: [] for s in sets}
    for k in range(folds):
        model = fit_verdict([ex for ex, f in zip(exs, fold, strict=True) if not (ex.set in sets and f == k)])
        for ex, f in zip(exs, fold, strict=True):
            if ex.set in sets and f == k:
                p_ex, threshold = model.score(ex.answer, ex.claims)
                scored[ex.set].append((ex.unsupported, p_ex, p_ex >= threshold, refutation(ex.claims)))
    out: dict[str, Any] = {}
    for name, rows in scored.items():
        if not rows:
            continue
        y = np.array([r[0] for r in rows], dtype=bool)
        p = np.array([r[1] for r in rows])
        flagged = np.array([r[2] for r in rows], dtype=bool)
        refuted = np.array([r[3] for r in rows])
        tp = int((flagged & y).sum())
        out[name] = {
            "n": len(rows),
            "auroc": round(auroc(p, y), 4) if 0 < y.sum() < len(y) else None,
            "f1": round(2 * tp / max(1, int(flagged.sum() + y.sum())), 4),
            "refute": {
                str(bar): decision_figures(flagged | (bar is not None and refuted >= bar), y)
                for bar in refute_bars
            },
        }
    return {"folds": folds, "sets": out}
