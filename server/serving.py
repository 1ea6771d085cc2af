"""What every answer route does, written once: the serving object the native API (/v1/answer) and
the OpenAI-compatible one (/v1/chat/completions) share, kept on the app's state.

    token = serving.token(request)            # the request's deadline starts: the client's, capped
    engine = await serving.engine_for(request, model)  # a corpus the key may read (404 otherwise)
    reply = serving.reply_ids(request, engine, response_id)  # its id, and the client's message id
    outcome = await serving.answer(request, token, engine, (query, overrides, history), reply)
    reading = serving.reading(engine)         # how the answer is shown (the settings in force)

`answer` admits the request (bounded concurrency and queue; a 503 before any work when it cannot
finish in time, a 504 late), runs it in a worker thread, stops its work when the client
disconnects, and in that thread tells the app's events what it did and remembers it for a vote
(with who received it: only they may vote on it). A request that shaped its own pass is served
but not learned from (`learns_from`, the one place that decides it).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from anyio import to_thread
from fastapi import Request

from ragmend.cancel import Cancellation
from ragmend.engine import Engine
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import Reading
from ragmend.errors import InputError
from ragmend.instrumentation import Events
from ragmend.rag.types import Turn
from ragmend.server.admission import Admission
from ragmend.server.auth import Reads, caller_of
from ragmend.server.deadline import client_timeout_s, until_disconnected
from ragmend.server.feedback_api import Feedback
from ragmend.server.served_models import ServedModels

Asked = tuple[str, dict[str, Any] | None, tuple[Turn, ...]]  # query, overrides, history
MAX_MESSAGE_ID = 200


class ReplyIds(NamedTuple):
    """A reply's ids: ragmend's own (what POST /v1/feedback names) and the chat client's id of
    the message that shows it (server.message_id_header), when it sent one; and who receives it."""

    response_id: str
    message_id: str | None = None
    receiver: str | None = None  # server/auth.py Caller.identity: the only voter whose vote counts
    internals: bool = False  # the reply shows the policy's internals (Caller.owner, or the setting)


def learns_from(overrides: Mapping[str, Any] | None) -> bool:
    """Whether a request may teach the state every user shares (the router, the repair policy,
    their cost models, admission's service times): not when it shaped its own pass (any override
    of the pass's configuration: max_tokens, stop, temperature, seed, a prompt, instructions,
    retrieval), since its answer says nothing of what the server's own configuration does."""
    return not overrides


class AnswerServing:
    def __init__(self, models: ServedModels, events: Events, feedback: Feedback, admission: Admission):
        self.models = models
        self.events = events
        self.feedback = feedback
        self.admission = admission
        self.started = int(time.time())  # the served models' `created`

    def token(self, request: Request) -> Cancellation:
        """The request's cancellation and deadline (the client's X-Request-Timeout, capped)."""
        return self.admission.token(client_timeout_s(request))

    def reads(self, request: Request) -> Reads:
        """The collections the request's key may read (server/auth.py `reads_of`)."""
        return caller_of(request, self.models.collections.default.settings.server).reads

    async def engine_for(self, request: Request, model: str | None, field: str | None = "model") -> Engine:
        """The engine serving `model` to the request's key (the 404 of a missing model, naming
        `field`, for one it may not read), off the event loop."""
        engine: Engine = await to_thread.run_sync(self.models.engine_for, model, field, self.reads(request))
        return engine

    def respond(
        self,
        engine: Engine,
        query: str,
        overrides: dict[str, Any] | None,
        history: tuple[Turn, ...],
        reply: ReplyIds,
        on_text: Callable[[str], None] | None = None,
    ) -> Outcome:
        """The engine's answer, told to the events and remembered, in the worker thread: a vote
        may follow the reply at once."""
        learn = learns_from(overrides)
        outcome = engine.respond(query, overrides, history, on_text, events=self.events, learn=learn)
        self.feedback.remember(reply.response_id, outcome, reply.message_id, reply.receiver)
        return outcome

    def run(
        self,
        token: Cancellation,
        engine: Engine,
        asked: Asked,
        reply: ReplyIds,
        on_text: Callable[[str], None] | None = None,
    ) -> Awaitable[Outcome]:
        """The admitted run of `respond` (awaited by the caller; a live stream awaits it as a task)."""
        return self.admission.run(
            self.respond, engine, *asked, reply, on_text, token=token, kind=engine.namespace
        )

    async def answer(
        self, request: Request, token: Cancellation, engine: Engine, asked: Asked, reply: ReplyIds
    ) -> Outcome:
        """The whole answer: admitted, run, and stopped if the client disconnects."""
        return await until_disconnected(request, self.run(token, engine, asked, reply))

    @staticmethod
    def reply_ids(request: Request, engine: Engine, response_id: str) -> ReplyIds:
        """The reply's own id, the client's id of the message that shows it, read from
        server.message_id_header (too long a value is refused: it names the header), who
        receives it and whether it may read the policy's internals."""
        server = engine.settings.server
        header = server.message_id_header
        value = request.headers.get(header, "").strip() if header else ""
        if len(value) > MAX_MESSAGE_ID:
            raise InputError(f"header {header}: a message id of at most {MAX_MESSAGE_ID} characters")
        who = caller_of(request, server)
        return ReplyIds(response_id, value or None, who.identity, who.owner or server.show_policy_internals)

    @staticmethod
    def reading(engine: Engine) -> Reading:
        """How an answer is shown, from the settings in force (a hot reload replaces them)."""
        return Reading.of(engine.settings.server)


def serving_of(request: Request) -> AnswerServing:
    """FastAPI dependency: the app's AnswerServing (set by create_app)."""
    serving: AnswerServing = request.app.state.serving
    return serving
