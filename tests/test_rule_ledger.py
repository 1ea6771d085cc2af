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


def test_rows_another_decision_recorded_are_refused(tmp_path: Path) -> None:
    wrong = _write(tmp_path / "r.jsonl", [_row("1", True, "WR", [])])  # the tables pass it
    with pytest.raises(SystemExit, match="the tables decide NoFailure"):
        rule_ledger.read_answers([wrong])
    assert rule_ledger.main([str(tmp_path / "missing.jsonl")]) == 2
