"""`ragmend bench nli`: accuracy, macro-F1, confusion matrix and speed of an NLI model on a file."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmend.corpora.readers import NLI_LABELS, NLIPair


def classification_metrics(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] = NLI_LABELS
) -> dict[str, Any]:
    """Accuracy, macro-F1 over the labels present in `gold`, confusion[gold][pred] counts, and the
    false-entailment rate (false_entailment_rate)."""
    if len(gold) != len(pred):
        raise ValueError("gold and pred differ in length")
    confusion = {g: {p: 0 for p in labels} for g in labels}
    for g, p in zip(gold, pred, strict=True):
        confusion[g][p] += 1
    present = [lab for lab in labels if any(g == lab for g in gold)]
    f1s = []
    for lab in present:
        tp = confusion[lab][lab]
        fp = sum(confusion[g][lab] for g in labels if g != lab)
        fn = sum(confusion[lab][p] for p in labels if p != lab)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    n = len(gold)
    accuracy = sum(confusion[lab][lab] for lab in labels) / n if n else 0.0
    return {
        "n": n,
        "accuracy": round(accuracy, 4),
        "macro_f1": round(float(np.mean(f1s)) if f1s else 0.0, 4),
        "confusion": confusion,
        "false_entailment_rate": false_entailment_rate(confusion),
    }


def false_entailment_rate(confusion: dict[str, dict[str, int]]) -> float | None:
    """The share of neutral and contradiction pairs predicted entailment: how often the model
    would let an unsupported or contradicted claim pass. None without such pairs."""
    wrong = [g for g in ("neutral", "contradiction") if g in confusion]
    n = sum(sum(confusion[g].values()) for g in wrong)
    return round(sum(confusion[g].get("entailment", 0) for g in wrong) / n, 4) if n else None


def evaluate_nli(model: Any, pairs: list[NLIPair]) -> dict[str, Any]:
    """Run `model.predict` (the NLI role) over the pairs in one call and score it."""
    return score_nli(model, pairs)[0]


def score_nli(model: Any, pairs: list[NLIPair]) -> tuple[dict[str, Any], np.ndarray]:
    """The metrics of `evaluate_nli` and the (n, 3) probabilities behind them."""
    t0 = time.perf_counter()
    batch = model.predict([(p.premise, p.hypothesis) for p in pairs])
    seconds = time.perf_counter() - t0
    pred = [NLI_LABELS[i] for i in batch.probs.argmax(axis=1)]
    out = classification_metrics([p.label for p in pairs], pred)
    out["pairs_per_s"] = round(len(pairs) / seconds, 1) if seconds > 0 else 0.0
    out["truncated"] = int(sum(batch.truncated))
    return out, batch.probs
