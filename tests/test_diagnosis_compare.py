"""bench/studies/diagnosis_compare.py on small hand-written snapshots: identical, differing, ignored keys."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragmend.bench.studies import diagnosis_compare


@pytest.fixture(scope="module")
def dc() -> ModuleType:
    return diagnosis_compare


def _row(case_id: str, failure: str = "NoFailure", **extra: Any) -> dict[str, Any]:
    hyps = [{"hypothesis": "Paris is in France.", "entail": 0.9, **extra}]
    diagnosis = {"failure": failure, "e_r": {"support": 0.9, "hypotheses": hyps}, "verdict": None}
    return {"set": "hotpotqa", "id": case_id, "diagnosis": diagnosis}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return path


def test_identical(dc: ModuleType, tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [_row("1"), _row("2")])
    b = _write(tmp_path / "b.jsonl", [_row("2"), _row("1")])  # order does not matter
    result = dc.compare(a, b)
    assert result.identical == 2 and result.all_identical
    assert dc.main([str(a), str(b)]) == 0


def test_differing(dc: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.jsonl", [_row("1"), _row("2"), _row("3")])
    changed = _row("2", "IE")
    changed["diagnosis"]["e_r"]["hypotheses"][0]["entail"] = 1  # an int where a float was
    b = _write(tmp_path / "b.jsonl", [_row("1"), changed, _row("4")])
    result = dc.compare(a, b)
    assert result.identical == 1 and not result.all_identical
    assert result.differing == [
        (
            ("hotpotqa", "2"),
            [".diagnosis.e_r.hypotheses[0].entail: 0.9 -> 1", '.diagnosis.failure: "NoFailure" -> "IE"'],
        )
    ]
    assert result.only_before == [("hotpotqa", "3")] and result.only_after == [("hotpotqa", "4")]
    assert dc.main([str(a), str(b)]) == 1
    assert dc.main([str(a), str(b), "--common-only"]) == 1  # case 2 still differs
    assert dc.main([str(a), str(_write(tmp_path / "c.jsonl", [_row("1")])), "--common-only"]) == 0
    printed = capsys.readouterr().out
    assert "identical: 1" in printed and "differing: 3" in printed and ".diagnosis.failure" in printed


def test_ignored_key(dc: ModuleType, tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [_row("1")])
    b = _write(tmp_path / "b.jsonl", [_row("1", span=[0, 5])])  # a field the refactor adds, nested
    assert dc.compare(a, b).differing == [
        (("hotpotqa", "1"), [".diagnosis.e_r.hypotheses[0].span (only in after)"])
    ]
    assert dc.compare(a, b, {"span"}).all_identical
    assert dc.main([str(a), str(b), "--ignore", "span"]) == 0
