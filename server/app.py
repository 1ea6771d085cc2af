"""The FastAPI application: health, readiness and the native answer endpoint.

Models load in a background thread at start-up, so /healthz answers at once and /readyz turns
true only when the models are loaded and the index is open. Model calls run in worker threads,
never on the event loop.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response

from ragmend import __version__
from ragmend.engine import Engine
from ragmend.engine.collections import Collections
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import Reading
from ragmend.errors import RagmendError, describe_validation
from ragmend.rag.types import Turn
from ragmend.server.admin import admin_router
from ragmend.server.admission import Admission
from ragmend.server.auth import BearerAuth
from ragmend.server.body_limit import StreamedBodyLimit
from ragmend.server.collections_api import collections_router
from ragmend.server.deadline import client_timeout_s, until_disconnected
from ragmend.server.errors import error_response, exception_response
from ragmend.server.feedback_api import Feedback, feedback_router
from ragmend.server.lifecycle import shut_down
from ragmend.server.mapping import answer_response, conversation, ready_status
from ragmend.server.metrics import Metrics
from ragmend.server.openai_api import openai_router
from ragmend.server.reload import ConfigReloader, watching
from ragmend.server.schemas import AnswerRequest, AnswerResponse, ErrorResponse, ReadyStatus
from ragmend.server.served_models import ServedModels
from ragmend.settings import Settings

log = logging.getLogger("ragmend.server")


class BodyLimit(BaseHTTPMiddleware):
    """413 before reading a body whose declared length is over the limit."""

    def __init__(self, app: Any, max_bytes: int, on_refusal: Callable[[int], None] | None = None):
        super().__init__(app)
        self.max_bytes = max_bytes
        self.on_refusal = on_refusal or (lambda status: None)

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                self.on_refusal(400)
                return error_response(400, "invalid Content-Length header")
            if int(length) > self.max_bytes:
                self.on_refusal(413)
                return error_response(
                    413, f"request body is {length} bytes, over the limit of {self.max_bytes}"
                )
        return await call_next(request)


def create_app(
    settings: Settings,
    engine: Engine | None = None,
    load_on_start: bool = True,
    metrics: Metrics | None = None,
    config_path: Path | str | None = None,
    config_overrides: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The ASGI app. `load_on_start=False` leaves loading to the caller (engine.load()).

    `metrics` defaults to a Metrics of this engine with its own registry (server/metrics.py).
    `config_path`: the file the settings came from (with `config_overrides`, the command line's):
    watched and reloaded on change and SIGHUP (server/reload.py). The settings in force are the
    engine's (`engine.settings`, replaced by a reload): auth reads its keys there at each request.
    """
    owns_engine = engine is None  # closed at shutdown only when this app made it
    engine = engine or Engine(settings)
    # The corpora besides the engine's (engine/collections.py): `model` picks one per request.
    collections = Collections(engine)
    feedback = Feedback(collections)  # the answers users may vote on (POST /v1/feedback)
    metrics = metrics or Metrics.for_engine(engine)
    # Bounded concurrency and queue, and the request deadline, of the model-calling endpoints.
    admission = Admission.from_settings(settings.server, metrics=metrics.admission())
    reloader = ConfigReloader(config_path, engine, metrics, config_overrides) if config_path else None

    def load() -> None:
        try:
            engine.load()
            log.info("ready: %s", engine.status())
        except Exception:
            log.exception("loading failed; /readyz stays false")
            return
        try:
            collections.load_declared()
        except Exception:  # the default corpus serves; the failed collection says why when asked
            log.exception("opening a declared collection failed")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if load_on_start and not engine.ready:
            threading.Thread(target=load, name="ragmend-load", daemon=True).start()
        with watching(reloader):
            yield
        await shut_down(admission, engine if owns_engine else None, settings.server.shutdown_timeout_s)
        feedback.close()
        collections.close()

    app = FastAPI(
        title="ragmend",
        version=__version__,
        description="An online, self-repairing RAG server.",
        lifespan=lifespan,
        responses={400: {"model": ErrorResponse}, 503: {"model": ErrorResponse}},
    )
    app.state.engine = engine
    app.state.collections = collections
    models = ServedModels(collections)
    app.state.metrics = metrics
    app.state.admission = admission

    # Added first, so innermost: a BaseHTTPMiddleware between it and the routes would wrap its 413
    # (raised while the body is read) in an ExceptionGroup, which FastAPI answers with a 400.
    def body_refused(status: int) -> None:
        metrics.observe_error("payload_too_large" if status == 413 else "http", status=status)

    app.add_middleware(  # chunked bodies
        StreamedBodyLimit, max_bytes=settings.server.max_body_bytes, on_refusal=body_refused
    )
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_body_bytes, on_refusal=body_refused)
    # Outermost: a request without the key is refused before any body is read (server/auth.py).
    app.add_middleware(
        BearerAuth,
        server_settings=lambda: engine.settings.server,
        on_refusal=lambda status: metrics.observe_error("auth", status=status),
    )
    app.state.reloader = reloader

    @app.exception_handler(Exception)
    async def unhandled_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not bad input: logged with its traceback, counted, and answered in the API's shape
        # (the message names no internals).
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        metrics.observe_error("internal", status=500)
        return error_response(500, "internal server error (logged)")

    @app.exception_handler(RagmendError)
    async def ragmend_error(request: Request, exc: RagmendError) -> JSONResponse:
        metrics.observe_exception(exc, exc.http_status)
        return exception_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own errors (404, 405, an unparsable body) in the same shape as ours.
        metrics.observe_error("http", status=exc.status_code)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if message == "There was an error parsing the body":
            message = "the request body is not valid UTF-8 JSON"
        return error_response(exc.status_code, message, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.observe_error("validation", status=400)
        message = describe_validation(exc, drop={"body"}, empty="body")
        return error_response(400, message or "invalid request", "invalid_request_error")

    @app.get("/healthz", summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=ReadyStatus,
        summary="Models loaded and index open",
        responses={503: {"model": ReadyStatus, "description": "Not ready yet (loading, or loading failed)."}},
    )
    async def readyz() -> JSONResponse:
        status = ready_status(engine.status())
        return JSONResponse(status.model_dump(mode="json"), status_code=200 if status.ready else 503)

    @app.get("/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse)
    async def metrics_endpoint() -> Response:
        # Off the loop: the scrape reads the policy under its lock, which an update holds for an fsync.
        body = await to_thread.run_sync(metrics.exposition)
        return Response(body, media_type=metrics.content_type)

    def respond(
        target: Engine,
        query: str,
        overrides: dict[str, Any] | None,
        history: tuple[Turn, ...],
        response_id: str,
    ) -> Outcome:
        outcome = target.respond(query, overrides, history)
        metrics.observe(outcome)  # in the worker thread too: it may read the policy's budgets
        feedback.remember(response_id, outcome)
        return outcome

    @app.post("/v1/answer", response_model=AnswerResponse, summary="Answer a question from the corpus")
    async def answer(body: AnswerRequest, request: Request) -> AnswerResponse:
        token = admission.token(client_timeout_s(request))
        history, instructions = conversation([(m.role, m.content) for m in body.history or ()])
        overrides = body.config
        if instructions:
            overrides = {**(overrides or {}), "instructions": instructions}
        target = await to_thread.run_sync(models.engine_for, body.model, "model")
        # 503 before any work when it cannot be answered in time, 504 late; a client that
        # disconnects stops its work
        response_id = f"answer-{uuid.uuid4().hex}"
        asked = (target, body.query, overrides, history, response_id)
        run = admission.run(respond, *asked, token=token, kind=target.namespace)
        outcome = await until_disconnected(request, run)
        s = engine.settings.server  # the settings in force (a hot reload replaces them)
        return answer_response(outcome, Reading.of(s), response_id=response_id)

    app.include_router(openai_router(models, metrics, feedback))  # /v1/chat/completions, /v1/models
    app.include_router(feedback_router(feedback))  # /v1/feedback
    app.include_router(admin_router(engine, metrics, Path(config_path) if config_path else None))
    app.include_router(collections_router(collections, metrics))  # /admin/collections

    return app
