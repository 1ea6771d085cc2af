"""Bodies of the OpenAI-compatible API (/v1/chat/completions, /v1/models).

What ragmend honours is named in the request model. OpenAI's fields for what it does not serve
(tools, log-probabilities, JSON output, penalties...) are in `UNSERVED`: each is refused with a 400
naming it, unless it carries the value that asks for nothing, which standard clients send by
default. Fields that change nothing in an answer (user, metadata, store...) are accepted. docs/api.md
has the table. The request models are strict (no "0.5" for a number, no "true" for a boolean), so
a wrong type is a 400 naming the field instead of a silent coercion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragmend.server.schemas import MAX_MESSAGE_CHARS, MAX_MESSAGES, AnswerResponse
from ragmend.settings import StreamMode

# The same bounds as RAGConfig.max_tokens / temperature, so a bad value is refused naming the
# request field rather than a config field the client never sent.
MAX_TOKENS_LIMIT = 4096

Role = Literal["system", "developer", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "content_filter", "tool_calls", "function_call"]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    # extra="ignore": name, tool_calls, tool_call_id, refusal... (the history is not used).
    model_config = ConfigDict(extra="ignore", strict=True)

    role: Role
    content: str | list[TextPart] | None = Field(
        default=None, description="A string, or a list of text parts ({type: text, text})."
    )

    @field_validator("content")
    @classmethod
    def _bounded(cls, v: str | list[TextPart] | None) -> str | list[TextPart] | None:
        size = len(v) if isinstance(v, str) else sum(len(p.text) for p in v or [])
        if size > MAX_MESSAGE_CHARS:
            raise ValueError(f"a message holds at most {MAX_MESSAGE_CHARS} characters (this one {size})")
        return v

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    include_usage: bool = Field(False, description="Send a last chunk with the usage.")
    mode: StreamMode | None = Field(
        None,
        description="ragmend: draft streams the first answer as reasoning_content while it is "
        "checked, then the answer the user reads as content; live streams the first answer as "
        "content (a correction follows if a repair replaces it); verify_first sends the answer the "
        "user reads once it is checked. Default: server.stream_mode.",
    )
    verify_first: bool | None = Field(
        None,
        description="ragmend, older form of mode: true is mode verify_first, false is mode live; "
        "mode wins where both are given.",
    )

    def chosen(self, default: StreamMode) -> StreamMode:
        """The stream mode this request asks for, else `default`."""
        if self.mode is not None:
            return self.mode
        if self.verify_first is not None:
            return "verify_first" if self.verify_first else "live"
        return default


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text", "json_object", "json_schema"]


class ChatCompletionRequest(BaseModel):
    # extra="allow": the fields it does not name are checked against UNSERVED (`unserved`).
    model_config = ConfigDict(extra="allow", strict=True)

    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description="The conversation. The last user message is the question; the RAG prompt "
        "supplies its own system message, and earlier turns are not used.",
        examples=[[{"role": "user", "content": "Who founded Marvel Comics?"}]],
    )
    model: str | None = Field(
        default=None, description="The served model name (GET /v1/models); omitted: that one."
    )
    temperature: float | None = Field(
        default=None, ge=0.0, le=2.0, description="Generator temperature (default: the configured one)."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=MAX_TOKENS_LIMIT, description="Most tokens generated (deprecated by OpenAI)."
    )
    max_completion_tokens: int | None = Field(
        default=None, ge=1, le=MAX_TOKENS_LIMIT, description="Most tokens generated; wins over max_tokens."
    )
    stop: str | list[str] | None = Field(
        default=None, description="Up to 4 sequences that end the answer (not included in it)."
    )
    seed: int | None = Field(default=None, description="Sampling seed (default: the configured one).")
    response_format: ResponseFormat | None = Field(
        default=None, description="Only {type: text}: answers are grounded prose, which the diagnosis reads."
    )
    n: int | None = Field(default=None, ge=1, le=1, description="Only 1 choice per request.")
    stream: bool | None = Field(default=False, description="Server-sent events (chat.completion.chunk).")
    stream_options: StreamOptions | None = None

    @field_validator("stop")
    @classmethod
    def _stop_sequences(cls, v: str | list[str] | None) -> str | list[str] | None:
        items = [v] if isinstance(v, str) else v or []
        if v is not None and not 1 <= len(items) <= 4:
            raise ValueError("stop takes a string or 1 to 4 strings")
        if any(not s for s in items):
            raise ValueError("stop sequences must not be empty")
        return v

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def stop_sequences(self) -> tuple[str, ...] | None:
        if self.stop is None:
            return None
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


def _nothing(value: Any) -> bool:
    return value is None or value is False or value == 0 or value in ("none", [], {})


# OpenAI chat fields ragmend does not serve: (the values that ask for nothing, why it is refused).
UNSERVED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "top_p": (lambda v: v is None or v == 1, "nucleus sampling is not served (only 1); use temperature"),
    "tools": (_nothing, "ragmend does not call tools"),
    "tool_choice": (_nothing, "ragmend does not call tools"),
    "parallel_tool_calls": (lambda v: v is None or isinstance(v, bool), "ragmend does not call tools"),
    "functions": (_nothing, "ragmend does not call functions"),
    "function_call": (_nothing, "ragmend does not call functions"),
    "logprobs": (_nothing, "token log-probabilities are not returned"),
    "top_logprobs": (_nothing, "token log-probabilities are not returned"),
    "logit_bias": (_nothing, "logit biases are not applied"),
    "presence_penalty": (_nothing, "penalties are not applied (only 0)"),
    "frequency_penalty": (_nothing, "penalties are not applied (only 0)"),
    "audio": (_nothing, "answers are text only"),
    "modalities": (lambda v: v is None or v == ["text"], "answers are text only"),
    "prediction": (_nothing, "predicted outputs are not served"),
    "web_search_options": (_nothing, "ragmend answers from its own index, not the web"),
}


def unserved(body: ChatCompletionRequest) -> tuple[str, str] | None:
    """The first field the request asks for that ragmend does not serve: (field, message)."""
    if body.response_format is not None and body.response_format.type != "text":
        return "response_format", (
            f"response_format {body.response_format.type} is not served: ragmend's answers are "
            "grounded prose that the diagnosis reads sentence by sentence; omit it or use {type: text}"
        )
    for name, value in (body.model_extra or {}).items():
        if name in UNSERVED and not UNSERVED[name][0](value):
            return name, f"{name} is not served: {UNSERVED[name][1]}; omit it"
    return None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


RAGMEND_EXTENSION = (
    "ragmend's extension, ignored by standard clients: the body /v1/answer returns for the same "
    "request (evidence, configuration, timings, the generator model, diagnosis, first_diagnosis, "
    "repair trace, seconds)."
)


class SourceRef(BaseModel):
    id: str = Field(description="The passage's id.")
    name: str = Field(description="Its document's title (the chip's text).")


class SourceMeta(BaseModel):
    source: str = Field(description="The passage's id: two passages of one document stay two sources.")
    name: str = Field(description="Its document's title.")
    doc_id: str = Field(description="Its document's id (as the passage's `doc_id` in `ragmend.evidence`).")
    collection: str | None = Field(
        None, description="The collection whose index held it: default, or a collection's name."
    )
    trust: float | None = Field(
        None,
        description="Its source's trust level in [0, 1] (a JSONL row's `trust` at ingest); null: not said.",
    )


class ChatSource(BaseModel):
    """A passage the reply cites, in Open WebUI's source form (its citation chips and source
    panel): `[n]` in the message is the n-th source."""

    source: SourceRef
    document: list[str] = Field(description="The passage's text.")
    metadata: list[SourceMeta]


class ChatStatus(BaseModel):
    """How the diagnosis judged the reply, in one line (Open WebUI's status above a message)."""

    description: str
    done: bool = True


class ChatEvent(BaseModel):
    """An event of a streamed reply, in the form Open WebUI reads from a backend's chunk."""

    type: Literal["source", "status"]
    data: ChatSource | ChatStatus


class ChatCompletion(BaseModel):
    id: str = Field(examples=["chatcmpl-6f1c0e3b9a2d4c7e8f5a1b2c3d4e5f60"])
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(description="Unix seconds.")
    model: str
    choices: list[Choice]
    usage: Usage
    sources: list[ChatSource] = Field(
        default_factory=list,
        description="The passages the message cites, in the order of its [n] markers (Open WebUI's "
        "source form; ignored by standard clients).",
    )
    ragmend: AnswerResponse = Field(description=RAGMEND_EXTENSION)


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    # The draft of a `draft` stream: the first answer before it is checked, where clients that
    # render a model's reasoning (Open WebUI, LibreChat, the DeepSeek convention) show it apart.
    reasoning_content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a streamed completion (documentation of the stream's format)."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = Field(
        default=None, description="Only in the last chunk, with stream_options.include_usage."
    )
    event: ChatEvent | None = Field(
        default=None,
        description="Near the end, one chunk for each source the message cites and one for the "
        "status line (Open WebUI's events; ignored by standard clients).",
    )
    ragmend: AnswerResponse | None = Field(
        default=None, description="Only in the last chunk. " + RAGMEND_EXTENSION
    )


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="Unix seconds: when this server started.")
    owned_by: str = "ragmend"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
