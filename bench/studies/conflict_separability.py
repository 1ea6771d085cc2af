"""How well the NLI role tells two incompatible answers to a question from two compatible ones,
read on TruthfulQA's own reference answers, so that no passage writer stands between: for each
DEV question, its best correct answer against its best incorrect one ("differ") and against
another of its correct answers ("agree"). Each pair is scored as the conflict check reads a
disagreement: the NLI's P(contradiction), the larger of the two directions. Prints AUROC of
"differ" and, at each threshold, the share of differing pairs caught and of agreeing pairs
flagged (a false conflict).

    ragmend study conflict-separability --offset 150 --limit 200
    ragmend study conflict-separability --model data/nli-mpnet/model --offset 150 --limit 200
    ragmend study conflict-separability --judge escalation --offset 150 --limit 200

`--judge generator` / `escalation` asks the default or the stronger generator instead, one short
call a pair ("Can both answers be true at once? yes or no"), greedy; the pair's score is 1 for
no, 0 for yes, 0.5 for any other reply (the word it says, not its probability). It says whether
a generator check of a conflict the NLI proposes would be worth one such call on the answers
where the NLI finds one.

It bounds what the conflict check (diagnosis/conflict.py) can find in the poison suite's mixed
contexts with this model, whatever the passages: a passage that states a TruthfulQA answer is at
best as clear as the answer itself. The default offset skips the DEV questions whose references
fit the poison suite's judge.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragmend.bench.stats import auroc
from ragmend.bench.suites.poison import TRUTHFULQA_FILE, load_truthfulqa
from ragmend.models.generator import Generator
from ragmend.models.nli import NLIModel, load_nli
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def contradiction(nli: NLIModel, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Per pair, the larger P(contradiction) of its two directions."""
    both = [*pairs, *[(b, a) for a, b in pairs]]
    probs = nli.predict(both).probs
    n = len(pairs)
    return np.maximum(probs[:n, 2], probs[n:, 2])


JUDGE_PROMPT = (
    "Question: {question}\nAnswer A: {a}\nAnswer B: {b}\n"
    "Can Answer A and Answer B both be true at once? Reply with one word: yes or no."
)


def judged_incompatible(gen: Generator, triples: list[tuple[str, str, str]]) -> np.ndarray:
    """Per (question, answer, answer), 1 where the generator says both answers cannot be true, 0
    where it says they can, 0.5 for any other reply."""
    scores = []
    for question, a, b in triples:
        prompt = JUDGE_PROMPT.format(question=question, a=a, b=b)
        word = gen.chat([{"role": "user", "content": prompt}], max_tokens=2, temperature=0.0).text
        word = word.strip().lower()
        scores.append(1.0 if word.startswith("no") else 0.0 if word.startswith("yes") else 0.5)
    return np.array(scores)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled:ragmend-nli-minilm-l6", help="models.nli.model")
    ap.add_argument(
        "--judge",
        choices=("nli", "generator", "escalation"),
        default="nli",
        help="what scores a pair: the NLI model, or the default or the stronger generator",
    )
    ap.add_argument("--offset", type=int, default=150, help="DEV questions skipped first")
    ap.add_argument("--limit", type=int, default=200, help="DEV questions read")
    ap.add_argument("--data-root", type=Path, default=Path("../shared/data"), help="the shared data")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON too")
    args = ap.parse_args(argv)

    settings = Settings(models={"nli": {"model": args.model}})
    items = load_truthfulqa(args.data_root / TRUTHFULQA_FILE, split="dev")[
        args.offset : args.offset + args.limit
    ]
    differ = [(i.question, i.best, i.incorrect[0]) for i in items]
    agree = [
        (i.question, i.best, next(c for c in i.correct if c != i.best))
        for i in items
        if len(set(i.correct)) > 1
    ]
    if args.judge == "nli":
        nli = load_nli(settings.models)
        s_differ = contradiction(nli, [(a, b) for _, a, b in differ])
        s_agree = contradiction(nli, [(a, b) for _, a, b in agree])
        judge = args.model
    else:
        models = ModelRegistry(settings)
        gen = models.generator if args.judge == "generator" else models.escalation
        if gen is None:
            ap.error("--judge escalation needs models.escalation")
        s_differ, s_agree = judged_incompatible(gen, differ), judged_incompatible(gen, agree)
        judge = gen.model
    labels = np.r_[np.ones(len(s_differ)), np.zeros(len(s_agree))]
    out = {
        "model": judge,
        "questions": len(items),
        "differ_pairs": len(differ),
        "agree_pairs": len(agree),
        "auroc": round(auroc(np.r_[s_differ, s_agree], labels), 3),
        "at": {
            str(t): {
                "differ_caught": round(100 * float(np.mean(s_differ >= t)), 1),
                "agree_flagged": round(100 * float(np.mean(s_agree >= t)), 1),
            }
            for t in THRESHOLDS
        },
    }
    print(json.dumps(out, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0
