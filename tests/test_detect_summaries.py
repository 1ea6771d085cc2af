"""`ragmend bench detect`'s figures from its rows (bench/suites/detect.py summaries): the IE rate
of answerable questions, apart by whether the retrieved passages hold the gold answer."""

from __future__ import annotations

from typing import Any

from ragmend.bench.suites.detect import summaries


def _row(group: str, failure: str, answer_in_evidence: bool | None = None) -> dict[str, Any]:
    answerable = group == "answerable"
    return {
        "set": "hotpotqa" if answerable else "unanswerable",
        "group": group,
        "id": f"{group}-{failure}-{answer_in_evidence}",
        "unsupported": failure != "NoFailure",
        "answerable": answerable,
        "answer_in_evidence": answer_in_evidence,
        "score": 0.9 if failure != "NoFailure" else 0.1,
        "failure": failure,
        "egc": 0.5,
        "coverage": 0.5,
        "ms": 10.0,
        "features": {},
    }


def test_answerable_ie_is_split_by_whether_the_evidence_holds_the_answer() -> None:
    answerable = [
        _row("answerable", "IE", True),
        _row("answerable", "NoFailure", True),
        _row("answerable", "WR", True),
        _row("answerable", "NoFailure", True),
        _row("answerable", "IE", False),
        _row("answerable", "IE", False),
        _row("answerable", "IE", None),  # a yes/no answer: not decidable, in neither part
    ]
    unanswerable = [_row("gold_removed", "IE"), _row("out_of_corpus", "WR")]
    result = summaries({"hotpotqa": answerable, "unanswerable": unanswerable})["unanswerable"]
    assert result["ie_rate"] == 0.5
    assert result["ie_rate_answerable"] == round(4 / 7, 4)
    assert result["ie_rate_answerable_by_evidence"] == {
        "answer_in_evidence": {"n": 4, "ie_rate": 0.25},
        "answer_not_in_evidence": {"n": 2, "ie_rate": 1.0},
    }


def test_rows_without_the_field_give_no_split() -> None:
    rows = [{**_row("answerable", "IE"), "answer_in_evidence": None}]
    result = summaries({"hotpotqa": rows, "unanswerable": [_row("gold_removed", "IE")]})["unanswerable"]
    assert result["ie_rate_answerable_by_evidence"] == {}
