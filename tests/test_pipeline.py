"""The pipeline end to end: real embeddings, BM25, reranker and the tiny generator through litellm."""

from __future__ import annotations

import pytest

from ragmend.engine import Engine
from ragmend.errors import InputError
from ragmend.rag.pipeline import format_context
from ragmend.rag.types import Passage, RAGConfig
from ragmend.settings import RetrievalMode
from tests.conftest import sample_questions

QUESTIONS = sample_questions()


def _gold_hits(engine: Engine, mode: RetrievalMode, k: int) -> float:
    found = 0
    for q in QUESTIONS:
        titles = {p.title for p in engine.corpus.index.retriever.retrieve(q["question"], mode, k)}
        found += any(t in titles for t in q["supporting_titles"])
    return found / len(QUESTIONS)


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_every_mode_retrieves_gold_passages(engine: Engine, mode: RetrievalMode) -> None:
    # At least one gold paragraph in the top 5 for most questions; a broken retriever gets ~0.
    assert _gold_hits(engine, mode, 5) >= 0.75


def test_retrieval_scores_are_ordered_and_k_respected(engine: Engine) -> None:
    for mode in ("dense", "bm25", "hybrid"):
        passages = engine.corpus.index.retriever.retrieve(QUESTIONS[0]["question"], mode, 7)
        assert 1 <= len(passages) <= 7
        scores = [p.score for p in passages]
        assert scores == sorted(scores, reverse=True)
        assert all(p.retriever == mode for p in passages)


def test_answer_end_to_end_through_litellm(engine: Engine) -> None:
    q = QUESTIONS[0]
    answer = engine.answer(q["question"])
    assert answer.model.startswith("ragmend/smollm2")  # the local model, reached through litellm
    assert answer.response.strip()
    assert any(p.title in q["supporting_titles"] for p in answer.evidence)
    assert answer.timings.retrieve_s > 0 and answer.timings.generate_s > 0 and answer.timings.rerank_s == 0
    assert answer.completion_tokens > 0 and answer.prompt_tokens > 0
    assert answer.index_generation == engine.corpus.store.current_generation()
    # The in-process engine reports each answer token's log-probability (all but the final one).
    lps = answer.token_logprobs
    assert lps is not None and 0 < len(lps) <= answer.completion_tokens
    assert all(lp <= 0 for lp in lps) and any(lp < 0 for lp in lps)


def test_rerank_reorders_a_deeper_list(engine: Engine) -> None:
    q = QUESTIONS[1]
    answer = engine.answer(q["question"], {"k": 20, "rerank": True, "rerank_top_n": 3})
    assert len(answer.evidence) == 3 and all(p.retriever == "rerank" for p in answer.evidence)
    assert answer.timings.rerank_s > 0
    assert any(p.title in q["supporting_titles"] for p in answer.evidence)
    # The reranker's own relevance decides the order.
    scores = [p.score for p in answer.evidence]
    assert scores == sorted(scores, reverse=True)


def test_rewritten_query_drives_retrieval(engine: Engine) -> None:
    q = QUESTIONS[2]
    cfg = engine.config({"query": QUESTIONS[0]["question"], "mode": "bm25"})
    passages, _ = engine.pipeline.retrieve(q["question"], cfg)
    assert any(p.title in QUESTIONS[0]["supporting_titles"] for p in passages)


@pytest.mark.parametrize(
    ("query", "message"),
    [("", "empty"), ("   \n\t", "empty"), ("x" * 2001, "over the maximum of 2000")],
)
def test_bad_queries(engine: Engine, query: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        engine.answer(query)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"k": 0}, "config.k"),
        ({"mode": "sparse"}, "config.mode"),
        ({"topk": 3}, "config.topk"),
        ({"prompt": "nope"}, "unknown answer prompt"),
    ],
)
def test_bad_config_overrides(engine: Engine, overrides: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        engine.answer("Who?", overrides)


def test_config_is_frozen_and_patchable() -> None:
    cfg = RAGConfig()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        cfg.k = 3  # type: ignore[misc]
    assert cfg.patch(k=20, rerank=True) == RAGConfig(k=20, rerank=True)


def test_context_budget_drops_passages_past_it() -> None:
    ps = [
        Passage(id=str(i), doc_id=str(i), title=f"T{i}", text="w" * 300, score=1.0, retriever="dense")
        for i in range(5)
    ]
    context, used = format_context(ps, 700)
    assert len(used) == 2 and "[1] T0" in context and "[3]" not in context
    context, used = format_context(ps, 200)  # the first passage is truncated, never dropped
    assert len(used) == 1 and len(context) == 200
