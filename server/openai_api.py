"""The OpenAI-compatible API: POST /v1/chat/completions, GET /v1/models[/{model}].

Standard OpenAI clients talk to ragmend unchanged (base_url=http://host:port/v1). The last user
message is the question; the user and assistant messages before it are the conversation it may
follow up on (the engine makes a follow-up standalone before retrieval), and system or developer
messages shape the answer's style and language. The reply is the answer the engine returns after
its diagnosis and, for a failed answer, its repair. The diagnosis and the repair trace travel in
an extension field `ragmend` that clients ignore.

Streaming (server/streaming.py): the first answer's text is sent as the generator makes it, as
a draft (reasoning_content) followed by the checked answer, or live as content with a marked
correction when a repair replaced it; verify_first holds the stream until the answer is checked.
The diagnosis is in the last chunk. An error before the first token is an ordinary JSON error with
its status; after it, an error event.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, NamedTuple, cast, get_args

from anyio import to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from ragmend.cancel import Cancellation
from ragmend.engine import Engine
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import Reading
from ragmend.errors import ClientDisconnected, InputError, RagmendError
from ragmend.rag.types import Turn
from ragmend.server.chat_sources import CitedSources, status
from ragmend.server.deadline import until_disconnected
from ragmend.server.errors import UnsupportedParameter
from ragmend.server.mapping import answer_response, conversation
from ragmend.server.openai_schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatEvent,
    Choice,
    ChunkChoice,
    Delta,
    FinishReason,
    ModelCard,
    ModelList,
    Usage,
    unserved,
)
from ragmend.server.schemas import ErrorResponse
from ragmend.server.serving import AnswerServing, Asked, ReplyIds, serving_of
from ragmend.server.streaming import TextPipe, tail

FINISH_REASONS: frozenset[str] = frozenset(get_args(FinishReason))
# Leads a draft stream's reasoning_content: what follows is the answer before its check.
DRAFT_HEADING = "Draft, being checked against the sources:\n\n"
# Word-sized pieces, whitespace kept: the deltas concatenate back to the exact answer.
PIECE = re.compile(r"\S+\s*|\s+")

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Invalid request; the message names the field."},
    404: {"model": ErrorResponse, "description": "Unknown model (code model_not_found)."},
    408: {"model": ErrorResponse, "description": "The body did not arrive within server.body_timeout_s."},
    413: {"model": ErrorResponse, "description": "Request body over server.max_body_bytes."},
    502: {"model": ErrorResponse, "description": "The generator call failed."},
    503: {"model": ErrorResponse, "description": "Still loading, or busy (Retry-After)."},
    504: {"model": ErrorResponse, "description": "Past server.request_timeout_s."},
}


def question(body: ChatCompletionRequest) -> tuple[str, int]:
    """The last user message's text and its index: the question of the turn."""
    for i in range(len(body.messages) - 1, -1, -1):
        message = body.messages[i]
        if message.role == "user":
            text = message.text()
            if not text.strip():
                raise InputError(f"messages.{i}.content: the last user message has no text")
            return text, i
    raise InputError("messages: no message with role 'user'; the last user message is the question")


def turn(body: ChatCompletionRequest) -> tuple[str, tuple[Turn, ...], str | None]:
    """The question, the conversation before it (a follow-up is made standalone with it), and
    the style instructions of every system or developer message."""
    query, last = question(body)
    earlier: list[tuple[str, str]] = [(m.role, m.text()) for m in body.messages[:last]]
    later: list[tuple[str, str]] = [
        (m.role, m.text()) for m in body.messages[last:] if m.role in ("system", "developer")
    ]
    history, notes = conversation(earlier + later)
    return query, history, notes


def sampling(body: ChatCompletionRequest, instructions: str | None = None) -> dict[str, Any] | None:
    """Per-request overrides of the pipeline's configuration (RAGConfig) from the request."""
    overrides: dict[str, Any] = {}
    if instructions:
        overrides["instructions"] = instructions
    if body.temperature is not None:
        overrides["temperature"] = body.temperature
    if body.token_limit is not None:
        overrides["max_tokens"] = body.token_limit
    if body.stop_sequences is not None:
        overrides["stop"] = body.stop_sequences
    if body.seed is not None:
        overrides["seed"] = body.seed
    return overrides or None


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion(outcome: Outcome, model: str, reading: Reading, reply: ReplyIds) -> ChatCompletion:
    answer = outcome.answer
    reason = cast(FinishReason, answer.finish_reason if answer.finish_reason in FINISH_REASONS else "stop")
    tokens = outcome.total_usage()  # every generator call of the request, not only the answer's
    response_id = reply.response_id
    extension = answer_response(outcome, reading, response_id=response_id, internals=reply.internals)
    cited = CitedSources.of(extension)
    return ChatCompletion(
        id=response_id,
        created=int(time.time()),
        model=model,
        # What the user reads: citations, and the answer policy's note where it is unsupported.
        choices=[
            Choice(message=AssistantMessage(content=cited.renumber(extension.answer)), finish_reason=reason)
        ],
        usage=Usage(
            prompt_tokens=tokens.prompt_tokens,
            completion_tokens=tokens.completion_tokens,
            total_tokens=tokens.prompt_tokens + tokens.completion_tokens,
        ),
        sources=cited.sources(),
        ragmend=extension,
    )


class Head(NamedTuple):
    """What every chunk of one stream repeats."""

    id: str
    created: int
    model: str


def chunk(
    head: ChatCompletion | Head, delta: Delta, finish: FinishReason | None = None
) -> ChatCompletionChunk:
    """One chunk of a stream (the id, created time and model of `head`)."""
    choice = ChunkChoice(delta=delta, finish_reason=finish)
    return ChatCompletionChunk(id=head.id, created=head.created, model=head.model, choices=[choice])


def chunks(full: ChatCompletion, include_usage: bool) -> list[ChatCompletionChunk]:
    """The chunks of a finished completion: role, content pieces, finish reason, [usage]."""
    return [chunk(full, Delta(role="assistant", content="")), *answer_chunks(full, include_usage)]


def answer_chunks(full: ChatCompletion, include_usage: bool) -> list[ChatCompletionChunk]:
    """A finished completion's content in pieces, then its closing chunks."""
    pieces = [chunk(full, Delta(content=piece)) for piece in PIECE.findall(full.choices[0].message.content)]
    return [*pieces, *closing(full, include_usage)]


def closing(full: ChatCompletion, include_usage: bool, tail: str = "") -> list[ChatCompletionChunk]:
    """The end of a stream: what follows the text (`tail`), the sources and the status line as
    events, the finish reason, [usage], and the `ragmend` extension on the last chunk."""
    out = [chunk(full, Delta(content=tail))] if tail else []
    out.extend(chunk(full, Delta()).model_copy(update={"event": event}) for event in chat_events(full))
    out.append(chunk(full, Delta(), full.choices[0].finish_reason))
    if include_usage:
        out.append(
            ChatCompletionChunk(
                id=full.id, created=full.created, model=full.model, choices=[], usage=full.usage
            )
        )
    # The extension goes on the last chunk, where a client has the whole answer it describes.
    out[-1] = out[-1].model_copy(update={"ragmend": full.ragmend})
    return out


def chat_events(full: ChatCompletion) -> list[ChatEvent]:
    """The events of a streamed reply: each source it cites, then how it was judged."""
    events = [ChatEvent(type="source", data=source) for source in full.sources]
    if (line := status(full.ragmend)) is not None:
        events.append(ChatEvent(type="status", data=line))
    return events


async def held(result: ChatCompletion, include_usage: bool) -> AsyncIterator[str]:
    """A finished completion as a stream (verify_first)."""
    for c in chunks(result, include_usage):
        yield sse(c, include_usage)
    yield "data: [DONE]\n\n"


def event_stream(events: AsyncIterator[str]) -> StreamingResponse:
    # no-cache / no buffering: proxies must pass the events on as they come.
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


def error_event(e: RagmendError) -> str:
    """An error once the stream has begun (its status line is sent): an event in OpenAI's error
    shape, which the official clients raise as an APIError; the stream ends without [DONE]."""
    body = {"error": {"message": str(e), "type": e.api_type, "code": e.http_status}}
    return f"data: {json.dumps(body)}\n\n"


def sse(chunk: ChatCompletionChunk, include_usage: bool) -> str:
    data = chunk.model_dump(mode="json")
    for choice in data["choices"]:
        # OpenAI's deltas carry only what changes; finish_reason is an explicit null until the end.
        choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
    if not include_usage:
        data.pop("usage")  # with include_usage every chunk has "usage" (null but the last), as OpenAI's
    for extension in ("event", "ragmend"):  # only on the chunks that carry them
        if data[extension] is None:
            data.pop(extension)
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


# The routes; the served names are read at each request: a configuration reload replaces the
# settings, and collections come and go (server/served_models.py).
router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])
Serving = Annotated[AnswerServing, Depends(serving_of)]


@router.get(
    "/models",
    response_model=ModelList,
    summary="The served models this key may read: the default corpus, `<name>/<collection>` (OpenAI format)",
)
async def list_models(request: Request, serving: Serving) -> ModelList:
    names = await to_thread.run_sync(serving.models.names, serving.reads(request))
    return ModelList(data=[ModelCard(id=name, created=serving.started) for name in names])


@router.get(
    "/models/{model:path}",
    response_model=ModelCard,
    summary="One model (OpenAI format)",
    responses={404: ERRORS[404]},
)
async def get_model(model: str, request: Request, serving: Serving) -> ModelCard:
    await serving.engine_for(request, model, None)  # 404 for a name it does not serve to this key
    return ModelCard(id=model, created=serving.started)


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    summary="Answer the last user message (OpenAI chat completion; stream: server-sent events)",
    responses={
        200: {
            "description": "A chat.completion object; with stream: true, text/event-stream of "
            "`data: <chat.completion.chunk JSON>` events (server/openai_schemas.py "
            "ChatCompletionChunk), ending with `data: [DONE]`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **ERRORS,
    },
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, serving: Serving
) -> ChatCompletion | StreamingResponse:
    token = serving.token(request)  # the client's deadline, capped
    engine = await serving.engine_for(request, body.model)
    if (refused := unserved(body)) is not None:
        raise UnsupportedParameter(refused[1], refused[0])
    query, history, instructions = turn(body)
    asked = (query, sampling(body, instructions), history)
    s = engine.settings.server
    options = body.stream_options
    mode = s.stream_mode if options is None else options.chosen(s.stream_mode)
    if body.stream and mode != "verify_first":
        return await live(
            serving, token, request=request, engine=engine, asked=asked, body=body, draft=mode == "draft"
        )
    response_id = completion_id()
    reply = serving.reply_ids(request, engine, response_id)
    outcome = await serving.answer(request, token, engine=engine, asked=asked, reply=reply)
    result = completion(outcome, body.model or serving.models.served, serving.reading(engine), reply)
    if not body.stream:
        return result
    return event_stream(held(result, bool(options and options.include_usage)))


async def live(
    serving: AnswerServing,
    token: Cancellation,
    request: Request,
    engine: Engine,
    asked: Asked,
    body: ChatCompletionRequest,
    draft: bool,
) -> StreamingResponse:
    """The first answer streamed as it is generated (server/streaming.py): as content, or with
    `draft` as reasoning_content followed by the checked answer as content. An error before its
    first piece is an ordinary JSON error with its status; one after it, an error event. A client
    that disconnects, before or during the stream, stops the request's work."""
    pipe = TextPipe()
    response_id = completion_id()
    reply = serving.reply_ids(request, engine, response_id)
    task = asyncio.ensure_future(serving.run(token, engine, asked=asked, reply=reply, on_text=pipe.put))
    try:
        first = await until_disconnected(request, pipe.first(task))
    except ClientDisconnected:
        task.cancel()
        raise
    if first is None:
        await task  # raises the request's error, answered as JSON with its status
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    opening = Head(response_id, int(time.time()), body.model or serving.models.served)

    async def events() -> AsyncIterator[str]:
        def text(piece: str) -> Delta:
            return Delta(reasoning_content=piece) if draft else Delta(content=piece)

        try:
            yield sse(chunk(opening, Delta(role="assistant", content="")), include_usage)
            if draft:
                yield sse(chunk(opening, text(DRAFT_HEADING)), include_usage)
            if first:
                yield sse(chunk(opening, text(first)), include_usage)
            async for piece in pipe.rest(task):
                yield sse(chunk(opening, text(piece)), include_usage)
        finally:
            # The response is cancelled when the client disconnects: stop its work too.
            if not task.done():
                task.cancel()
        try:
            outcome = task.result()
        except RagmendError as e:
            yield error_event(e)
            return
        done = completion(outcome, opening.model, serving.reading(engine), reply)
        done = done.model_copy(update={"created": opening.created})
        if draft:  # the checked answer, as the unstreamed reply's content
            finished = answer_chunks(done, include_usage)
        else:
            said = CitedSources.of(done.ragmend).renumber(tail(outcome, done.ragmend))
            finished = closing(done, include_usage, said)
        for c in finished:
            yield sse(c, include_usage)
        yield "data: [DONE]\n\n"

    return event_stream(events())
