"""Where the pipeline most likely failed, from request-time signals (RAGEC's stage cascade)."""

from __future__ import annotations

from dataclasses import dataclass

from ragmend.diagnosis.types import FailureType, NLIState, Stage


@dataclass(frozen=True, kw_only=True)
class StageEvidence:
    """What the stage cascade looks at, all observable at request time (no ground truth)."""

    failure: FailureType
    e_q: NLIState
    reranked: bool
    on_topic: bool  # some passage is similar to the query (an EGC Q-E edge)
    best_query_similarity: float
    cut_evidence: bool  # a premise was truncated, or several chunks of one document came back


def attribute_stage(ev: StageEvidence) -> tuple[Stage, str]:
    """RAGEC's cascade (Section 4; docs/references.md), generation first, with request-time
    signals in place of its ground-truth recall: sufficient evidence -> generation; else reranking
    when a reranker chose the passages; else chunking when on-topic text was cut; else retrieval."""
    if ev.failure == "NoFailure":
        return "none", "no failure found"
    if ev.e_q != "neutral":
        if ev.failure == "LEM":
            return "generation", "the evidence decides the claim but the label says otherwise"
        what = "conflicts with the knowledge graph" if ev.failure == "WP" else "is not supported by it"
        return "generation", f"the evidence decides the question (e_q={ev.e_q}) but the response {what}"
    if ev.reranked:
        return "reranking", "the reranker's top passages do not answer the question"
    if ev.on_topic and ev.cut_evidence:
        return "chunking", "passages are on topic but cut (truncated, or one document split across chunks)"
    if ev.on_topic:
        return "retrieval", (
            f"passages are on topic (similarity {ev.best_query_similarity:.2f}) but none answers the question"
        )
    return "retrieval", (
        f"no retrieved passage is about the question (best similarity {ev.best_query_similarity:.2f})"
    )
