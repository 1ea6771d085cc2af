"""A warm start on the user's own data: any JSONL of {question, answer} or {claim, label} rows,
answered over the served corpus (or a collection), with the gold answer as the reward.

Each row's answer goes through the live loop (answer, diagnose, repair, the diagnosis's reward),
and then the gold answer judges what the user would read, like a vote (policy/feedback.py): the
arm that decided the answer gets one more observation whose quality is 1 when the final answer
is right (the gold answer occurs in it, normalised as SQuAD does; a claim's label matches) and 0
when it is not, times the repair's cost factors. The labels teach the policy where the diagnosis
alone would be wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragmend.corpora.scoring import answer_correct, fever_label
from ragmend.corpora.tasks import EvalItem
from ragmend.diagnosis.types import CLAIM_LABELS
from ragmend.engine.outcome import Outcome
from ragmend.errors import InputError
from ragmend.jsonl import numbered_objects

DataKind = Literal["qa", "claim"]


@dataclass(frozen=True)
class UserData:
    kind: DataKind
    items: tuple[EvalItem, ...]

    @property
    def overrides(self) -> dict[str, Any] | None:
        """The request overrides the rows need: a claim is checked with the claim prompt."""
        return {"prompt": "claim"} if self.kind == "claim" else None

    @property
    def judge(self) -> Callable[[EvalItem, Outcome], float]:
        return judge_claim if self.kind == "claim" else judge_answer


def read_user_data(path: Path, limit: int | None = None) -> UserData:
    """The rows of a JSONL file, all of one kind; InputError naming the line of a bad one."""
    if not path.is_file():
        raise InputError(f"{path}: no such file (a JSONL of {{question, answer}} or {{claim, label}} rows)")
    kinds: set[DataKind] = set()
    items: list[EvalItem] = []
    with path.open(encoding="utf-8") as f:
        for n, row in numbered_objects(f, path, "a {question, answer} or {claim, label} row"):
            kind, item = _item(row, f"{path}:{n}", n)
            kinds.add(kind)
            if len(kinds) > 1:
                raise InputError(f"{path}:{n}: questions and claims in one file; train on each kind apart")
            items.append(item)
            if limit is not None and len(items) >= limit:
                break
    if not items:
        raise InputError(f"{path}: no rows")
    return UserData(kinds.pop(), tuple(items))


def _item(row: dict[str, Any], where: str, n: int) -> tuple[DataKind, EvalItem]:
    if "question" in row or "answer" in row:
        question, answer = row.get("question"), row.get("answer")
        if not (
            isinstance(question, str) and question.strip() and isinstance(answer, str) and answer.strip()
        ):
            raise InputError(f"{where}: question and answer must both be non-empty strings")
        return "qa", EvalItem(id=f"row-{n}", query=question.strip(), gold=answer.strip(), split="dev")
    if "claim" in row or "label" in row:
        claim, label = row.get("claim"), row.get("label")
        if not (isinstance(claim, str) and claim.strip()):
            raise InputError(f"{where}: claim must be a non-empty string")
        if not isinstance(label, str) or label.strip().upper() not in CLAIM_LABELS:
            raise InputError(f"{where}: label must be one of {', '.join(CLAIM_LABELS)}, got {label!r}")
        return "claim", EvalItem(id=f"row-{n}", query=claim.strip(), gold=label.strip().upper(), split="dev")
    raise InputError(f"{where}: expected the keys question and answer, or claim and label; got {sorted(row)}")


def judge_answer(item: EvalItem, outcome: Outcome) -> float:
    return float(answer_correct(outcome.answer.response, item.gold))


def judge_claim(item: EvalItem, outcome: Outcome) -> float:
    d = outcome.diagnosis
    label = d.final_label if d is not None and d.final_label else fever_label(outcome.answer.response)
    return float(label == item.gold)
