"""bench/studies/rule_ledger.py on hand-written rows: what each rule decides and catches alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragmend.bench.studies import rule_ledger


def _row(case: str, right: bool, failure: str, unsupported_by: list[str], **signals: Any) -> dict[str, Any]:
    base = {"kappa": "missing", "e_q": "entail", "e_r": "entail", "unsupported": bool(unsupported_by)}
    return {
        "set": "hotpotqa",
        "id": case,
        "unsupported": not right,
        "failure": failure,
        "signals": {**base, **signals},
        "unsupported_by": unsupported_by,
    }


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _counts(ledger: dict[str, int]) -> tuple[int, int, int, int]:
    """right_decided, wrong_decided, right_alone, wrong_alone."""
    return (ledger["right_decided"], ledger["wrong_decided"], ledger["right_alone"], ledger["wrong_alone"])


def test_each_rule_is_counted_where_it_decides_and_where_it_alone_flags(tmp_path: Path) -> None:
    rows = [
        _row("1", True, "NoFailure", []),  # right, passes
        _row("2", False, "WR", ["score"]),  # wrong, caught by the score alone
        _row("3", True, "WR", ["score", "refuted"]),  # right, flagged by two verdict rules
        _row("4", False, "WR", [], off_question="subject"),  # wrong, caught by off-question alone
        _row("5", True, "WR", ["unbacked"], off_question="kind"),  # right, two rules flag it
    ]
    result = rule_ledger.as_json(
        rule_ledger.study(rule_ledger.read_answers([_write(tmp_path / "r.jsonl", rows)]))
    )
    assert result["n"] == {"hotpotqa": 5} and result["right"] == {"hotpotqa": 3}
    rules = result["rules"]
    assert _counts(rules["unsupported"]["all"]) == (1, 1, 1, 1)
    assert _counts(rules["off_question"]["all"]) == (1, 1, 0, 1)
    assert rules["off_question:subject"]["all"]["wrong_alone"] == 1
    assert _counts(rules["off_question:kind"]["all"]) == (1, 0, 0, 0)
    # Left out, "refuted" changes nothing (the score still flags answer 3); the score alone flags 2.
    assert rules["verdict:refuted"]["all"]["right_alone"] == 0
    assert _counts(rules["verdict:score"]["all"]) == (1, 1, 0, 1)
    # Without the verdict's "supported", answer 1 would fall to the catch-all: it passes alone.
    assert rules["supported"]["all"]["right_decided"] == 1
    table = rule_ledger.markdown(rule_ledger.study(rule_ledger.read_answers([tmp_path / "r.jsonl"])))
    assert "| `off_question:subject` | WR | 0 / 1 | 0 / 1 |" in table


def test_a_sure_rule_is_counted_where_it_alone_turns_an_answer_into_an_abstention(tmp_path: Path) -> None:
    """An answer the verdict doubts (not sure) keeps its text, marked; the sure `comparison_disagrees`
    rule makes it read as the abstention instead where its evidence hardly answers the question."""
    doubted = {"sure": False, "comparison": "disagrees"}
    rows = [
        {**_row("1", True, "WR", ["score"], **doubted), "features": {"p_answerable": 0.2}},
        {**_row("2", False, "WR", ["score"], **doubted), "features": {"p_answerable": 0.1}},
        {**_row("3", False, "WR", ["score"], comparison="disagrees"), "features": {"p_answerable": 0.1}},
    ]
    answers = rule_ledger.read_answers([_write(tmp_path / "r.jsonl", rows)])
    rules = rule_ledger.as_json(rule_ledger.study(answers))
    dates = rules["rules"]["comparison_disagrees"]["all"]
    # Answer 3's verdict is sure: it would read as an abstention without the rule too.
    assert (dates["right_abstained_alone"], dates["wrong_abstained_alone"]) == (1, 1)
    # Without it the verdict's score still flags all three: the rule alone flags none.
    assert (dates["right_alone"], dates["wrong_alone"]) == (0, 0)


def test_rows_another_decision_recorded_are_refused(tmp_path: Path) -> None:
    wrong = _write(tmp_path / "r.jsonl", [_row("1", True, "WR", [])])  # the tables pass it
    with pytest.raises(SystemExit, match="the tables decide NoFailure"):
        rule_ledger.read_answers([wrong])
    assert rule_ledger.main([str(tmp_path / "missing.jsonl")]) == 2


def test_the_replace_point_is_the_cheapest_where_replacing_a_right_answer_costs_more(tmp_path: Path) -> None:
    from ragmend.bench.studies import replace_point

    def scored(case: str, right: bool, score: float, why: list[str], **signals: Any) -> dict[str, Any]:
        return {
            **_row(case, right, "WR" if why else "NoFailure", why, e_r="neutral", **signals),
            "score": score,
        }

    rows = [
        scored("1", True, 0.3, ["score"]),  # a right answer the score barely flags
        scored("2", True, 0.45, ["score"]),
        scored("3", False, 0.9, ["score"]),  # a wrong one it is sure of
        scored("4", False, 0.4, ["score"]),  # a wrong one it barely flags
        scored("5", True, 0.2, ["score"], comparison="disagrees"),  # a sure rule: replaced at any point
        scored("6", True, 0.1, []),  # passes
    ]
    answers = rule_ledger.read_answers([_write(tmp_path / "r.jsonl", rows)])
    at = {p.threshold: p for p in (replace_point.point(answers, t, 3.0) for t in (0.35, 0.5, 0.95))}
    assert (at[0.35].right_replaced, at[0.35].wrong_marked) == (2, 0)  # answers 2 and 5 replaced
    assert (at[0.5].right_replaced, at[0.5].wrong_replaced, at[0.5].wrong_marked) == (1, 1, 1)
    assert (at[0.95].right_replaced, at[0.95].wrong_marked) == (1, 2)
    result = replace_point.study(answers, 3.0)
    # 0.5 costs 3 + 1 = 4 and so does every point up to 0.9 (answer 3 still replaced): the highest wins.
    assert result["chosen"] == 0.9
    # Cheap right answers: replace every wrong one, leaving marked only the right answer below them.
    assert replace_point.study(answers, 0.5)["chosen"] == 0.4
