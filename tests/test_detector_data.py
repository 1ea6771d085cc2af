"""The detector's training data: the shared grounded-hallucination sets read whole but for their
test rows, the edits' spans on real text with the real spaCy pipeline, the balance, and the
command's errors."""

from __future__ import annotations

import doctest
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ragmend.corpora.hallucination import Grounded, edited_spans, read_all, sentences_of
from ragmend.corpora.nli_pairs import EntitySwapper
from ragmend.models.spacy_model import load_spacy
from ragmend.settings import Settings
from ragmend.train import detector_data
from ragmend.train.detector_data import balance, edit_response

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
    assert set(sets) == {"summedits", "begin", "faithdial", "factcheck_gpt", "halueval"}
    assert not any("begin_test" in g.id for g in rows)
    assert sets["summedits"] < 4681 / 2  # SummEdits' test rows are most of it: none read
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
        "x",
        "hotpot",
        "qa",
        "Who led Germany?",
        ("Angela Merkel led Germany from 2005 to 2021. Helmut Kohl led it before.",),
        "Angela Merkel led Germany. She led it from 2005.",
        False,
        (),
        "x",
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


def test_balance_halves_each_task_and_spreads_lengths() -> None:
    def row(i: int, task: str, bad: bool, words: int) -> Grounded:
        return Grounded(str(i), "s", task, "", ("src",), " ".join(["w"] * words), bad, (), str(i))  # type: ignore[arg-type]

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
