"""Fit the answerability model (diagnosis/answerability.py) on DEV questions.

One sign-constrained logistic regression on P(answerable). The three kinds of question weigh the
same (answerable HotpotQA, gold paragraphs removed, TruthfulQA): TruthfulQA's many easy questions
would otherwise set the weights, and the hard kind is the HotpotQA question whose own pages are
gone. The operating threshold is chosen on out-of-fold probabilities (folds by a hash of the id),
at Youden's J between answerable and unanswerable questions (each unanswerable kind half of its
class), so it is not the in-sample optimum; then the model is refitted on every DEV question.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragmend.diagnosis.answerability import FEATURES, SIGNS, AnswerabilityModel
from ragmend.diagnosis.verdict import LinearScore
from ragmend.logistic import fit_logistic


def _weights(kinds: np.ndarray) -> np.ndarray:
    """Each kind of question weighs one third of the fit, however many it has."""
    w = np.zeros(len(kinds))
    for kind in set(kinds.tolist()):
        mask = kinds == kind
        w[mask] = len(kinds) / (3 * mask.sum())
    return w


def _fit(x: np.ndarray, y: np.ndarray, kinds: np.ndarray, features: Sequence[str]) -> LinearScore:
    fitted = fit_logistic(
        x,
        y,
        l2=1.0,
        balanced=False,
        weights=_weights(kinds),
        signs=np.array([SIGNS[f] for f in features], dtype=np.float64),
    )
    return LinearScore.of(features, fitted)


def youden_threshold(p: np.ndarray, answerable: np.ndarray, kinds: np.ndarray) -> float:
    """The threshold on P(answerable) maximising (answerable kept) + (unanswerable flagged) - 1,
    each unanswerable kind weighing half of its class."""
    un_kinds = sorted(set(kinds[~answerable].tolist()))
    best, best_t = -1.0, 0.5
    for t in np.unique(np.round(p, 4)):
        kept = float((p[answerable] >= t).mean())
        flagged = float(np.mean([(p[kinds == k] < t).mean() for k in un_kinds]))
        if kept + flagged - 1 > best:
            best, best_t = kept + flagged - 1, float(t)
    return best_t


def fit_answerability(
    rows: Sequence[Mapping[str, Any]], features: Sequence[str] = FEATURES, folds: int = 5
) -> AnswerabilityModel:
    x = np.array([[r["features"][f] for f in features] for r in rows], dtype=np.float64)
    kinds = np.array([r["kind"] for r in rows])
    y = (kinds == "answerable").astype(np.float64)
    fold = np.array([zlib.crc32(str(r["id"]).encode()) % folds for r in rows])
    oof = np.zeros(len(rows))
    for k in range(folds):
        score = _fit(x[fold != k], y[fold != k], kinds[fold != k], features)
        oof[fold == k] = [score.probability(dict(zip(features, row, strict=True))) for row in x[fold == k]]
    threshold = youden_threshold(oof, y > 0, kinds)
    counts = {k: int((kinds == k).sum()) for k in sorted(set(kinds.tolist()))}
    about = {
        "fitted_on": "DEV questions of the unanswerable task (HotpotQA dev split, TruthfulQA dev split)",
        "counts": counts,
        "threshold": f"Youden's J on {folds}-fold out-of-fold probabilities",
        "command": "ragmend bench answerability --split dev --fit ragmend/assets/verdict/answerability.json",
    }
    return AnswerabilityModel(_fit(x, y, kinds, features), round(threshold, 4), about)
