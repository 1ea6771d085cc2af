"""The protocol models of the check endpoints: POST /v1/diagnose and /v1/diagnose/batch
(docs/api.md, "Check any answer"). The diagnosis itself is /v1/answer's (server/schemas.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ragmend.server.schemas import Diagnosis, Passage


class GivenPassage(BaseModel):
    """A passage the answer was written from."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The passage's text, judged whole (nothing is cut to fit).")
    id: str | None = Field(
        None, max_length=200, description="How the diagnosis names it (default: p1, p2, ... in order)."
    )
    title: str = Field("", max_length=1000, description="Its title, read beside the text.")
    trust: float | None = Field(
        None,
        ge=0,
        le=1,
        description="How far its source is trusted, in [0, 1]; where the sources disagree, "
        "server.conflict_majority weighs each side by it.",
    )


class DiagnoseRequest(BaseModel):
    """One answer to check: against the passages given, or against those the corpus retrieves for
    the question when none are."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="The answer to check (at most server.check_max_answer_chars).")
    question: str | None = Field(
        None,
        description="The question it answers; needed to retrieve passages. Without one the answer "
        "is judged for support by the passages only.",
    )
    passages: list[GivenPassage] | None = Field(
        None,
        description="The passages the answer was written from (at most server.check_max_passages, "
        "each at most server.check_max_passage_chars). Null: retrieve them from the corpus `model` names.",
    )
    model: str | None = Field(
        None,
        description="The corpus whose diagnosis settings (and, without passages, retrieval) serve the "
        "check: a name of GET /v1/models (default: the default corpus).",
    )
    mode: Literal["qa", "claim"] = Field(
        "qa", description="qa: an answer to a question; claim: a claim's label (SUPPORTS, REFUTES, ...)."
    )


class DiagnoseResponse(BaseModel):
    id: str = Field(description="This check's id.")
    object: Literal["diagnosis"] = "diagnosis"
    model: str = Field(description="The corpus that served the check.")
    diagnosis: Diagnosis = Field(description="The same diagnosis /v1/answer gives its answers.")
    supported: bool | None = Field(
        description="False when the diagnosis found a failure; null when it did not judge the answer "
        "(not English: see diagnosis.not_judged)."
    )
    passages: list[Passage] = Field(description="What the answer was judged against.")
    retrieved: bool = Field(description="The passages came from the corpus's retrieval, not the request.")
    truncated_passages: list[str] = Field(
        description="Ids of passages the NLI model read only in part (longer than its window): a "
        "support found nowhere may be in what it did not read."
    )
    seconds: float = Field(description="The check: retrieval (when it retrieved) and diagnosis.")


class DiagnoseBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[DiagnoseRequest] = Field(
        min_length=1, description="The answers to check, in order (at most server.check_max_batch)."
    )


class DiagnoseBatchResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[DiagnoseResponse] = Field(description="One check per item, in the items' order.")
    seconds: float = Field(description="The whole batch, its wait for a slot excluded.")
