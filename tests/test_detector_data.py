"""The detector's training data: the shared grounded-hallucination sets read whole but for their
test rows, the edits' spans on real text with the real spaCy pipeline, the balance, and the
command's errors."""

from __future__ import annotations

import doctest
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ragmend.corpora.cases import RAGTRUTH_TRAIN, ragtruth_cases, ragtruth_held, ragtruth_source
from ragmend.corpora.grounded import Grounded
from ragmend.corpora.hallucination import edited_spans, read_all, sentences_of
from ragmend.corpora.nli_pairs import EntitySwapper
from ragmend.models.spacy_model import load_spacy
from ragmend.settings import Settings
from ragmend.train import detector_data
from ragmend.train.detector_data import balance, edit_response, insert_sentence, ragtruth_response

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


def test_the_module_examples_run() -> None:
    assert doctest.testmod(detector_data).failed == 0


def test_an_edited_summary_is_marked_where_it_differs() -> None:
    original = "U.K. activists dumped gallons of paint in front of the embassy."
    edited = "U.K. activists dumped 4 million litres of paint in front of the embassy."
    assert [edited[a:b] for a, b in edited_spans(original, edited)] == ["4 million litres"]
    assert edited_spans("", edited) == ()


@needs_data
def test_every_set_is_read_without_its_test_rows() -> None:
    rows = read_all(DATA)
    sets = Counter(g.set for g in rows)
    assert set(sets) == {
        "summedits", "begin", "faithdial", "factcheck_gpt", "halueval",
        "q2_wow", "xsum_hallucination", "frank", "fib", "contractnli", "wice",
    }  # fmt: skip
    assert not any("begin_test" in g.id for g in rows)
    assert sets["summedits"] < 4681 / 2  # SummEdits' test rows are most of it: none read
    # FRANK's test articles are read from neither FRANK nor the XSum annotations of the same articles.
    held = set((DATA / "hallucination" / "frank" / "test_split.txt").read_text().split())
    assert sets["frank"] and sets["xsum_hallucination"]
    assert not {g.group.split("-", 1)[1] for g in rows if g.set in ("frank", "xsum_hallucination")} & held
    contract_test = json.loads((DATA / "hallucination" / "contractnli" / "test.json").read_text())
    assert not {f"contractnli-{d['id']}" for d in contract_test["documents"]} & {g.group for g in rows}
    assert sets["q2_wow"] == 1088 and sets["wice"] == 374  # every labelled response; WiCE's train only
    # One article, one group, whichever set its summary comes from.
    assert {g.group for g in rows if g.set == "fib"} & {
        g.group for g in rows if g.set in ("frank", "xsum_hallucination")
    }
    for g in rows:
        assert g.response and g.source and g.source[0]
        assert g.unsupported or g.spans == ()
        for a, b in g.spans or ():
            assert 0 <= a < b <= len(g.response)
    # A HaluEval row whose knowledge shares a sentence with the evaluation corpus is dropped.
    first = next(g for g in rows if g.set == "halueval")
    dropped = read_all(DATA, drop_sentences=frozenset(sentences_of(first.source[0])[:1]))
    assert first.id not in {g.id for g in dropped} and len(dropped) == len(rows) - 2


@pytest.fixture(scope="module")
def swapper() -> EntitySwapper:
    texts = [
        "Paris is in France.",
        "Berlin is in Germany. Angela Merkel led it from 2005.",
        "In 1999 Tom Hanks won.",
    ]
    return EntitySwapper(load_spacy(Settings().models), texts, seed=0)


def test_an_edit_marks_what_it_changed(swapper: EntitySwapper) -> None:
    g = Grounded(
        id="x",
        set="hotpot",
        task="qa",
        question="Who led Germany?",
        source=("Angela Merkel led Germany from 2005 to 2021. Helmut Kohl led it before.",),
        response="Angela Merkel led Germany. She led it from 2005.",
        unsupported=False,
        spans=(),
        group="x",
    )
    kinds: Counter[str] = Counter()
    for seed in range(12):
        e = edit_response(
            g, swapper, {"hotpot": ["Helmut Kohl was born in Ludwigshafen."]}, random.Random(seed)
        )
        assert e is not None and e.unsupported and e.set == "edit" and e.response != g.response
        ((a, b),) = e.spans or ()
        assert e.response[a:b].strip() and e.response[:a] == g.response[:a]
        kinds[e.kind] += 1
    assert len(kinds) >= 2  # the edits are drawn, not one always


def test_an_added_sentence_is_marked_wherever_it_lands() -> None:
    response = "Paris is big. It is old. It is in France."
    for at in (13, 24, len(response)):
        e = insert_sentence(response, at, "It has a tower.")
        a, b = e.span
        assert e.text[a:b] == "It has a tower."
        assert (e.text[:a] + e.text[b:]).split() == response.split()


@needs_data
def test_ragtruth_train_rows_leave_the_threshold_sources_out() -> None:
    cases = ragtruth_cases(DATA / RAGTRUTH_TRAIN, "train")
    held = {ragtruth_source(c) for c in cases if ragtruth_held(c)}
    trained = {ragtruth_source(c) for c in cases if not ragtruth_held(c)}
    assert held and trained and not held & trained  # a source is held whole, every response of it
    assert 0.15 < len(held) / (len(held) + len(trained)) < 0.35
    rows = [ragtruth_response(c) for c in cases if not ragtruth_held(c)]
    assert {g.task for g in rows} <= {"qa", "summary", "data2txt"} and {g.group for g in rows} == {
        f"ragtruth-{s}" for s in trained
    }
    for g, c in zip(rows, [c for c in cases if not ragtruth_held(c)], strict=True):
        assert g.unsupported == c.unsupported and g.response == c.response
        assert g.spans is None or all(0 <= a < b <= len(g.response) for a, b in g.spans)
        assert g.unsupported or g.spans == ()


def test_balance_halves_each_task_and_spreads_lengths() -> None:
    def row(i: int, task: str, bad: bool, words: int) -> Grounded:
        return Grounded(
            id=str(i),
            set="s",
            task=task,  # type: ignore[arg-type]
            question="",
            source=("src",),
            response=" ".join(["w"] * words),
            unsupported=bad,
            spans=(),
            group=str(i),
        )

    rows = [row(i, "qa", i % 3 == 0, 5 + (i % 4) * 15) for i in range(300)]
    kept = balance(rows, per_task=60, rng=random.Random(0))
    assert len(kept) == 60 and sum(g.unsupported for g in kept) == 30
    assert len({len(g.response.split()) // 15 for g in kept}) >= 3


def test_the_command_says_what_is_missing(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragmend.cli",
            "detector",
            "data",
            "--out",
            str(tmp_path / "o"),
            "--data-root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "hallucination/ is missing" in r.stderr + r.stdout


def test_the_trainer_says_what_a_bad_oversample_is(tmp_path: Path) -> None:
    row = Grounded(
        id="ragtruth-1",
        set="ragtruth",
        task="qa",
        question="q?",
        source=("s.",),
        response="r.",
        unsupported=False,
        spans=(),
        group="g",
    )
    (tmp_path / "train.jsonl").write_text(json.dumps(row.as_json()) + "\n")
    r = subprocess.run(
        [
            *(sys.executable, "-m", "ragmend.cli", "detector", "train", "--data", str(tmp_path)),
            *("--out", str(tmp_path / "o"), "--oversample", "ragtruth=0"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "expected SET=N" in r.stderr + r.stdout
    assert not (tmp_path / "o").exists()


def test_a_summary_span_counts_where_two_annotators_marked_it() -> None:
    from ragmend.corpora.summaries import _majority_spans

    summary = "the mayor of leeds opened a new bridge on monday."
    marks = [("w1", "mayor of leeds"), ("w2", "of leeds opened"), ("w3", "on monday"), ("w2", "absent text")]
    assert [summary[a:b] for a, b in _majority_spans(summary, marks)] == ["of leeds"]
    assert _majority_spans(summary, [("w1", "on monday")]) == ()  # one annotator is not enough


def test_a_claims_unsupported_tokens_become_its_spans() -> None:
    from ragmend.corpora.grounded_claims import _token_spans

    claim = "The audience consists of Australian ex-pats."
    tokens = ["The", "audience", "consists", "of", "Australian", "ex", "-", "pats", "."]
    marked = [False, False, False, False, True, True, True, True, False]
    assert [claim[a:b] for a, b in _token_spans(claim, tokens, marked)] == ["Australian ex-pats"]
