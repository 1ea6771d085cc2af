"""Values that cross package boundaries: the frozen RAG configuration and the answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragmend.errors import InputError, describe_validation
from ragmend.settings import CONTEXT_TOKENS, RAGSettings, RetrievalMode

EvidenceMode = Literal["closest", "focus"]
# Which generator answers a pass: the configured one, or the stronger one (models.escalation).
GeneratorChoice = Literal["default", "escalation"]
# The RAGConfig fields a pass's retrieval and evidence block read; the rest shape the generation.
RETRIEVAL_FIELDS = ("query", "mode", "k", "rerank", "rerank_top_n", "hops", "evidence", "context_tokens")


class RAGConfig(BaseModel):
    """P in the paper: what one pipeline pass does. Repair actions are patches of this value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: RetrievalMode = "hybrid"
    k: int = Field(5, ge=1, le=100, description="passages retrieved")
    rerank: bool = False
    rerank_top_n: int = Field(5, ge=1, le=100, description="passages kept after reranking")
    prompt: str = "default"
    # The prompt's evidence: the passages' sentences closest to the question within this many
    # tokens (estimated); 0: the passages whole (rag/evidence.py).
    context_tokens: int = Field(CONTEXT_TOKENS, ge=0, le=8192, description="evidence tokens in the prompt")
    # How the prompt's evidence is chosen: "closest", the sentences closest to the question by
    # embeddings, in retrieval order; "focus", the sentences a cross-encoder ranks best against
    # the question, best first, with a prompt line saying the answer is among them (a repair).
    evidence: EvidenceMode = "closest"
    # Retrieval hops: 2 retrieves again from the first hop's best sentence (the bridge a
    # multi-hop question's second passage is named in) and adds what that finds (a repair).
    hops: int = Field(1, ge=1, le=2, description="retrieval hops")
    # Which generator answers: the configured one, or models.escalation's stronger one (a large
    # plan of the router, or the escalate repair).
    generator: GeneratorChoice = "default"
    # The text used for retrieval when it differs from the user's question (a rewrite action).
    query: str | None = None
    # Per-request sampling (the OpenAI API's temperature/max_tokens); None: the generator settings'.
    # Repair actions patch other fields, so a repaired pass samples like the first one.
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="generator temperature")
    max_tokens: int | None = Field(None, ge=1, le=4096, description="most tokens generated")
    stop: tuple[str, ...] | None = Field(None, max_length=4, description="sequences that end the answer")
    seed: int | None = Field(None, description="sampling seed (null: the generator settings')")
    # A chat's system or developer messages: how to answer (style, language, length). Added to
    # the prompt's system message after its grounding rule, which they cannot switch off.
    instructions: str | None = Field(None, max_length=4000, description="the user's style instructions")

    @classmethod
    def from_settings(cls, rag: RAGSettings) -> RAGConfig:
        return cls(
            mode=rag.mode,
            k=rag.k,
            rerank=rag.rerank,
            rerank_top_n=rag.rerank_top_n,
            prompt=rag.prompt,
            context_tokens=rag.context_tokens,
        )

    def retrieval(self) -> tuple[Any, ...]:
        """What this pass's retrieval and evidence block depend on (RETRIEVAL_FIELDS): two passes
        with equal values read the same passages."""
        return tuple(getattr(self, f) for f in RETRIEVAL_FIELDS)

    def patch(self, **changes: Any) -> RAGConfig:
        """A validated copy with some fields changed (unknown or invalid fields raise InputError)."""
        try:
            return type(self).model_validate({**self.model_dump(), **changes})
        except ValidationError as e:
            raise InputError(describe_validation(e, prefix="config")) from e


class Turn(BaseModel):
    """One earlier turn of a conversation (what a follow-up may refer to)."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant"]
    content: str


class Passage(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    title: str
    text: str
    score: float
    retriever: str = Field(description="dense | bm25 | hybrid | rerank: what produced the score")
    trust: float | None = Field(None, description="its source's trust level in [0, 1]; null: not said")


class StageTimings(BaseModel):
    model_config = ConfigDict(frozen=True)

    retrieve_s: float = 0.0
    rerank_s: float = 0.0
    generate_s: float = 0.0
    # Of generate_s, the seconds to the generator's first piece of text (streamed passes only).
    first_token_s: float | None = None

    @property
    def total_s(self) -> float:
        return self.retrieve_s + self.rerank_s + self.generate_s


class Answer(BaseModel):
    model_config = ConfigDict(frozen=True)

    query: str
    response: str
    evidence: tuple[Passage, ...]
    config: RAGConfig
    timings: StageTimings
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    index_generation: str = ""
    finish_reason: str | None = None  # the generator's: "stop", "length"...
    # The answer tokens' log-probabilities where the engine reports them (a verdict feature).
    token_logprobs: tuple[float, ...] | None = None
