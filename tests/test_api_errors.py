"""Every error path of the model-calling routes (/v1/answer, /v1/chat/completions) answers in the
one error shape (server/errors.py) with one of OpenAI's error types, and counts under its kind.

Real HTTP (a live uvicorn server) over an engine that loads nothing: `Engine.respond` is replaced
by a function that raises what each case needs, so no model runs and the file takes seconds. The
paths: auth (401), the body limits (413, declared and chunked), an unparsable or invalid body
(400), a wrong method (405), an unknown model (404), the engine's own errors (input, not ready,
model unavailable, no index, generator failure and timeout, configuration), admission (503 full,
504 past the deadline) and a bug (500). A non-numeric Content-Length (body_limit.BodyLimit's 400) cannot
be sent over HTTP/1.1 here (the client and uvicorn refuse it first).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.errors import (
    ApiErrorType,
    ConfigError,
    GeneratorError,
    GeneratorTimeout,
    IndexMissing,
    InputError,
    ModelUnavailable,
    NotReady,
)
from ragmend.server.app import create_app
from ragmend.server.schemas import ErrorResponse
from ragmend.settings import load_settings
from tests.conftest import LiveServer
from tests.test_metrics import value

KEY = "api-errors-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
JSON = {"content-type": "application/json"}
OPENAI_TYPES = set(get_args(ApiErrorType))
ANSWER, CHAT = "/v1/answer", "/v1/chat/completions"
ROUTES = (ANSWER, CHAT)
TIMEOUT_S = 1.0  # server.request_timeout_s


def valid(route: str) -> dict[str, Any]:
    if route == ANSWER:
        return {"query": "Who founded Marvel Comics?"}
    return {"messages": [{"role": "user", "content": "Who founded Marvel Comics?"}]}


def invalid(route: str) -> dict[str, Any]:
    return {"query": 42} if route == ANSWER else {"messages": [{"role": "bogus", "content": "x"}]}


class ArmsGone(InputError):
    """An InputError subclass outside ragmend/errors.py: the body names the published class."""


class Server:
    def __init__(self, live: LiveServer, app: Any):
        self.live = live
        self.admission = app.state.admission
        self.respond: Callable[[], None] = lambda: None

    def post(self, route: str, **kw: Any) -> httpx.Response:
        kw.setdefault("headers", AUTH)
        return httpx.post(self.live.url + route, timeout=30, **kw)

    def errors(self, kind: str) -> float:
        text = httpx.get(self.live.url + "/metrics", headers=AUTH).text  # an API key reading every corpus
        return value(text, "ragmend_errors_total", kind=kind)

    def idle(self) -> None:
        deadline = time.monotonic() + 30
        while self.admission.running:
            assert time.monotonic() < deadline
            time.sleep(0.02)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir: Path = tmp_path_factory.mktemp("api-errors")
    settings = load_settings(
        data_dir=data_dir,
        server={"api_keys": [KEY], "max_concurrency": 1, "max_queue": 0, "request_timeout_s": TIMEOUT_S},
    )
    engine = Engine(settings)  # never loaded: respond is replaced below
    app = create_app(settings, engine=engine, load_on_start=False)
    with LiveServer(app) as live:
        srv = Server(live, app)

        def respond(
            query: str,
            overrides: Any = None,
            history: Any = (),
            on_text: Any = None,
            events: Any = None,
            learn: Any = True,
        ) -> Any:
            srv.respond()
            raise AssertionError("every case raises")

        engine.respond = respond  # type: ignore[method-assign]
        yield srv


def raising(exc: BaseException) -> Callable[[], None]:
    def fn() -> None:
        raise exc

    return fn


# (name, request, expected status, type, error_class, metric kind)
Case = tuple[str, Callable[[Server, str], httpx.Response], int, str, str | None, str]


BIG = b'{"query": "' + b"x" * 1_100_000 + b'"}'


def chunks(data: bytes) -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
    for i in range(0, len(data), 64 * 1024):
        yield data[i : i + 64 * 1024]


def engine_error(exc: BaseException) -> Callable[[Server, str], httpx.Response]:
    def call(s: Server, route: str) -> httpx.Response:
        s.respond = raising(exc)
        return s.post(route, json=valid(route))

    return call


def overloaded(s: Server, route: str) -> httpx.Response:
    release = threading.Event()

    def wait() -> None:
        release.wait(20)

    s.respond = wait
    first = threading.Thread(target=s.post, args=(route,), kwargs={"json": valid(route)})
    first.start()
    try:
        deadline = time.monotonic() + 10
        while not s.admission.running:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return s.post(route, json=valid(route))  # max_concurrency 1, max_queue 0: refused
    finally:
        release.set()
        first.join(30)


def past_deadline(s: Server, route: str) -> httpx.Response:
    s.respond = lambda: time.sleep(TIMEOUT_S + 0.5)
    r = s.post(route, json=valid(route))
    s.idle()  # the work finishes in the background, holding the only slot
    return r


CASES: list[Case] = [
    ("no key", lambda s, r: s.post(r, json=valid(r), headers={}), 401, "authentication_error", None, "auth"),
    (
        "unknown key",
        lambda s, r: s.post(r, json=valid(r), headers={"Authorization": "Bearer nope"}),
        401,
        "authentication_error",
        None,
        "auth",
    ),
    (
        "wrong method",
        lambda s, r: httpx.get(s.live.url + r, headers=AUTH),
        405,
        "invalid_request_error",
        None,
        "http",
    ),
    (
        "malformed JSON",
        lambda s, r: s.post(r, content=b'{"query": "x', headers=AUTH | JSON),
        400,
        "invalid_request_error",
        None,
        "validation",
    ),
    (
        "not UTF-8",
        lambda s, r: s.post(r, content=b'{"query": "caf\xe9"}', headers=AUTH | JSON),
        400,
        "invalid_request_error",
        None,
        "http",
    ),
    (
        "invalid body",
        lambda s, r: s.post(r, json=invalid(r)),
        400,
        "invalid_request_error",
        None,
        "validation",
    ),
    (
        "declared body over the limit",
        lambda s, r: s.post(r, content=BIG, headers=AUTH | JSON),
        413,
        "invalid_request_error",
        None,
        "payload_too_large",
    ),
    (
        "chunked body over the limit",
        lambda s, r: s.post(r, content=chunks(BIG), headers=AUTH | JSON),
        413,
        "invalid_request_error",
        None,
        "http",
    ),
    (
        "input refused",
        engine_error(InputError("query is empty")),
        400,
        "invalid_request_error",
        "InputError",
        "input",
    ),
    (
        "input refused (a subclass)",
        engine_error(ArmsGone("every arm is disabled")),
        400,
        "invalid_request_error",
        "InputError",
        "input",
    ),
    ("not ready", engine_error(NotReady("still loading")), 503, "server_error", "NotReady", "not_ready"),
    (
        "model unavailable",
        engine_error(ModelUnavailable("NLI model missing")),
        503,
        "server_error",
        "ModelUnavailable",
        "model_unavailable",
    ),
    (
        "no index",
        engine_error(IndexMissing("no index")),
        503,
        "server_error",
        "IndexMissing",
        "index_missing",
    ),
    (
        "generator failed",
        engine_error(GeneratorError("boom")),
        502,
        "server_error",
        "GeneratorError",
        "generator",
    ),
    (
        "generator timed out",
        engine_error(GeneratorTimeout("too slow")),
        504,
        "server_error",
        "GeneratorTimeout",
        "generator_timeout",
    ),
    ("configuration", engine_error(ConfigError("rag.k: bad")), 500, "server_error", "ConfigError", "config"),
    ("a bug", engine_error(RuntimeError("secret internals")), 500, "server_error", None, "internal"),
    ("server full", overloaded, 503, "server_error", "Overloaded", "overloaded"),
    ("past the request deadline", past_deadline, 504, "server_error", "RequestTimeout", "request_timeout"),
]
CHAT_CASES: list[Case] = [
    (
        "unknown model",
        lambda s, r: s.post(r, json={**valid(r), "model": "gpt-4o"}),
        404,
        "invalid_request_error",
        "ModelNotFound",
        "input",
    ),
    (
        "no user message",
        lambda s, r: s.post(r, json={"messages": [{"role": "system", "content": "x"}]}),
        400,
        "invalid_request_error",
        "InputError",
        "input",
    ),
]
PARAMS = [pytest.param(route, case, id=f"{route} {case[0]}") for route in ROUTES for case in CASES] + [
    pytest.param(CHAT, case, id=f"{CHAT} {case[0]}") for case in CHAT_CASES
]


@pytest.mark.parametrize(("route", "case"), PARAMS)
def test_every_error_path_answers_an_openai_type(server: Server, route: str, case: Case) -> None:
    name, call, status, api_type, error_class, kind = case
    before = server.errors(kind)
    r = call(server, route)
    assert r.status_code == status, r.text
    body = r.json()
    ErrorResponse.model_validate(body)  # the published schema
    error = body["error"]
    assert error["type"] == api_type and error["type"] in OPENAI_TYPES, error
    assert error.get("error_class") == error_class, error
    assert error["message"] and "secret" not in error["message"]
    if name == "unknown model":
        assert error["code"] == "model_not_found" and error["param"] == "model"
    else:
        assert error["code"] == status and "param" not in error
    assert set(error) <= {"message", "type", "param", "code", "error_class"}
    if status == 401:
        assert r.headers["www-authenticate"] == 'Bearer realm="ragmend"'
    if error_class in ("NotReady", "Overloaded"):
        assert r.headers["retry-after"] == "5"
    assert server.errors(kind) == before + 1, kind
