"""The mixed stream (corpora/mixed.py) on the real files: its three streams in turn over one
corpus, each item asked the way its kind is asked, and scored on what the user reads."""

from __future__ import annotations

from collections import Counter

import pytest

from ragmend.corpora.mixed import MIXED, stream_of
from ragmend.corpora.tasks import get_task
from tests.test_datasets import DATA, needs_data


@pytest.fixture(scope="module")
def mixed() -> tuple[list, object]:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return MIXED.load(DATA)


@needs_data
def test_the_streams_come_in_turn_and_the_unanswerable_kinds_alternate(mixed: tuple[list, object]) -> None:
    items, _ = mixed
    test = MIXED.sample(items, "test")
    assert [stream_of(i) for i in test[:6]] == ["hotpotqa", "fever", "unanswerable"] * 2
    first_300 = Counter(i.kind for i in test[:300])
    assert first_300["claim"] == 100 and first_300["gold_removed"] == first_300["out_of_corpus"] == 50
    assert {i.split for i in test} == {"test"} and {i.split for i in MIXED.sample(items, "dev")} == {"dev"}
    assert get_task("mixed") is MIXED


@needs_data
def test_one_corpus_holds_the_answerable_and_not_the_held_out_gold(mixed: tuple[list, object]) -> None:
    items, corpus = mixed
    titles = {p.title for p in corpus.paragraphs}  # type: ignore[attr-defined]
    assert any(p.id.startswith("fever:") for p in corpus.paragraphs)  # type: ignore[attr-defined]
    from ragmend.corpora.readers import load_hotpotqa

    raw = {i.id: i for i in load_hotpotqa(DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json")}
    removed = [i for i in items if i.kind == "gold_removed"]
    assert removed and all(
        not set(raw[i.id.split(":", 1)[1]].supporting_titles) & titles for i in removed[:20]
    )


def test_claims_are_asked_with_the_claim_prompt_and_scored_on_what_is_read() -> None:
    from ragmend.corpora.tasks import EvalItem

    claim = EvalItem(
        id="fever:fever-1", query="Paris is in France.", gold="SUPPORTS", split="test", kind="claim"
    )
    question = EvalItem(
        id="hotpotqa:1", query="Where is Paris?", gold="France", split="test", kind="answerable"
    )
    held_out = EvalItem(
        id="unanswerable:2", query="Who founded X?", gold="Y", split="test", kind="gold_removed"
    )
    assert MIXED.overrides(claim)["prompt"] == "claim" and MIXED.overrides(question) == {}
    assert MIXED.score(claim, "SUPPORTS", None)["correct"] == 1.0
    assert MIXED.score(claim, "whatever", "SUPPORTS")["correct"] == 1.0  # the gated label is read
    assert MIXED.score(question, "Paris is in France.", None)["correct"] == 1.0
    # An abstention the user reads is scored as the empty answer: right only where nothing answers.
    assert MIXED.score(question, "", None)["correct"] == 0.0
    assert MIXED.score(held_out, "", None)["correct"] == 1.0
    assert MIXED.score(held_out, "I don't know.", None)["correct"] == 1.0
    assert MIXED.score(held_out, "Y founded it.", None)["correct"] == 0.0


def test_the_read_figures_count_an_abstention_on_answerable_passages_whoever_said_it() -> None:
    from ragmend.corpora.tasks import EvalItem

    held = EvalItem(id="hotpotqa:1", query="Where is Paris?", gold="France", split="test", kind="answerable")
    claim = EvalItem(id="fever:1", query="Paris is in France.", gold="SUPPORTS", split="test", kind="claim")
    assert MIXED.answer_in(held, ["Paris is the capital of France."]) is True
    assert MIXED.answer_in(held, ["Paris is a city."]) is False and MIXED.answer_in(claim, ["x"]) is None

    def row(item_id: str, correct: float, response: str, read: bool, held: bool | None) -> dict:
        return {
            "id": item_id,
            "scores": {"correct": correct},
            "response": response,
            "abstained_read": read,
            "answer_in_evidence": held,
        }

    records = [
        row("hotpotqa:1", 1.0, "Paris is in France.", False, True),
        row("hotpotqa:2", 0.0, "I don't know.", False, True),  # the generator's abstention
        row("hotpotqa:3", 0.0, "Lyon.", True, True),  # the answer policy's
        row("hotpotqa:4", 0.0, "I don't know.", False, False),  # nothing to answer from
        row("fever:1", 1.0, "SUPPORTS", False, None),
        row("unanswerable:1", 1.0, "I don't know.", False, None),
        row("unanswerable:2", 0.0, "Berlin.", False, None),
    ]
    assert MIXED.read_summary is not None
    got = MIXED.read_summary(records)
    assert got["hotpotqa_correct_read"] == 25.0 and got["fever_correct_read"] == 100.0
    assert got["unanswerable_abstained_read"] == 50.0 and got["correct_read"] == round(300 / 7, 2)
    assert got["idk_on_answerable"] == round(200 / 3, 2) and got["idk_on_answerable_n"] == 3
