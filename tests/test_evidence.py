"""The compact prompt: the passages' sentences closest to the question, within the token budget,
with the real embedding model and the diagnosis's sentence splitter over the bundled corpus."""

from __future__ import annotations

import re

import numpy as np

from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.engine import Engine
from ragmend.rag.evidence import CHARS_PER_TOKEN, compact_context, estimate_tokens, focused_context
from ragmend.rag.types import Passage
from tests.conftest import sample_questions

NUMBER = re.compile(r"^\[(\d+)\] ", re.M)


def _passages(engine: Engine, question: str) -> list[Passage]:
    return engine.corpus.index.retriever.retrieve(question, "dense", 5)


def test_the_prompt_holds_the_sentence_with_the_answer_within_the_budget(engine: Engine) -> None:
    question = "Andrew Jaspan was the co-founder of what not-for-profit media outlet?"
    passages = _passages(engine, question)
    context = compact_context(question, passages, 64, split_sentences, engine._embed)
    assert "The Conversation" in context
    body = NUMBER.sub("", context)
    # The budget bounds the sentences' text; titles and numbers come on top of it.
    titles = sum(len(p.title) + 2 for p in passages)
    assert len(body) <= 64 * CHARS_PER_TOKEN + titles + 16
    whole = sum(len(p.text) for p in passages)
    assert len(context) < whole / 2


def test_citation_numbers_point_at_the_retrieved_passages(engine: Engine) -> None:
    for q in sample_questions(6):
        passages = _passages(engine, q["question"])
        context = compact_context(q["question"], passages, 96, split_sentences, engine._embed)
        numbers = [int(n) for n in NUMBER.findall(context)]
        assert numbers == sorted(numbers) and numbers, context
        for block in context.split("\n\n"):
            n = int(NUMBER.match(block).group(1))  # type: ignore[union-attr]
            p = passages[n - 1]
            text = block[len(f"[{n}] {p.title}: ") :]
            # Every sentence shown is the passage's own, in its order.
            for piece in text.split(" ... "):
                assert piece in p.text, (piece, p.text)


def test_a_budget_smaller_than_any_sentence_still_gives_the_best_one_cut() -> None:
    passages = [
        Passage(id="a", doc_id="a", title="T", text="One long sentence " * 20, score=1.0, retriever="dense")
    ]
    context = compact_context("long", passages, 5, split_sentences, lambda texts: _equal_scores(len(texts)))
    assert context.startswith("[1] T: ")
    assert estimate_tokens(context[len("[1] T: ") :]) <= 5


def _equal_scores(n: int) -> np.ndarray:
    return np.ones((n, 4), dtype=np.float32) / 2.0


def test_the_pipeline_prompts_with_the_compact_evidence_and_keeps_the_whole_passages(engine: Engine) -> None:
    question = sample_questions(1)[0]["question"]
    config = engine.pipeline.default_config()
    passages, _ = engine.pipeline.retrieve(question, config)
    compact, used = engine.pipeline.context(question, passages, config)
    whole, used_whole = engine.pipeline.context(question, passages, config.patch(context_tokens=0))
    assert config.context_tokens > 0
    assert used == used_whole  # the diagnosis's evidence: the passages whole, either way
    assert len(compact) < len(whole)
    assert all(p.text in whole for p in used)


def test_focused_evidence_puts_the_sentence_holding_the_answer_first(engine: Engine) -> None:
    question = "Andrew Jaspan was the co-founder of what not-for-profit media outlet?"
    passages = _passages(engine, question)
    context = focused_context(question, passages, 96, split_sentences, engine.models.reranker.score)
    lines = context.split("\n")
    # The real cross-encoder ranks the sentence naming the outlet first; each line keeps its
    # passage's number, so citations still point at the retrieved passages.
    assert "The Conversation" in lines[0], context
    for line in lines:
        n = int(NUMBER.match(line).group(1))  # type: ignore[union-attr]
        p = passages[n - 1]
        assert line[len(f"[{n}] {p.title}: ") :] in p.text
    assert estimate_tokens(NUMBER.sub("", context)) <= 96 + sum(len(p.title) for p in passages)


def test_the_focus_pass_tells_the_generator_and_the_second_hop_adds_new_documents(engine: Engine) -> None:
    question = sample_questions(1)[0]["question"]
    config = engine.pipeline.default_config()
    first, _ = engine.pipeline.retrieve(question, config)
    hopped, timings = engine.pipeline.retrieve(question, config.patch(hops=2))
    assert len(hopped) == len(first) and timings.retrieve_s > 0
    # The bridge sentence's passage leads, then documents the first hop did not have.
    assert hopped[0] in first
    new = [p for p in hopped if p.doc_id not in {q.doc_id for q in first}]
    assert 1 <= len(new) <= 2 and hopped[1 : 1 + len(new)] == new
    answer = engine.pipeline.answer(question, config.patch(evidence="focus", max_tokens=8))
    assert answer.config.evidence == "focus" and answer.evidence
