"""How sure a flag must be to replace an answer: `diagnosis.replace_threshold` chosen on recorded
answers by cost.

    ragmend study replace-point ROWS.jsonl [ROWS.jsonl ...] [--right-cost 3] [--json] [--out F]

ROWS: `ragmend bench detect` rows of DEV answers, each with the `signals`, the verdict's `score`
and its `unsupported_by`. Nothing is diagnosed again: for each candidate operating point t each
row's failure and grade are remade by the decision table (decision.decide, the verdict sure at t
as decision.verdict_sure says). A confident failure replaces the answer (its repair, abstention
or correction); an uncertain one leaves it, marked. The cost of t: `right_cost` for each right
answer a confident failure replaces (the user loses it) and 1 for each wrong answer an uncertain
one leaves in place (the user reads it, marked). The chosen point is the cheapest; ties go to the
higher point, which replaces fewer answers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragmend.bench.studies.rule_ledger import Answer, read_answers, rows_missing
from ragmend.diagnosis.decision import decide, verdict_sure
from ragmend.fileio import atomic_write_json

GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))  # 0.05 .. 0.95


@dataclass(frozen=True, kw_only=True)
class Point:
    """What one operating point does to the recorded answers."""

    threshold: float
    right_replaced: int  # right answers a confident failure replaces
    wrong_replaced: int  # wrong answers a confident failure replaces (repaired or abstained)
    right_marked: int  # right answers an uncertain failure leaves, marked
    wrong_marked: int  # wrong answers an uncertain failure leaves, marked
    cost: float


def grade_at(a: Answer, threshold: float) -> str | None:
    """The answer's grade with the verdict sure at `threshold` (None: no failure)."""
    if a.score is None:  # no verdict: the table decides on discrete states, and is sure
        return decide(a.signals).grade
    sure = verdict_sure(a.score, threshold, a.unsupported_by)  # type: ignore[arg-type]
    return decide(replace(a.signals, sure=sure)).grade


def point(answers: Sequence[Answer], threshold: float, right_cost: float) -> Point:
    counts = {
        ("confident", True): 0,
        ("confident", False): 0,
        ("uncertain", True): 0,
        ("uncertain", False): 0,
    }
    for a in answers:
        if (grade := grade_at(a, threshold)) is not None:
            counts[(grade, a.right)] += 1
    rr, wr = counts[("confident", True)], counts[("confident", False)]
    rm, wm = counts[("uncertain", True)], counts[("uncertain", False)]
    return Point(
        threshold=threshold,
        right_replaced=rr,
        wrong_replaced=wr,
        right_marked=rm,
        wrong_marked=wm,
        cost=right_cost * rr + wm,
    )


def study(answers: Sequence[Answer], right_cost: float) -> dict[str, Any]:
    points = [point(answers, t, right_cost) for t in GRID]
    best = min(points, key=lambda p: (p.cost, -p.threshold))
    return {
        "n": len(answers),
        "right": sum(a.right for a in answers),
        "right_cost": right_cost,
        "chosen": best.threshold,
        "points": [vars(p) for p in points],
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['n']} answers, {result['right']} right; cost: {result['right_cost']} per right answer "
        f"replaced, 1 per wrong answer left marked; chosen: {result['chosen']}",
        "",
        "| replace at | right replaced | wrong replaced | right marked | wrong marked | cost |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["points"]:
        lines.append(
            f"| {p['threshold']} | {p['right_replaced']} | {p['wrong_replaced']} | {p['right_marked']} "
            f"| {p['wrong_marked']} | {p['cost']:g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", type=Path, help="bench detect rows files of DEV answers (JSONL)")
    ap.add_argument(
        "--right-cost",
        type=float,
        default=3.0,
        help="what replacing a right answer costs (leaving a wrong one: 1)",
    )
    ap.add_argument("--json", dest="as_json", action="store_true", help="print JSON, not a table")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    if rows_missing(args.rows):
        return 2
    if args.right_cost <= 0:
        print("--right-cost: a positive number", file=sys.stderr)
        return 2
    result = study(read_answers(args.rows), args.right_cost)
    if args.out:
        atomic_write_json(args.out, result)
    print(json.dumps(result, indent=2) if args.as_json else markdown(result), end="")
    return 0
