"""The HTTP server over real HTTP on a loopback port, with the real engine behind it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer, sample_questions


def test_health_and_readiness(live_server: LiveServer) -> None:
    assert httpx.get(live_server.url + "/healthz").json() == {"status": "ok"}
    r = httpx.get(live_server.url + "/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["index"].startswith("gen-")


def test_answer_over_http(live_server: LiveServer) -> None:
    q = sample_questions()[3]
    r = httpx.post(
        live_server.url + "/v1/answer",
        json={"query": q["question"], "config": {"mode": "hybrid"}},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    # The request's config fixes the first pass (the router does not choose); a repair may patch it.
    assert body["answer"].strip() and body["route"]["chosen_by"] == "request"
    repaired = body["repair"] is not None and body["repair"].get("kept") == "repaired"
    assert body["config"]["mode"] == "hybrid" or repaired
    assert any(p["title"] in q["supporting_titles"] for p in body["evidence"])
    assert set(body["timings"]) >= {"retrieve_s", "rerank_s", "generate_s"}
    assert body["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"query": ""}, 400, "query is empty"),
        ({"query": "   "}, 400, "query is empty"),
        ({"query": "x" * 5000}, 400, "over the maximum"),
        ({"query": "ok", "config": {"k": 0}}, 400, "config.k"),
        ({"query": "ok", "config": {"bogus": 1}}, 400, "config.bogus"),
        # One of ragmend's own prompts (it needs a conversation) is no answer prompt: a 400, not a 500.
        ({"query": "ok", "config": {"prompt": "condense"}}, 400, "unknown answer prompt 'condense'"),
        ({"query": "ok", "history": [{"role": "user", "content": "hi"}] * 101}, 400, "history"),
        ({"query": 42}, 400, "query"),
        ({}, 400, "query"),
        ({"query": "ok", "extra": True}, 400, "extra"),
    ],
)
def test_bad_requests_get_4xx_with_a_message(
    live_server: LiveServer, payload: dict, status: int, message: str
) -> None:
    r = httpx.post(live_server.url + "/v1/answer", json=payload)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert message in err["message"] and err["code"] == status


def test_malformed_and_oversize_bodies(live_server: LiveServer) -> None:
    url = live_server.url + "/v1/answer"
    headers = {"content-type": "application/json"}
    r = httpx.post(url, content=b'{"query": "unterminated', headers=headers)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(url, content=b"nonsense", headers=headers)
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and message.startswith("the request body is not valid JSON (")
    assert "at character 0" in message
    r = httpx.post(url, content=b'{"query": "caf\xe9"}', headers=headers)
    assert r.status_code == 400 and r.json()["error"]["message"]
    r = httpx.post(url, content=b"{" + b" " * 2_000_000 + b"}", headers=headers)
    assert r.status_code == 413 and "over the limit" in r.json()["error"]["message"]


def test_not_ready_is_503_with_retry_after(engine: Engine) -> None:
    never_loaded = Engine(engine.settings, models=engine.models)
    with LiveServer(create_app(engine.settings, engine=never_loaded, load_on_start=False)) as server:
        r = httpx.get(server.url + "/readyz")
        assert r.status_code == 503 and r.json()["ready"] is False
        r = httpx.post(server.url + "/v1/answer", json={"query": "anything"})
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert "loading" in r.json()["error"]["message"]


def test_a_failed_load_shows_its_kind_on_the_open_probe_never_its_text(
    engine: Engine, tmp_path: Path
) -> None:
    """A load that fails (here a model file that is not there): /readyz, open to anyone, says the
    kind of failure; its text, which can name paths, hosts and users, stays in the log."""
    hidden = tmp_path / "private-dir-7f3a" / "model.gguf"
    settings = settings_with(
        engine.settings, data_dir=str(tmp_path), models={"generator": {"gguf": str(hidden)}}
    )
    broken = Engine(settings)
    with LiveServer(create_app(settings, engine=broken)) as server:
        deadline = time.monotonic() + 120
        while broken.load_error is None:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        r = httpx.get(server.url + "/readyz")
    assert r.status_code == 503 and r.json()["error"].endswith("(the server's log has the detail)")
    assert "private-dir-7f3a" in broken.load_error and "private-dir-7f3a" not in r.text


def test_server_loads_in_the_background_then_turns_ready(engine: Engine) -> None:
    cold = Engine(engine.settings, models=engine.models)  # index on disk, models shared: loads fast
    with LiveServer(create_app(engine.settings, engine=cold)) as server:
        assert httpx.get(server.url + "/healthz").status_code == 200
        deadline = time.monotonic() + 120
        while httpx.get(server.url + "/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert cold.ready


def test_refused_bodies_and_unhandled_errors_are_json_and_counted(engine: Engine) -> None:
    from tests.test_metrics import value

    app = create_app(engine.settings, engine=engine, load_on_start=False)

    @app.get("/v1/boom")
    async def boom() -> None:  # a bug in a handler: what the server does with the unexpected
        raise RuntimeError("secret internals")

    def errors(url: str, **labels: str) -> float:
        return value(httpx.get(url + "/metrics").text, "ragmend_errors_total", **labels)

    with LiveServer(app) as live:
        big = b"{" + b" " * (engine.settings.server.max_body_bytes + 10) + b"}"
        r = httpx.post(live.url + "/v1/answer", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "over the limit" in r.json()["error"]["message"]
        assert errors(live.url, kind="payload_too_large", code_class="4xx") == 1
        r = httpx.get(live.url + "/v1/boom")
        assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
        assert "secret" not in r.text
        assert errors(live.url, kind="internal", code_class="5xx") == 1
