"""Bodies of the OpenAI-compatible API (/v1/chat/completions, /v1/models).

The request models ignore fields they do not name: standard clients send top_p, user, seed,
presence_penalty and others with every request, and refusing them would break those clients.
What ragmend honours is named here; docs/api.md lists what is accepted and ignored. The
request models are strict (no "0.5" for a number, no "true" for a boolean), so a wrong type
is a 400 naming the field instead of a silent coercion.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ragmend.server.schemas import AnswerResponse

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

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    include_usage: bool = Field(False, description="Send a last chunk with the usage.")


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    messages: list[ChatMessage] = Field(
        min_length=1,
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
    n: int | None = Field(default=None, ge=1, le=1, description="Only 1 choice per request.")
    stream: bool | None = Field(default=False, description="Server-sent events (chat.completion.chunk).")
    stream_options: StreamOptions | None = None

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


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


class ChatCompletion(BaseModel):
    id: str = Field(examples=["chatcmpl-6f1c0e3b9a2d4c7e8f5a1b2c3d4e5f60"])
    object: Literal["chat.completion"] = "chat.completion"
    created: int = Field(description="Unix seconds.")
    model: str
    choices: list[Choice]
    usage: Usage
    ragmend: AnswerResponse = Field(description=RAGMEND_EXTENSION)


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


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
