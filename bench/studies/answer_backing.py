"""How well an NLI model's support separates the generator's wrong HotpotQA answers from its right
ones, read without the rest of the diagnosis: for each cached answer (the detect workspace of
`ragmend bench detect`), each claim's best P(entailment) and best P(contradiction) over the
windows of its retrieved passages (two sentences each, the diagnosis' default), and per answer the
weakest claim's backing and the strongest contradiction. Prints AUROC of "wrong" for each, and
the share of wrong and of right answers backed at 0.5 or more. And the swap margin: in the window
that entails a claim most, the claim's P(entailment) less the best of the same claim with its
last name or number that the question does not hold replaced by another of the window's (of the
same shape: a number for a number), up to six; per answer its weakest claim's; AUROC of "wrong"
over the answers whose window offers such an alternative. A model that binds names to roles gives
a right answer a larger margin than a wrong one.

    ragmend study answer-backing --model bundled:ragmend-nli-minilm-l6 --split dev
    ragmend study answer-backing --model data/nli-mpnet-ablation-indomain-within/model --split dev

It asks whether a model that ranks a true sentence above its in-premise swap (docs/nli.md, "Names
in another role") also supports the generator's right answers more than its wrong ones; the
diagnosis' own rules (names, editions, roles, the verdict) are left out on purpose.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragmend.bench.stats import auroc
from ragmend.corpora.readers import read_jsonl
from ragmend.diagnosis.premises import premise_windows
from ragmend.diagnosis.spans import key_spans, normalise
from ragmend.models.nli import NLIModel, load_nli
from ragmend.rag.types import Passage
from ragmend.settings import Settings

MAX_ALTERNATIVES = 6


def _is_number(span: str) -> bool:
    return re.fullmatch(r"[\d,.]+", span) is not None


def swap_margin(nli: NLIModel, claim: str, window: str, entail: float, question: str) -> float | None:
    """`entail` (the claim's P(entailment) by `window`) less the best P(entailment) of the claim
    with its answer span (its last key span the question does not hold) replaced by another key
    span of the window of the same shape; None when there is no such span or alternative."""
    asked = f" {normalise(question)} "
    novel = [s for s in key_spans(claim) if f" {normalise(s)} " not in asked]
    if not novel:
        return None
    answer = novel[-1]
    title = normalise(window.split(":", 1)[0])
    alternatives = [
        s
        for s in key_spans(window)
        if normalise(s) not in normalise(claim)
        and f" {normalise(s)} " not in asked
        and normalise(s) != title
        and _is_number(s) == _is_number(answer)
    ][:MAX_ALTERNATIVES]
    if not alternatives:
        return None
    probs = nli.predict([(window, claim.replace(answer, other)) for other in alternatives]).probs
    return entail - float(probs[:, 0].max())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled:ragmend-nli-minilm-l6", help="models.nli.model")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--workdir", type=Path, default=Path("var/detect"), help="the detect workspace")
    ap.add_argument("--window", type=int, default=2, help="sentences per window")
    args = ap.parse_args(argv)

    nli = load_nli(Settings(models={"nli": {"model": args.model}}).models)
    answers = {a["id"]: a for a in read_jsonl(args.workdir / f"answers-{args.split}.jsonl")}
    rows_path = args.workdir / f"detect-{args.split}-hotpotqa+unanswerable-rows.jsonl"
    rows = [r for r in read_jsonl(rows_path) if r["set"] == "hotpotqa" and r["claims"]]

    t0 = time.perf_counter()
    wrong, backing, contradiction, margin = [], [], [], []
    for r in rows:
        answer = answers[r["id"]]
        passages = [Passage.model_validate(p) for p in answer["passages"]]
        windows = [w for p in passages for w in premise_windows(p, args.window)]
        per_claim, margins = [], []
        for claim in r["claims"]:
            probs = nli.predict([(w, claim) for w in windows]).probs
            best = int(probs[:, 0].argmax())
            per_claim.append((float(probs[best, 0]), float(probs[:, 2].max())))
            m = swap_margin(nli, claim, windows[best], float(probs[best, 0]), answer["query"])
            if m is not None:
                margins.append(m)
        wrong.append(bool(r["unsupported"]))
        backing.append(min(e for e, _ in per_claim))
        contradiction.append(max(c for _, c in per_claim))
        margin.append(min(margins) if margins else None)
    y = np.array(wrong)
    b = np.array(backing)
    has = np.array([m is not None for m in margin])
    out = {
        "model": args.model,
        "split": args.split,
        "answers": len(rows),
        "wrong": int(y.sum()),
        "auroc_unbacked": round(auroc(-b, y), 3),
        "auroc_contradiction": round(auroc(np.array(contradiction), y), 3),
        "wrong_backed_at_0.5": round(float((b[y] >= 0.5).mean()), 3),
        "right_backed_at_0.5": round(float((b[~y] >= 0.5).mean()), 3),
        "with_alternatives": int(has.sum()),
        "auroc_swap_margin": round(auroc(-np.array([m for m in margin if m is not None]), y[has]), 3),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))
    return 0
