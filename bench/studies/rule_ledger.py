"""What each rule of the decision earns, on recorded answers: the right answers it flags and the
wrong answers it alone catches (diagnosis/decision.py's two tables, one rule left out at a time).

    ragmend study rules ROWS.jsonl [ROWS.jsonl ...] [--json] [--out F]

ROWS: `ragmend bench detect` rows (its workdir's detect-<split>-<sets>-rows.jsonl), each with the
`signals` and the verdict's `unsupported_by` the diagnosis recorded. Nothing is diagnosed again:
each row's decision is remade from its signals with the whole tables (which must give the
recorded failure: a row that does not was recorded by other code, and the study stops), then with
one rule left out.

For a rule that fails answers: `right_decided` / `wrong_decided`, the answers it decided (the
first rule that applied); `right_alone` / `wrong_alone`, the answers flagged that would pass
without it. The off-question rule is also measured per check (`off_question:subject`, ...: the
rule restricted to the answers that check found off the question). For a rule that passes
answers (`supported`, `comparison_agrees`): the answers that would be flagged without it. A
verdict rule (score, refuted, unbacked) is left out of the answer's `unsupported_by`. A rule
earns its place where it alone catches more wrong answers than it alone flags right ones.

What the user reads is measured the same way: `right_abstained_alone` / `wrong_abstained_alone`,
the answers read as "the sources do not answer" in place of the generated one (a confident failure
the shipped answer policy abstains on: engine/presentation.py `Reading.abstains`, the row's
P(answerable)) that would be read as generated, or marked, without the rule. A sure rule that turns
more right answers into abstentions than wrong ones is a rule a user stops trusting.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragmend.diagnosis.decision import RULES, VERDICT_RULES, FailureRule, decide
from ragmend.diagnosis.types import OFF_QUESTION, DecisionSignals
from ragmend.engine.presentation import Reading
from ragmend.fileio import atomic_write_json

READING = Reading()  # the shipped answer policy and its P(answerable) operating point


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One recorded answer: its set, whether it is right, its signals and what made it unsupported."""

    set: str
    right: bool
    signals: DecisionSignals
    unsupported_by: tuple[str, ...]
    score: float | None = None  # the verdict's P(unsupported); None: no verdict
    p_answerable: float | None = None  # the answerability model's; None: not recorded


@dataclass
class Ledger:
    """One rule's counts over a set of answers."""

    right_decided: int = 0
    wrong_decided: int = 0
    right_alone: int = 0
    wrong_alone: int = 0
    right_abstained_alone: int = 0
    wrong_abstained_alone: int = 0

    def as_json(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class Study:
    n: dict[str, int] = field(default_factory=dict)  # answers per set
    right: dict[str, int] = field(default_factory=dict)
    rules: dict[str, dict[str, Ledger]] = field(default_factory=dict)  # rule -> set -> ledger


def rows_missing(paths: Sequence[Path]) -> bool:
    """Whether a rows file is not there (each such one named on stderr)."""
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"rows not found: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)


def read_answers(paths: Iterable[Path]) -> list[Answer]:
    answers = []
    for path in paths:
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not row.get("signals"):
                raise SystemExit(f"{path}:{n}: no recorded signals (rows from before the decision table)")
            signals = DecisionSignals(**row["signals"])
            score = row.get("score") if signals.unsupported is not None else None
            answer = Answer(
                set=row["set"],
                right=not row["unsupported"],
                signals=signals,
                unsupported_by=tuple(row.get("unsupported_by", ())),
                score=score,
                p_answerable=row.get("features", {}).get("p_answerable"),
            )
            if (remade := decide(signals).failure) != row["failure"]:
                raise SystemExit(f"{path}:{n}: the tables decide {remade}, the row recorded {row['failure']}")
            answers.append(answer)
    return answers


def _flagged(signals: DecisionSignals, rules: tuple[FailureRule, ...] = RULES) -> bool:
    return decide(signals, rules).failure != "NoFailure"


def _abstains(a: Answer, signals: DecisionSignals, rules: tuple[FailureRule, ...] = RULES) -> bool:
    """Whether the user reads the abstention in place of the answer (the shipped answer policy)."""
    decision = decide(signals, rules)
    return decision.grade == "confident" and READING.abstains(decision.failure, a.p_answerable)


def _without_verdict_rule(a: Answer, name: str) -> DecisionSignals:
    if a.signals.unsupported is None:
        return a.signals
    return replace(a.signals, unsupported=any(r != name for r in a.unsupported_by))


def _tally(ledgers: dict[str, Ledger], a: Answer, decided: bool, alone: bool, abstained_alone: bool) -> None:
    """Count one answer: whether the rule decided it, and whether its flag, and its reading as an
    abstention, hang on the rule alone."""
    led = ledgers.setdefault(a.set, Ledger())
    if decided:
        led.right_decided += a.right
        led.wrong_decided += not a.right
    if alone:
        led.right_alone += a.right
        led.wrong_alone += not a.right
    if abstained_alone:
        led.right_abstained_alone += a.right
        led.wrong_abstained_alone += not a.right


def study(answers: Sequence[Answer]) -> Study:
    out = Study()
    for a in answers:
        out.n[a.set] = out.n.get(a.set, 0) + 1
        out.right[a.set] = out.right.get(a.set, 0) + a.right
    for rule in RULES[:-1]:  # the catch-all decides what nothing else does
        rest = tuple(r for r in RULES if r.name != rule.name)
        ledgers: dict[str, Ledger] = {}
        for a in answers:
            alone = _flagged(a.signals) != _flagged(a.signals, rest)
            abstained = _abstains(a, a.signals) != _abstains(a, a.signals, rest)
            _tally(ledgers, a, decide(a.signals).decided_by == rule.name, alone, abstained)
        out.rules[rule.name] = ledgers
    # The off-question rule reads seven checks; each is measured as the rule restricted to it.
    for kind in OFF_QUESTION:
        ledgers = {}
        for a in answers:
            found = a.signals.off_question == kind
            decided = found and decide(a.signals).decided_by == "off_question"
            without = replace(a.signals, off_question=None)
            alone = found and _flagged(a.signals) != _flagged(without)
            abstained = found and _abstains(a, a.signals) != _abstains(a, without)
            _tally(ledgers, a, decided, alone, abstained)
        out.rules[f"off_question:{kind}"] = ledgers
    for verdict_rule in VERDICT_RULES:
        ledgers = {}
        for a in answers:
            decided = a.unsupported_by[:1] == (verdict_rule.name,)
            without = _without_verdict_rule(a, verdict_rule.name)
            alone = _flagged(a.signals) != _flagged(without)
            abstained = _abstains(a, a.signals) != _abstains(a, without)
            _tally(ledgers, a, decided, alone, abstained)
        out.rules[f"verdict:{verdict_rule.name}"] = ledgers
    return out


def _total(ledgers: Mapping[str, Ledger]) -> Ledger:
    total = Ledger()
    for led in ledgers.values():
        for k, v in vars(led).items():
            setattr(total, k, getattr(total, k) + v)
    return total


def as_json(s: Study) -> dict[str, Any]:
    return {
        "n": s.n,
        "right": s.right,
        "rules": {
            name: {"all": _total(ledgers).as_json(), **{k: v.as_json() for k, v in ledgers.items()}}
            for name, ledgers in s.rules.items()
        },
    }


def markdown(s: Study) -> str:
    """One row per rule: what it decides, per set `right alone / wrong alone` (for a rule that
    passes answers: the right and the wrong answers that would be flagged without it), and over
    all sets the right and the wrong answers read as an abstention because of it alone."""
    sets = sorted(s.n)
    decides = (
        {r.name: r.decides for r in RULES}
        | {f"off_question:{k}": "WR" for k in OFF_QUESTION}
        | {f"verdict:{r.name}": "unsupported" for r in VERDICT_RULES}
    )
    head = " | ".join(f"{x} (n {s.n[x]}, right {s.right[x]})" for x in sets)
    lines = [
        f"| rule | decides | {head} | all: right alone / wrong alone | all: abstention read, right / wrong |",
        "|---" * (len(sets) + 4) + "|",
    ]
    for name, ledgers in s.rules.items():
        cells = [
            f"{ledgers[x].right_alone} / {ledgers[x].wrong_alone}" if x in ledgers else "0 / 0" for x in sets
        ]
        t = _total(ledgers)
        total = f"{t.right_alone} / {t.wrong_alone}"
        read = f"{t.right_abstained_alone} / {t.wrong_abstained_alone}"
        lines.append(f"| `{name}` | {decides[name]} | {' | '.join(cells)} | {total} | {read} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", type=Path, help="bench detect rows files (JSONL)")
    ap.add_argument("--json", dest="as_json", action="store_true", help="print JSON, not a table")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    if rows_missing(args.rows):
        return 2
    result = study(read_answers(args.rows))
    if args.out:
        atomic_write_json(args.out, as_json(result))
    print(json.dumps(as_json(result), indent=2) if args.as_json else markdown(result), end="")
    return 0
