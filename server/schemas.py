"""HTTP request and response bodies."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragmend.diagnosis.types import Diagnosis
from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import RepairSkip, RepairTrace
from ragmend.errors import ApiErrorType
from ragmend.rag.types import Passage, RAGConfig, StageTimings


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        description="The question (or claim) to answer.", examples=["Who founded Marvel Comics?"]
    )
    config: dict[str, Any] | None = Field(
        default=None,
        description="Overrides of the RAG configuration for this request: mode (dense|bm25|hybrid), k, "
        "rerank, rerank_top_n, prompt, query.",
        examples=[{"mode": "hybrid", "k": 8, "rerank": True}],
    )


class AnswerResponse(BaseModel):
    query: str
    answer: str
    evidence: list[Passage]
    config: RAGConfig
    timings: StageTimings
    model: str
    usage: dict[str, int]
    index_generation: str
    diagnosis: Diagnosis | None = Field(
        default=None,
        description="The diagnosis of this answer: e_q, e_r (passage-level scores), kappa with the "
        "matched KG triples, failure type, EGC features, evidence conflict, stage, seconds per step.",
    )
    first_diagnosis: Diagnosis | None = Field(
        default=None, description="When a repair ran: the diagnosis of the first answer."
    )
    repair: RepairTrace | RepairSkip | None = Field(
        default=None,
        description="When the first answer failed: the action the policy chose (with every arm's "
        "score and the masked ones), the patched configuration, the second pass and its diagnosis, "
        "its measured cost, the reward, and which answer the reply carries; or why no repair ran.",
    )
    seconds: float = Field(0.0, description="The whole request: first pass, diagnosis and repair.")
    generator_seconds: float = Field(
        0.0,
        description="Of `seconds`, the time in generator calls (first pass, query rewrites, repair "
        "pass), the wait for the in-process model included; the rest is ragmend's own work.",
    )

    @classmethod
    def of(cls, outcome: Outcome) -> AnswerResponse:
        """The body for an engine outcome (/v1/answer, and the `ragmend` extension of a chat
        completion)."""
        result = outcome.answer
        return cls(
            query=result.query,
            answer=result.response,
            evidence=list(result.evidence),
            config=result.config,
            timings=result.timings,
            model=result.model,
            usage={"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
            index_generation=result.index_generation,
            diagnosis=outcome.diagnosis,
            first_diagnosis=outcome.first_diagnosis,
            repair=outcome.repair,
            seconds=outcome.seconds,
            generator_seconds=outcome.generator_s,
        )


class ErrorBody(BaseModel):
    message: str = Field(description="What is wrong, naming the field where one is at fault.")
    type: ApiErrorType = Field(description="OpenAI's error type (docs/api.md, Errors).")
    param: str | None = Field(
        default=None, description="Only with code model_not_found: the request field at fault (or null)."
    )
    code: int | str = Field(
        description="The HTTP status, or OpenAI's code where one applies (model_not_found)."
    )
    error_class: str | None = Field(
        default=None,
        description="The ragmend error class (InputError, NotReady, Overloaded...), when the error is "
        "one; absent for errors of the HTTP layer (validation, auth, unknown path...).",
    )


class ErrorResponse(BaseModel):
    """The body of every error response, on every route (OpenAI's shape)."""

    error: ErrorBody
