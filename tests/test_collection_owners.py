"""Collections have owners, over real HTTP (a live uvicorn server, the real models): a key limited
to one collection reads only it through every route that names a corpus (chat, streamed chat,
/v1/answer, /v1/diagnose and its batch, /v1/models), and a collection it may not read answers
exactly as one that does not exist. /metrics needs a key once any key exists: the scrape key
opens it and nothing else; a keyless server on the loopback still serves it open."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.errors import ConfigError
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import key_fingerprint, load_settings, settings_with
from tests.conftest import LiveServer
from tests.test_collections import jsonl, wait_ready

KEY_A = "alpha-only-key-0123456789abcdef"  # reads the collection alpha only
KEY_ALL = "unlisted-key-0123456789abcdef"  # not in server.key_collections: reads every collection
ADMIN_KEY = "admin-key-fedcba9876543210"
SCRAPE_KEY = "scrape-key-00112233445566778899"  # server.metrics_keys
WRONG_KEY = "wrong-key-0000000000000000"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


ALPHA = [{"id": "a1", "title": "Quenton", "text": "Quenton was founded in 1723 by Ilse Varnow."}]
BETA = [{"id": "b1", "title": "Brindle", "text": "Employees of Brindle Ltd get 31 days of paid leave."}]
DEFAULT = [{"id": "d1", "title": "Canberra", "text": "Canberra is the capital city of Australia."}]
# A collection that exists but KEY_A may not read, and one of the same length that does not exist:
# the two answers must be the same but for the name.
FORBIDDEN, MISSING = "ragmend/beta", "ragmend/zeta"
CHAT = "/v1/chat/completions"


def owner_settings(engine: Engine, tmp: Path, **server: Any) -> Any:
    """The session engine's settings over a small corpus of our own, two declared collections (alpha
    and beta, a one-document source each) and the keys above, KEY_A limited to alpha."""
    for name, rows in (("default", DEFAULT), ("alpha", ALPHA), ("beta", BETA)):
        (tmp / f"{name}.jsonl").write_bytes(jsonl(rows))
    keys: dict[str, Any] = {
        "api_keys": [KEY_A, KEY_ALL],
        "admin_keys": [ADMIN_KEY],
        "metrics_keys": [SCRAPE_KEY],
        "key_collections": [{"fingerprint": key_fingerprint(KEY_A), "collections": ["alpha"]}],
    }
    return settings_with(
        engine.settings,
        data_dir=str(tmp / "data"),
        sources=[str(tmp / "default.jsonl")],
        collections={n: {"sources": [str(tmp / f"{n}.jsonl")]} for n in ("alpha", "beta")},
        server=keys | server,
    )


@pytest.fixture(scope="module")
def owned(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A loaded server over the collections above: its URL."""
    settings = owner_settings(engine, tmp_path_factory.mktemp("owners"))
    default = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    with LiveServer(create_app(settings, engine=default)) as server:
        wait_ready(server.url)
        yield server.url
    default.close()


def unloaded(engine: Engine, settings: Any) -> LiveServer:
    """A server whose engine never loads (the session's models): enough for auth and the model list."""
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    return LiveServer(create_app(settings, engine=eng, load_on_start=False))


def chat(model: str | None, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Who founded Quenton?"}],
        "max_tokens": 16,
        "stream": stream,
    }
    return body if model is None else body | {"model": model}


def models(url: str, key: str) -> list[str]:
    r = httpx.get(url + "/v1/models", headers=bearer(key), timeout=60)
    assert r.status_code == 200, r.text
    return [m["id"] for m in r.json()["data"]]


# (path, body for a model name): every route that names a corpus.
ROUTES: list[tuple[str, Any]] = [
    (CHAT, chat),
    (CHAT, lambda m: chat(m, stream=True)),
    ("/v1/answer", lambda m: {"query": "Who founded Quenton?", "model": m}),
    ("/v1/diagnose", lambda m: {"question": "Who founded Quenton?", "answer": "Ilse Varnow.", "model": m}),
    ("/v1/diagnose/batch", lambda m: {"items": [{"answer": "Ilse Varnow.", "question": "Who?", "model": m}]}),
]
ROUTE_IDS = ["chat", "chat-stream", "answer", "diagnose", "diagnose-batch"]


def refused(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    r = httpx.post(url + path, json=body, headers=bearer(KEY_A), timeout=60)
    assert r.status_code == 404, r.text
    assert r.headers["content-type"].startswith("application/json")  # never a stream
    return r


@pytest.mark.parametrize(("path", "body"), ROUTES, ids=ROUTE_IDS)
def test_a_collection_the_key_may_not_read_is_the_404_of_a_missing_one(
    owned: str, path: str, body: Any
) -> None:
    forbidden = refused(owned, path, body(FORBIDDEN))
    missing = refused(owned, path, body(MISSING))
    assert forbidden.json() == json.loads(missing.text.replace(MISSING, FORBIDDEN))
    assert sorted(forbidden.headers.keys()) == sorted(missing.headers.keys())
    error = forbidden.json()["error"]
    assert error["code"] == "model_not_found" and "'ragmend/alpha'" in error["message"]
    assert "beta" not in error["message"].replace(FORBIDDEN, "")  # names only what the key reads
    # The default corpus is a collection like the others: KEY_A does not read it either.
    assert refused(owned, path, body(None)).json() == refused(owned, path, body("ragmend")).json()


def test_the_model_list_shows_only_what_the_key_reads(owned: str) -> None:
    assert models(owned, KEY_A) == ["ragmend/alpha"]
    everything = ["ragmend", "ragmend/alpha", "ragmend/beta"]
    assert models(owned, KEY_ALL) == everything and models(owned, ADMIN_KEY) == everything
    one = httpx.get(owned + "/v1/models/" + FORBIDDEN, headers=bearer(KEY_A))
    none = httpx.get(owned + "/v1/models/" + MISSING, headers=bearer(KEY_A))
    assert one.status_code == none.status_code == 404
    assert one.json() == json.loads(none.text.replace(MISSING, FORBIDDEN))
    assert httpx.get(owned + "/v1/models/ragmend/alpha", headers=bearer(KEY_A)).status_code == 200
    assert httpx.get(owned + "/v1/models/" + FORBIDDEN, headers=bearer(KEY_ALL)).status_code == 200


def test_the_key_reads_its_own_collection(owned: str) -> None:
    r = httpx.post(
        owned + "/v1/answer",
        json={"query": "Who founded Quenton?", "model": "ragmend/alpha"},
        headers=bearer(KEY_A),
        timeout=600,
    )
    assert r.status_code == 200, r.text
    assert {p["doc_id"] for p in r.json()["evidence"]} == {"a1"}
    stream = chat("ragmend/alpha", stream=True)
    with httpx.stream("POST", owned + CHAT, json=stream, headers=bearer(KEY_A), timeout=600) as s:
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
        assert "data: [DONE]" in s.read().decode()
    given: dict[str, Any] = {"answer": "Ilse Varnow.", "question": "Who founded Quenton?"}
    given |= {"model": "ragmend/alpha", "passages": [{"text": ALPHA[0]["text"]}]}
    r = httpx.post(owned + "/v1/diagnose", json=given, headers=bearer(KEY_A), timeout=600)
    assert r.status_code == 200 and r.json()["model"] == "ragmend/alpha", r.text


def test_metrics_need_a_key_once_keys_exist(owned: str) -> None:
    def status(path: str, key: str | None) -> int:
        return httpx.get(owned + path, headers=bearer(key) if key else None, timeout=60).status_code

    assert status("/metrics", None) == 401
    assert status("/metrics", WRONG_KEY) == 401
    assert status("/metrics", SCRAPE_KEY) == 200
    assert status("/metrics", ADMIN_KEY) == 200
    assert status("/metrics", KEY_ALL) == 200  # an API key that reads every collection, as before
    assert status("/metrics", KEY_A) == 403  # the metrics name every collection
    # The scrape key opens nothing else.
    assert status("/v1/models", SCRAPE_KEY) == 403
    assert status("/admin/policy", SCRAPE_KEY) == 403
    r = httpx.post(owned + "/v1/answer", json={"query": "x"}, headers=bearer(SCRAPE_KEY))
    assert r.status_code == 403 and "/metrics only" in r.json()["error"]["message"]


def test_metrics_open_on_a_keyless_loopback_server_or_when_opened(engine: Engine, tmp_path: Path) -> None:
    keyless = settings_with(engine.settings, data_dir=str(tmp_path / "keyless"))
    with unloaded(engine, keyless) as live:  # the laptop default
        assert httpx.get(live.url + "/metrics").status_code == 200
    (tmp_path / "open").mkdir()
    with unloaded(engine, owner_settings(engine, tmp_path / "open", protect_metrics=False)) as live:
        assert httpx.get(live.url + "/metrics").status_code == 200  # opened on purpose


def test_default_deny_leaves_an_unlisted_key_nothing(engine: Engine, tmp_path: Path) -> None:
    with unloaded(engine, owner_settings(engine, tmp_path, deny_unlisted_keys=True)) as live:
        assert models(live.url, KEY_ALL) == []
        assert models(live.url, KEY_A) == ["ragmend/alpha"]
        assert models(live.url, ADMIN_KEY) == ["ragmend", "ragmend/alpha", "ragmend/beta"]
        r = httpx.get(live.url + "/v1/models/ragmend", headers=bearer(KEY_ALL))
        assert r.status_code == 404 and "no model to this key" in r.json()["error"]["message"]
        assert httpx.get(live.url + "/metrics", headers=bearer(KEY_ALL)).status_code == 403


@pytest.mark.parametrize(
    ("owners", "message"),
    [
        (
            [{"fingerprint": key_fingerprint(WRONG_KEY), "collections": ["alpha"]}],
            "no key of server.api_keys",
        ),
        ([{"fingerprint": key_fingerprint(ADMIN_KEY), "collections": ["alpha"]}], "admin keys read every"),
        ([{"fingerprint": key_fingerprint(KEY_A), "collections": ["a"]}] * 2, "listed twice"),
        ([{"fingerprint": KEY_A, "collections": ["alpha"]}], "should match pattern"),  # the key itself
        ([{"fingerprint": key_fingerprint(KEY_A), "collections": ["Alpha"]}], "not a collection name"),
    ],
    ids=["unknown-key", "admin-key", "twice", "raw-key", "bad-name"],
)
def test_key_collections_name_api_keys_by_fingerprint(owners: list[dict[str, Any]], message: str) -> None:
    server = {"api_keys": [KEY_A], "admin_keys": [ADMIN_KEY], "key_collections": owners}
    with pytest.raises(ConfigError, match=message) as e:
        settings_with(load_settings(), server=server)
    assert KEY_A not in str(e.value) and ADMIN_KEY not in str(e.value)  # never a key in a message


def test_a_scrape_key_may_not_be_an_api_key() -> None:
    with pytest.raises(ConfigError, match="opens /metrics only"):
        settings_with(load_settings(), server={"api_keys": [KEY_A], "metrics_keys": [KEY_A]})
