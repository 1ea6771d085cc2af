"""The FastAPI application: the shared objects on the app's state, the middleware, the error
handlers and the routers of each API (health_api, answer_api, openai_api, feedback_api, admin,
collections_api).

Models load in a background thread at start-up, so /healthz answers at once and /readyz turns
true only when the models are loaded and the index is open. Model calls run in worker threads,
never on the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from ragmend import __version__
from ragmend.engine import Engine
from ragmend.engine.collections import Collections
from ragmend.instrumentation import EventLog, Events
from ragmend.server.admin import router as admin_router
from ragmend.server.admission import Admission
from ragmend.server.answer_api import router as answer_router
from ragmend.server.auth import BearerAuth
from ragmend.server.body_limit import BodyLimit
from ragmend.server.collections_api import router as collections_router
from ragmend.server.diagnose_api import router as diagnose_router
from ragmend.server.events import ErrorAnswered
from ragmend.server.feedback_api import Feedback
from ragmend.server.feedback_api import router as feedback_router
from ragmend.server.handlers import install_handlers
from ragmend.server.health_api import router as health_router
from ragmend.server.lifecycle import shut_down
from ragmend.server.metrics import Metrics
from ragmend.server.openai_api import router as openai_router
from ragmend.server.reload import ConfigReloader, watching
from ragmend.server.schemas import ErrorResponse
from ragmend.server.served_models import ServedModels
from ragmend.server.serving import AnswerServing
from ragmend.settings import Settings

log = logging.getLogger("ragmend.server")


def create_app(
    settings: Settings,
    engine: Engine | None = None,
    load_on_start: bool = True,
    metrics: Metrics | None = None,
    config_path: Path | str | None = None,
    config_overrides: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The ASGI app. `load_on_start=False` leaves loading to the caller (engine.load()).

    `metrics` defaults to a Metrics of this engine with its own registry (server/metrics/).
    `config_path`: the file the settings came from (with `config_overrides`, the command line's):
    watched and reloaded on change and SIGHUP (server/reload.py). The settings in force are the
    engine's (`engine.settings`, replaced by a reload): auth reads its keys there at each request.
    The routes read what they share from the app's state.
    """
    owns_engine = engine is None  # closed at shutdown only when this app made it
    engine = engine or Engine(settings)
    # The corpora besides the engine's (engine/collections.py): `model` picks one per request.
    collections = Collections(engine)
    feedback = Feedback(collections)  # the answers users may vote on (POST /v1/feedback)
    metrics = metrics or Metrics.for_engine(engine)
    # What the engine, admission and the HTTP layer do is told as events: the metrics and the
    # debug log are their handlers (ragmend/instrumentation.py).
    events = Events((metrics, EventLog()))
    # Bounded concurrency and queue, and the request deadline, of the model-calling endpoints.
    admission = Admission.from_settings(settings.server, events=events)
    reloader = ConfigReloader(config_path, engine, events, config_overrides) if config_path else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if load_on_start and not engine.ready:
            threading.Thread(
                target=_load, args=(engine, collections), name="ragmend-load", daemon=True
            ).start()
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
    app.state.metrics = metrics
    app.state.events = events
    app.state.admission = admission
    app.state.reloader = reloader
    app.state.feedback = feedback
    app.state.config_file = Path(config_path) if config_path else None
    app.state.serving = AnswerServing(ServedModels(collections), events, feedback, admission)
    _add_middleware(app, settings, engine, events)
    install_handlers(app, events)
    app.include_router(health_router)  # /healthz, /readyz, /metrics
    app.include_router(answer_router)  # /v1/answer
    app.include_router(openai_router)  # /v1/chat/completions, /v1/models
    app.include_router(feedback_router)  # /v1/feedback
    app.include_router(diagnose_router)  # /v1/diagnose, /v1/diagnose/batch
    app.include_router(admin_router)  # /admin/policy, /admin/index, /admin/config
    app.include_router(collections_router)  # /admin/collections
    return app


def _load(engine: Engine, collections: Collections) -> None:
    """Load the models and open the index (in a thread of its own: /healthz answers meanwhile)."""
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


def _add_middleware(app: FastAPI, settings: Settings, engine: Engine, events: Events) -> None:
    # Added first, so innermost: a BaseHTTPMiddleware between it and the routes would wrap its 413
    # (raised while the body is read) in an ExceptionGroup, which FastAPI answers with a 400.
    def body_refused(status: int) -> None:
        events.emit(ErrorAnswered("payload_too_large" if status == 413 else "http", status))

    app.add_middleware(
        BodyLimit,
        max_bytes=settings.server.max_body_bytes,
        upload_bytes=settings.server.max_upload_bytes,
        timeout_s=settings.server.body_timeout_s,
        on_refusal=body_refused,
    )
    # Outermost: a request without the key is refused before any body is read (server/auth.py).
    app.add_middleware(
        BearerAuth,
        server_settings=lambda: engine.settings.server,
        on_refusal=lambda status: events.emit(ErrorAnswered("auth", status)),
    )
