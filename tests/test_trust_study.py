"""bench/studies/trust.py on hand-written eval records and detect rows: what reports/trust.json
says of right answers flagged, read away, and of abstentions read."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragmend.bench.studies import trust


def _write(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _hotpot(i: int, em: float, failure: str, p: float, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"h{i}",
        "kind": "answerable",
        "scores": {"em": em},
        "first_failure": failure,
        "first_p_unsupported": p,
        "abstained_read": False,
        "first_scores": None,
        "response": "x",
        **extra,
    }


BY_VERDICT = {"first_decided_by": "unsupported", "first_unsupported_by": ["score", "unbacked"]}
OFF = {"first_decided_by": "off_question", "first_unsupported_by": []}


def test_trust_figures_from_records(tmp_path: Path) -> None:
    hotpot = [
        _hotpot(1, 1.0, "NoFailure", 0.1),
        # Right, flagged by the verdict's two rules, read as an abstention.
        _hotpot(2, 1.0, "WR", 0.6, abstained_read=True, **BY_VERDICT),
        # Right as generated, replaced by a repair whose answer is wrong: read as a correction.
        _hotpot(3, 0.0, "WR", 0.7, first_scores={"em": 1.0}, first_generated_scores={"em": 1.0}, **OFF),
        _hotpot(4, 0.0, "WR", 0.9),
        _hotpot(5, 0.0, "NoFailure", 0.2),
    ]
    mixed = [
        {
            **_hotpot(1, 0.0, "IE", 0.5, abstained_read=True),
            "scores": {"correct": 0.0},
            "first_generated_scores": {"correct": 1.0},
        },
        {**_hotpot(2, 0.0, "IE", 0.5), "kind": "answerable", "scores": {"correct": 0.0}},
        {
            **_hotpot(3, 1.0, "IE", 0.5, abstained_read=True),
            "kind": "gold_removed",
            "scores": {"correct": 1.0},
        },
        {
            **_hotpot(4, 0.0, "WR", 0.5),
            "kind": "out_of_corpus",
            "scores": {"correct": 0.0},
            "response": "I don't know.",
        },
        {**_hotpot(5, 0.0, "WR", 0.5), "kind": "out_of_corpus", "scores": {"correct": 0.0}},
        {**_hotpot(6, 1.0, "NoFailure", 0.5), "kind": "claim", "scores": {"correct": 1.0}},
    ]
    ragtruth: list[dict[str, Any]] = [
        {"unsupported": False, "failure": "NoFailure"},
        {"unsupported": False, "failure": "WR"},
        {"unsupported": True, "failure": "WR"},
        {"unsupported": True, "failure": "NoFailure"},
        {"unsupported": None, "failure": "WR"},  # no label: left out
    ]
    fever_ragmend = [{"id": f"f{i}", "scores": {"accuracy": a}} for i, a in enumerate((1, 1, 1, 0))]
    fever_naive = [{"id": f"f{i}", "scores": {"accuracy": a}} for i, a in enumerate((1, 0, 1, 0))]
    out = tmp_path / "trust.json"
    out.write_text(json.dumps({"note": "kept"}))
    code = trust.main(
        [
            "--hotpotqa", str(_write(tmp_path / "h.jsonl", hotpot)),
            "--mixed", str(_write(tmp_path / "m.jsonl", mixed)),
            "--ragtruth", str(_write(tmp_path / "r.jsonl", ragtruth)),
            "--fever", str(_write(tmp_path / "f.jsonl", fever_ragmend)),
            "--fever-naive", str(_write(tmp_path / "n.jsonl", fever_naive)),
            "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    got = json.loads(out.read_text())
    assert got["note"] == "kept"  # merged into what the file held
    h = got["hotpotqa"]
    assert (h["n"], h["right"], h["right_flagged"], h["wrong_flagged"]) == (5, 3, pytest.approx(66.67), 50.0)
    assert h["right_read_as_abstention"] == pytest.approx(66.67)
    assert h["right_flagged_by"] == {"off_question": 1, "unsupported:score+unbacked": 1}
    # Wrong answers' P(unsupported) 0.9, 0.2 against right ones' 0.1, 0.6, 0.7: 4 of 6 pairs above.
    assert h["auroc"] == 0.6667
    assert got["mixed"] == {"n": 6, "right": 1, "right_read_as_abstention": 100.0}
    assert got["unanswerable"] == {"n": 3, "abstained_read": pytest.approx(66.67), "answerable_n": 2,
                                   "answerable_ie": 100.0}  # fmt: skip
    assert got["ragtruth"] == {"n": 4, "supported_flagged": 50.0, "f1": 0.5}
    assert got["fever"] == {"n": 4, "lift": 25.0}


def test_trust_refuses_what_it_cannot_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert trust.main([]) == 2
    assert trust.main(["--hotpotqa", str(tmp_path / "missing.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    f = _write(tmp_path / "f.jsonl", [{"id": "a", "scores": {"accuracy": 1}}])
    n = _write(tmp_path / "n.jsonl", [{"id": "b", "scores": {"accuracy": 1}}])
    assert trust.main(["--fever", str(f)]) == 2
    assert trust.main(["--fever", str(f), "--fever-naive", str(n)]) == 2
    assert "same items" in capsys.readouterr().err
