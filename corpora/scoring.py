"""Answer scoring shared by the benchmarks and the evaluation harness.

HotpotQA: the official normalisation (lower case, no punctuation, no articles, single spaces),
exact match and token F1 (yes / no / noanswer only match exactly, as in the official script).
FEVER: the label read from a claim-mode response (diagnosis.hypotheses.parse_claim_label).
"""

from __future__ import annotations

import re
import string
from collections import Counter

from ragmend.diagnosis.hypotheses import parse_claim_label

_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD/HotpotQA normalisation: lower case, no punctuation, no articles, single spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def answer_correct(response: str, gold: str) -> bool:
    """The normalised gold answer occurs in the normalised response (yes / no exclusively)."""
    g, r = normalize_answer(gold), normalize_answer(response)
    if g in ("yes", "no"):
        other = "no" if g == "yes" else "yes"
        return re.search(rf"\b{g}\b", r) is not None and re.search(rf"\b{other}\b", r) is None
    return bool(g) and re.search(rf"\b{re.escape(g)}\b", r) is not None


def answer_em(response: str, gold: str) -> bool:
    return normalize_answer(response) == normalize_answer(gold)


def answer_f1(response: str, gold: str) -> float:
    """HotpotQA's token F1 (hotpot_evaluate_v1.py)."""
    pred, truth = normalize_answer(response), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (pred in special or truth in special) and pred != truth:
        return 0.0
    p, t = pred.split(), truth.split()
    common = sum((Counter(p) & Counter(t)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(t)
    return 2 * precision * recall / (precision + recall)


def fever_label(response: str) -> str | None:
    """SUPPORTS | REFUTES | NOT ENOUGH INFO from a claim-mode response; None when it has none."""
    return parse_claim_label(response)[0]
