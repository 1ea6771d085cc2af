"""`ragmend nli label`: a teacher NLI model writes soft labels onto pair files, for distillation.

The distillation route: train a large, slow model (mpnet-base) as the teacher, let it label many
in-domain pairs, and train the fast student (MiniLM-L6) on its probabilities
(`TrainConfig.soft_weight`). Each pair keeps its own label; the teacher's goes into `probs`, so
the student's targets can mix both and a report can say how often the teacher agrees with the
constructed labels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ragmend.corpora.readers import NLI_LABELS, NLIPair
from ragmend.models.nli import NLIModel

Progress = Callable[[int, int], None]  # (pairs labelled, pairs in all)


def label_pairs(
    teacher: NLIModel, pairs: list[NLIPair], chunk: int = 2048, progress: Progress | None = None
) -> list[NLIPair]:
    """The same pairs with the teacher's probabilities (NLI_LABELS order) in `probs`."""
    out: list[NLIPair] = []
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        probs = teacher.predict([(p.premise, p.hypothesis) for p in part]).probs
        for p, row in zip(part, probs, strict=True):
            out.append(dataclasses.replace(p, probs=(float(row[0]), float(row[1]), float(row[2]))))
        if progress:
            progress(len(out), len(pairs))
    return out


def agreement(pairs: list[NLIPair]) -> dict[str, Any]:
    """How the teacher's argmax compares with each pair's own label: overall and per label."""
    labelled = [p for p in pairs if p.probs is not None]
    if not labelled:
        return {"n": 0}
    argmax = [NLI_LABELS[int(np.argmax(p.probs))] for p in labelled if p.probs is not None]
    per_label = {}
    for lab in NLI_LABELS:
        rows = [a for p, a in zip(labelled, argmax, strict=True) if p.label == lab]
        if rows:
            share = sum(a == lab for a in rows) / len(rows)
            per_label[lab] = {"n": len(rows), "teacher_agrees": round(share, 4)}
    agree = sum(p.label == a for p, a in zip(labelled, argmax, strict=True))
    return {"n": len(labelled), "teacher_agrees": round(agree / len(labelled), 4), "by_label": per_label}
