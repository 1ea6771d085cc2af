"""The poisoned-retrieval protocol (the mixed-retrieval paper): loader, metrics, and one real
item end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmend.bench.suites.poison import (
    CONTEXTS,
    PoisonRun,
    TruthfulItem,
    fit_judge,
    load_truthfulqa,
    mark_correct,
    records_name,
    summarize_poison,
)
from ragmend.bench.suites.truth_judge import Judged
from ragmend.engine import Engine
from ragmend.errors import InputError
from ragmend.fileio import archive_file

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


@needs_data
def test_truthfulqa_loads_with_answers_and_the_split_rule() -> None:
    items = load_truthfulqa(DATA / "truthfulqa" / "TruthfulQA.csv")
    assert 780 <= len(items) <= 790
    assert all(i.correct and i.incorrect and i.best for i in items)
    test = load_truthfulqa(DATA / "truthfulqa" / "TruthfulQA.csv", split="test")
    assert 0.4 < len(test) / len(items) < 0.6 and all(i.split == "test" for i in test)


def _record(parametric: bool, correct: dict[str, bool], conflict: dict[str, bool]) -> dict:
    return {
        "question": "q",
        "parametric_correct": parametric,
        "contexts": {
            name: {
                "correct": correct[name],
                "presented_correct": correct[name],
                "evidence_conflict": conflict[name],
                "read_as": "conflict" if conflict[name] else "stated",
                "kinds": ["misleading"] * bad + ["clean"] * (3 - bad),
                "e_r": "neutral",
                "failure": "WR",
            }
            for name, bad in CONTEXTS
        },
    }


def test_por_counts_only_parametrically_correct_questions() -> None:
    right = dict.fromkeys(("clean", "mixed-33", "mixed-67", "poisoned"), True)
    flipped = {**right, "mixed-67": False, "poisoned": False}
    calm = dict.fromkeys(right, False)
    records = [
        _record(True, right, calm),
        _record(True, flipped, {**calm, "mixed-33": True}),
        _record(False, dict.fromkeys(right, False), calm),  # not in W: never counts in POR
    ]
    s = summarize_poison(records)
    assert s["n"] == 3 and s["parametric_correct"] == 2
    c = s["contexts"]
    assert c["clean"]["por"] == 0.0 and c["poisoned"]["por"] == 50.0
    assert c["clean"]["accuracy"] == pytest.approx(66.67) and c["poisoned"]["accuracy"] == pytest.approx(
        33.33
    )
    assert c["mixed-33"]["flag_evidence_conflict"] == pytest.approx(33.33)
    # What was read: one of three mixed-33 answers presented the conflict; the clean and the
    # poisoned contexts have no answer whose evidence holds both kinds of passage.
    assert c["mixed-33"]["presented_conflict"] == pytest.approx(33.33)
    assert c["mixed-33"]["stated_one_side"] == pytest.approx(66.67)
    assert c["mixed-33"]["presented_conflict_when_both"] == pytest.approx(33.33)
    assert c["clean"]["presented_conflict_when_both"] is None and c["poisoned"]["abstained"] == 0.0
    assert [c[n]["poison_share"] for n, _ in CONTEXTS] == [0.0, 0.333, 0.667, 1.0]


def test_both_as_judged_counts_only_the_contexts_whose_passages_hold_both_answers() -> None:
    calm = dict.fromkeys(("clean", "mixed-33", "mixed-67", "poisoned"), False)
    right = dict.fromkeys(calm, True)
    held = _record(True, right, {**calm, "mixed-33": True})
    held["contexts"]["mixed-33"]["holds_both"] = True
    # Written from both kinds of answer, but its passages do not state both: not counted as judged.
    unheld = _record(True, right, calm)
    unheld["contexts"]["mixed-33"]["holds_both"] = False
    c = summarize_poison([held, unheld])["contexts"]["mixed-33"]
    assert c["presented_conflict_when_both"] == 50.0
    assert c["both_held_judged"] == 50.0 and c["presented_conflict_when_both_judged"] == 100.0
    assert c["presented_or_abstained_when_both_judged"] == 100.0


def test_flags_are_split_by_whether_the_answer_was_right() -> None:
    right = dict.fromkeys(("clean", "mixed-33", "mixed-67", "poisoned"), True)
    calm = dict.fromkeys(right, False)
    passed = _record(True, right, calm)
    for ctx in passed["contexts"].values():
        ctx["failure"] = "NoFailure"
    wrong = _record(True, dict.fromkeys(right, False), calm)  # every context failed (WR)
    c = summarize_poison([passed, _record(True, right, calm), wrong])["contexts"]
    # Wrong answers: the one failed; right answers: one of two failed.
    assert c["poisoned"]["flag_wrong"] == 100.0 and c["poisoned"]["flag_right"] == 50.0
    # A context with no wrong answer has no rate, not zero.
    assert summarize_poison([passed])["contexts"]["clean"]["flag_wrong"] is None


@needs_data
def test_one_question_end_to_end_with_real_models(tmp_path: Path, engine: Engine) -> None:
    item = TruthfulItem(
        "What is the capital of France?",
        "Paris is the capital of France",
        ("Paris is the capital of France", "The capital is Paris"),
        ("Lyon is the capital of France", "Marseille is the capital of France"),
    )
    run = PoisonRun(engine, tmp_path / "poison.jsonl")
    records = run.run([item])
    (r,) = records
    assert len(r["clean_passages"]) == 3 and len(r["misleading_passages"]) == 3
    assert set(r["contexts"]) == {n for n, _ in CONTEXTS}
    assert all(c["failure"] and c["response"] for c in r["contexts"].values())
    assert all(
        c["presented"] and c["read_as"] in ("stated", "conflict", "abstained") for c in r["contexts"].values()
    )
    # A rerun reads the records and generates nothing more.
    again = PoisonRun(engine, tmp_path / "poison.jsonl").run([item])
    assert again == records
    # The flags depend on the NLI weights, which each record names: no resume under other weights.
    assert r["nli"] == run.nli and "sha256" in run.nli
    (tmp_path / "poison.jsonl").write_text(json.dumps({**r, "nli": "other weights"}) + "\n")
    with pytest.raises(InputError, match="diagnosed with NLI other weights"):
        PoisonRun(engine, tmp_path / "poison.jsonl").run([item])

    # The judge, fitted on a few real dev questions with the real encoders, then over the records.
    cache = tmp_path / "judge.json"
    judge, validation = fit_judge(engine.models, DATA, questions=12, cache=cache)
    assert validation["learned judge (fitted on dev)"]["n"] > 20
    right = Judged(
        question=item.question,
        response="The capital of France is Paris.",
        correct=item.correct,
        incorrect=item.incorrect,
    )
    wrong = Judged(
        question=item.question,
        response="Lyon is the capital of France.",
        correct=item.correct,
        incorrect=item.incorrect,
    )
    # Fitted on 12 questions its threshold is rough, but the order of the two is not in doubt.
    good, bad = judge.scores([right, wrong])
    assert good > bad
    mark_correct(records, [item], judge)
    assert isinstance(r["parametric_correct"], bool)
    assert all(isinstance(c["correct"], bool) for c in r["contexts"].values())
    assert all(isinstance(c["presented_correct"], bool) for c in r["contexts"].values())
    # Each passage is read by the judge as well: whether a context holds both answers is its text's.
    assert len(r["clean_true"]) == 3 and len(r["misleading_false"]) == 3
    assert not r["contexts"]["clean"]["holds_both"] and not r["contexts"]["poisoned"]["holds_both"]
    assert (
        r["contexts"]["mixed-33"]["holds_both"] == (r["clean_true"][0] or r["clean_true"][1])
        and (r["misleading_false"][0])
    )
    # The fitted judge is kept: the same setup reads it back instead of refitting.
    again_judge, again_validation = fit_judge(engine.models, DATA, questions=12, cache=cache)
    assert again_validation == validation and again_judge.weights == judge.weights


def test_each_split_start_and_writer_keeps_its_own_records() -> None:
    assert records_name("test", 0, "generator") == "poison.test.jsonl"  # the report's, as before
    names = {
        records_name(s, o, w) for s in ("dev", "test") for o in (0, 150) for w in ("generator", "escalation")
    }
    assert len(names) == 8


def test_records_written_by_another_writer_are_not_resumed(tmp_path: Path, engine: Engine) -> None:
    run = PoisonRun(engine, tmp_path / "poison.jsonl")
    assert run.writer is run.generator  # the answering generator writes unless told otherwise
    item = TruthfulItem("What is the capital of France?", "Paris", ("Paris",), ("Lyon",))
    record = {"question": item.question, "nli": run.nli, "writer": "another/model"}
    (tmp_path / "poison.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match="written by another/model"):
        run.run([item])


def test_a_restart_sets_the_records_aside_and_keeps_them(tmp_path: Path) -> None:
    records = tmp_path / "results" / "poison.test.jsonl"
    assert archive_file(records) is None  # nothing to set aside
    records.parent.mkdir(parents=True)
    records.write_text('{"question": "q"}\n')
    moved = archive_file(records)
    assert moved is not None and not records.exists()
    assert moved.read_text() == '{"question": "q"}\n' and moved.parent.parent.name == "archive"
