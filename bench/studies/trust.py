"""Whether a user can trust the verdict, on TEST: what the check does to right answers and wrong
ones, and what the user reads, gathered into one machine-readable file (reports/trust.json).

    ragmend study trust --hotpotqa EVAL/hotpotqa/ragmend.test.jsonl \\
        --mixed EVAL/mixed/ragmend.test.jsonl \\
        --fever EVAL/fever/ragmend.test.jsonl --fever-naive EVAL/fever/naive.test.jsonl \\
        --ragtruth DETECT/detect-test-ragtruth-rows.jsonl --out reports/trust.json

The eval records are `ragmend eval --suite paper` records (one per TEST item: the router's first
pass, its diagnosis, any repair, what the user read); the RAGTruth rows are `ragmend bench
detect --split test --sets ragtruth` rows. Each part is optional; what is given is measured.

- hotpotqa: of the first answers (the router's pass, before any repair), the share of right ones
  (exact match) and of wrong ones the diagnosis flagged, the AUROC of its P(unsupported) for
  wrong against right, and the share of right first answers the user read as an abstention or a
  correction (a repair replaced it), and the right answers flagged counted by the rule that
  decided (`right_flagged_by`; records that name it).
- mixed: the same share of right first answers, over the stream's answerable questions.
- unanswerable (the mixed stream's questions whose sources lack the answer): the share the user
  read as "the sources do not answer" (an abstention, the answer policy's or the generator's
  own "I don't know"), and the share of its answerable questions typed IE.
- ragtruth: the share of responses people found fully supported that the diagnosis flagged, and
  response F1 with a flag as the positive prediction.
- fever: the accuracy lift of ragmend over Naive RAG (points).
Percentages are numbers from 0 to 100; AUROC and F1 from 0 to 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.stats import auroc
from ragmend.bench.suites.detect import decision_figures
from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.fileio import atomic_write_json

Record = Mapping[str, Any]
UNANSWERABLE_KINDS = ("gold_removed", "out_of_corpus")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    value = auroc(np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool))
    return None if np.isnan(value) else round(value, 4)


def first_right(r: Record, metric: str) -> bool:
    """Whether the first answer, as generated, was right (what the user would have read without
    the check)."""
    scores = r.get("first_generated_scores") or r.get("first_scores") or r["scores"]
    return float(scores[metric]) >= 1.0


def read_away(r: Record) -> bool:
    """The user read an abstention or a correction in place of the first answer."""
    return bool(r.get("abstained_read")) or r.get("first_scores") is not None


def hotpotqa(records: Sequence[Record]) -> dict[str, Any]:
    right = [r for r in records if first_right(r, "em")]
    wrong = [r for r in records if not first_right(r, "em")]
    flagged = [r for r in records if r.get("first_failure") not in (None, "NoFailure")]
    p = "first_p_unsupported"
    scored = [r for r in records if r.get(p) is not None]
    return {
        "n": len(records),
        "right": len(right),
        "right_flagged": pct(sum(r in flagged for r in right), len(right)),
        "wrong_flagged": pct(sum(r in flagged for r in wrong), len(wrong)),
        # Wrong answers are the positives: P(unsupported) should rank them above the right ones.
        "auroc": _auroc([r[p] for r in scored], [not first_right(r, "em") for r in scored]),
        "right_read_as_abstention": pct(sum(read_away(r) for r in right), len(right)),
        "right_flagged_by": flagged_by([r for r in right if r in flagged]),
    }


def flagged_by(records: Sequence[Record]) -> dict[str, int]:
    """How many of the flagged answers each rule decided ("unsupported:unbacked": the verdict's
    rules that found it so), where the records name it; most first."""
    counts: dict[str, int] = {}
    for r in records:
        rule = r.get("first_decided_by")
        if rule is None:
            continue
        why = r.get("first_unsupported_by") or []
        key = f"{rule}:{'+'.join(why)}" if rule == "unsupported" and why else str(rule)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def mixed(records: Sequence[Record], metric: str) -> dict[str, Any]:
    """Over the stream's answerable questions (its HotpotQA ones)."""
    right = [r for r in records if r["kind"] == "answerable" and first_right(r, metric)]
    return {
        "n": len(records),
        "right": len(right),
        "right_read_as_abstention": pct(sum(read_away(r) for r in right), len(right)),
    }


def unanswerable(records: Sequence[Record]) -> dict[str, Any]:
    gone = [r for r in records if r["kind"] in UNANSWERABLE_KINDS]
    answerable = [r for r in records if r["kind"] == "answerable"]
    read_abstained = [r for r in gone if r.get("abstained_read") or is_abstention(r.get("response") or "")]
    return {
        "n": len(gone),
        "abstained_read": pct(len(read_abstained), len(gone)),
        "answerable_n": len(answerable),
        "answerable_ie": pct(sum(r.get("first_failure") == "IE" for r in answerable), len(answerable)),
    }


def ragtruth(rows: Sequence[Record]) -> dict[str, Any]:
    judged = [r for r in rows if r.get("unsupported") is not None]
    flagged = np.array([r["failure"] != "NoFailure" for r in judged], dtype=bool)
    figures = decision_figures(flagged, np.array([bool(r["unsupported"]) for r in judged], dtype=bool))
    share = figures["flagged_supported"]
    return {
        "n": len(judged),
        "supported_flagged": None if share is None else round(100.0 * share, 2),
        "f1": figures["f1"],
    }


def fever(ragmend: Sequence[Record], naive: Sequence[Record]) -> dict[str, Any]:
    ids = [r["id"] for r in ragmend]
    if ids != [r["id"] for r in naive]:
        raise ValueError("the FEVER records of ragmend and Naive RAG must hold the same items in order")

    def accuracy(rs: Sequence[Record]) -> float:
        return 100.0 * float(np.mean([float(r["scores"]["accuracy"]) for r in rs]))

    return {"n": len(ids), "lift": round(accuracy(ragmend) - accuracy(naive), 2)}


def study(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.hotpotqa:
        out["hotpotqa"] = hotpotqa(read_jsonl(args.hotpotqa))
    if args.mixed:
        stream = read_jsonl(args.mixed)
        out["mixed"] = mixed(stream, args.mixed_metric)
        out["unanswerable"] = unanswerable(stream)
    if args.ragtruth:
        out["ragtruth"] = ragtruth(read_jsonl(args.ragtruth))
    if args.fever:
        if not args.fever_naive:
            raise ValueError("--fever needs --fever-naive: the lift is over Naive RAG's records")
        out["fever"] = fever(read_jsonl(args.fever), read_jsonl(args.fever_naive))
    return out


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hotpotqa", type=Path, help="paper-suite records of ragmend on HotpotQA TEST")
    ap.add_argument("--mixed", type=Path, help="paper-suite records of ragmend on the mixed stream TEST")
    ap.add_argument("--mixed-metric", default="correct", help="the mixed stream's metric of a right answer")
    ap.add_argument("--fever", type=Path, help="paper-suite records of ragmend on FEVER TEST")
    ap.add_argument("--fever-naive", type=Path, help="paper-suite records of Naive RAG on FEVER TEST")
    ap.add_argument("--ragtruth", type=Path, help="bench detect rows of RAGTruth TEST")
    ap.add_argument("--out", type=Path, help="also write the JSON here (merged into what it holds)")
    args = ap.parse_args(argv)
    given = [p for p in (args.hotpotqa, args.mixed, args.fever, args.fever_naive, args.ragtruth) if p]
    if not given:
        print(
            "nothing to measure: give at least one of --hotpotqa, --mixed, --fever, --ragtruth",
            file=sys.stderr,
        )
        return 2
    if missing := [str(p) for p in given if not p.is_file()]:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        result = study(args)
    except (ValueError, KeyError) as e:
        print(f"cannot measure: {e}", file=sys.stderr)
        return 2
    if args.out:
        earlier = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
        atomic_write_json(args.out, {**earlier, **result})
    print(json.dumps(result, indent=2))
    return 0
