"""Collections over real HTTP (a live uvicorn server, the real models): one server serving several
corpora, each with its own index, graph and policy, selected by `model`; created, filled with
documents (a JSONL body and a file upload), emptied and deleted over the admin API, with the
CLI's limits and validation and atomic swaps; a refresh reads only the collection's own sources.
Run on the file backend and on a real PostgreSQL (pgserver's, started by the test), where a
second server over the same database is a second replica."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend import pg
from ragmend.cli.common import make_engine
from ragmend.engine import Engine
from ragmend.errors import NotFound
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer
from tests.test_metrics import value

NOTES = [
    {
        "id": "n1",
        "title": "Quenton",
        "text": "The Zorblat river flows through the city of Quenton. "
        "Quenton was founded in 1723 by the cartographer Ilse Varnow.",
    },
    {"id": "n2", "title": "Varnow", "text": "Ilse Varnow drew the first map of the Zorblat valley."},
]
# The default corpus: small, so that each test builds its index (and graph) in seconds.
DEFAULT = [
    {"id": "d1", "title": "Jaws", "text": "Jaws is a 1975 film directed by Steven Spielberg."},
    {"id": "d2", "title": "Marie Curie", "text": "Marie Curie was born in Warsaw in 1867."},
    {"id": "d3", "title": "Canberra", "text": "Canberra is the capital city of Australia."},
]
HANDBOOK = [{"id": "h1", "title": "Leave", "text": "Employees of Brindle Ltd get 31 days of paid leave."}]
QUESTION = "Who founded Quenton?"
C = "/admin/collections"
ADMIN_KEY = "admin-key-fedcba9876543210"
AS_ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}  # admin keys open /v1 too (and only keys do)
JSONL = {"Content-Type": "application/jsonl"}


def jsonl(rows: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture(params=["files", "postgres"])
def backend(request: pytest.FixtureRequest, engine: Engine, tmp_path: Path) -> dict[str, Any]:
    """The settings sections that pick the store: files under tmp_path, or a new database."""
    if request.param == "files":
        return {}
    return {"store": {"kind": "postgres", "dsn": request.getfixturevalue("dsn")}}


@dataclass
class Served:
    url: str
    default: Engine
    handbook: Path  # the declared collection's source file
    app: Any


@pytest.fixture
def served(engine: Engine, backend: dict[str, Any], tmp_path: Path) -> Iterator[Served]:
    """A server over the session's models and a small default corpus, with a declared collection
    `handbook` (a JSONL source of its own)."""
    handbook = tmp_path / "handbook.jsonl"
    handbook.write_bytes(jsonl(HANDBOOK))
    corpus = tmp_path / "default.jsonl"
    corpus.write_bytes(jsonl(DEFAULT))
    settings = settings_with(
        engine.settings,
        data_dir=str(tmp_path / "data"),
        sources=[str(corpus)],
        collections={"handbook": {"sources": [str(handbook)]}},
        server={
            "max_body_bytes": 200_000,
            "admin_keys": [ADMIN_KEY],
            "source_roots": [str(tmp_path / "shared")],
        },
        rag={"max_file_bytes": 5_000},
        **backend,
    )
    default = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    app = create_app(settings, engine=default)
    with LiveServer(app) as server:
        wait_ready(server.url)
        yield Served(server.url, default, handbook, app)
    default.close()


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if httpx.get(url + "/readyz").status_code == 200:
            return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not become ready")


def ask(url: str, model: str | None, question: str = QUESTION) -> httpx.Response:
    body: dict[str, Any] = {"query": question}
    if model is not None:
        body["model"] = model
    return httpx.post(url + "/v1/answer", json=body, headers=AS_ADMIN, timeout=300)


def doc_ids(reply: httpx.Response) -> set[str]:
    assert reply.status_code == 200, reply.text
    return {p["doc_id"] for p in reply.json()["evidence"]}


def test_collections_end_to_end(served: Served, tmp_path: Path) -> None:
    url, default, handbook = served.url, served.default, served.handbook
    admin = httpx.Client(base_url=url, timeout=300, headers={"Authorization": f"Bearer {ADMIN_KEY}"})

    # Declared in the configuration: listed as a model, built from its own source at start.
    models = [m["id"] for m in httpx.get(url + "/v1/models", headers=AS_ADMIN).json()["data"]]
    assert models == ["ragmend", "ragmend/handbook"]
    listed = {c["name"]: c for c in admin.get(C).json()["data"]}
    assert listed["handbook"]["declared"] and listed["handbook"]["documents"] == 1
    assert listed["default"]["documents"] == len(DEFAULT)

    # Created over HTTP, empty: a clear 409 until it has documents.
    created = admin.post(C, json={"name": "notes"})
    assert created.status_code == 201, created.text
    assert created.json()["model"] == "ragmend/notes"
    assert created.json()["documents"] == 0 and created.json()["generation"] is None
    empty = ask(url, "ragmend/notes")
    assert empty.status_code == 409 and "no documents yet" in empty.json()["error"]["message"]

    # Documents as a JSONL body: answered from them, and only them; the default corpus never
    # sees them.
    ndjson = {"Content-Type": "application/x-ndjson"}
    added = admin.post(C + "/notes/documents", content=jsonl(NOTES), headers=ndjson)
    assert added.status_code == 200, added.text
    assert (added.json()["added"], added.json()["documents"]) == (2, 2)
    assert doc_ids(ask(url, "ragmend/notes")) <= {"n1", "n2"}
    assert not doc_ids(ask(url, None)) & {"n1", "n2"}
    chat = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "ragmend/notes", "messages": [{"role": "user", "content": QUESTION}]},
        headers=AS_ADMIN,
        timeout=300,
    )
    assert chat.status_code == 200 and chat.json()["model"] == "ragmend/notes"
    assert {p["doc_id"] for p in chat.json()["ragmend"]["evidence"]} <= {"n1", "n2"}
    # Each passage names the collection that held it, in the extension and the cited sources.
    assert {p["collection"] for p in chat.json()["ragmend"]["evidence"]} == {"notes"}
    assert all(s["metadata"][0]["collection"] == "notes" for s in chat.json()["sources"])

    # Counted per corpus (the default one answered once, the collection twice).
    text = httpx.get(url + "/metrics", headers=AS_ADMIN).text
    assert value(text, "ragmend_collection_requests_total", collection="notes") == 2
    assert value(text, "ragmend_collection_requests_total", collection="default") == 1

    # A file upload replaces one document and keeps the other.
    changed = [dict(NOTES[0], text=NOTES[0]["text"].replace("1723", "1724"))]
    up = admin.post(
        C + "/notes/documents", files={"file": ("notes.jsonl", jsonl(changed), "application/jsonl")}
    )
    assert up.status_code == 200, up.text
    assert (up.json()["added"], up.json()["updated"], up.json()["documents"]) == (0, 1, 2)
    generation = up.json()["generation"]

    # Bad input: a clear 4xx naming what is wrong, and the index as it was.
    bad_line = jsonl(NOTES[:1]) + b"{not json\n"
    refused = admin.post(C + "/notes/documents", content=bad_line, headers=JSONL)
    assert refused.status_code == 400 and "request body:2" in refused.json()["error"]["message"]
    big = jsonl([{"id": "big", "text": "word " * 2000}])
    too_big = admin.post(C + "/notes/documents", content=big, headers=JSONL)
    assert too_big.status_code == 413 and "rag.max_file_bytes" in too_big.json()["error"]["message"]
    wrong_type = admin.post(C + "/notes/documents", json=NOTES)
    assert wrong_type.status_code == 400 and "Content-Type" in wrong_type.json()["error"]["message"]
    assert admin.post(C + "/nowhere/documents", content=jsonl(NOTES)).status_code == 404
    assert admin.get(C + "/notes").json()["generation"] == generation

    # Names and duplicates.
    assert admin.post(C, json={"name": "Bad-Name"}).status_code == 400
    assert admin.post(C, json={"name": "default"}).status_code == 400
    assert admin.post(C, json={"name": "nul", "sources": ["a\u0000b"]}).status_code == 400
    assert admin.post(C, json={"name": "notes"}).status_code == 409
    # Sources by path: only under server.source_roots, by real path; missing and forbidden read alike.
    outside = admin.post(C, json={"name": "root", "sources": ["/"]})
    missing = admin.post(C, json={"name": "missing", "sources": [str(tmp_path / "shared" / "nothing.jsonl")]})
    assert outside.status_code == missing.status_code == 400
    said = outside.json()["error"]["message"]
    assert "not a path under server.source_roots" in said
    assert missing.json()["error"]["message"] == said.replace(
        "/", str(tmp_path / "shared" / "nothing.jsonl"), 1
    )
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "out").symlink_to("/etc")  # a link out of the root reads as outside
    linked = admin.post(C, json={"name": "linked", "sources": [str(tmp_path / "shared" / "out")]})
    assert linked.status_code == 400 and "server.source_roots" in linked.json()["error"]["message"]
    assert ask(url, "ragmend/nowhere").status_code == 404

    # Deleting documents: by id; an unknown id, or the last document, is refused.
    listing = admin.get(C + "/notes/documents").json()
    assert [d["id"] for d in listing["data"]] == ["n1", "n2"] and listing["data"][0]["source"] == "http"
    assert admin.delete(C + "/notes/documents", params={"id": "zz"}).status_code == 404
    gone = admin.delete(C + "/notes/documents", params={"id": "n2"})
    assert (gone.json()["removed"], gone.json()["documents"]) == (1, 1)
    assert admin.delete(C + "/notes/documents", params={"id": "n1"}).status_code == 409

    # A refresh reads only the collection's own sources: the handbook gains its new document,
    # the default corpus is not touched.
    before = default.corpus.store.current_generation()
    handbook.write_bytes(
        jsonl([*HANDBOOK, {"id": "h2", "title": "Pay", "text": "Brindle Ltd pays monthly."}])
    )
    refreshed = admin.post(C + "/handbook/refresh")
    assert (refreshed.json()["added"], refreshed.json()["documents"]) == (1, 2)
    assert default.corpus.store.current_generation() == before
    # No sources: nothing read, nothing written.
    notes_refresh = admin.post(C + "/notes/refresh").json()
    assert notes_refresh["documents"] == 1 and notes_refresh["embedded_chunks"] == 0

    # Deleting: a declared collection stays (its place is the configuration); a created one goes
    # with its data, and its model name with it.
    assert admin.delete(C + "/handbook").status_code == 409
    assert admin.delete(C + "/notes").status_code == 204
    assert ask(url, "ragmend/notes").status_code == 404
    assert [m["id"] for m in httpx.get(url + "/v1/models", headers=AS_ADMIN).json()["data"]] == [
        "ragmend",
        "ragmend/handbook",
    ]
    if default.settings.store.kind == "files":
        assert not (default.settings.data_dir / "collections" / "notes").exists()
    else:  # its pgvector table and its graph's rows went with it
        assert default.settings.store.dsn is not None
        with pg.connect(default.settings.store.dsn.get_secret_value()) as conn:
            row = conn.execute(
                "SELECT to_regclass('data_ragmend_chunks_notes') IS NULL, "
                "(SELECT count(*) FROM ragmend_kg_triples WHERE namespace = 'notes'), "
                "(SELECT count(*) FROM ragmend_index_generations WHERE namespace = 'notes')"
            ).fetchone()
        assert row == (True, 0, 0)
    assert admin.delete(C + "/notes").status_code == 404

    # The CLI's --collection names the same collections (`ragmend ingest/ask --collection`).
    assert make_engine(default.settings, "handbook").namespace == "handbook"
    with pytest.raises(NotFound, match="no collection 'notes'"):
        make_engine(default.settings, "notes")


def test_a_collection_of_its_own_policy_and_a_second_replica(served: Served, tmp_path: Path) -> None:
    admin = httpx.Client(base_url=served.url, timeout=300, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert admin.post(C, json={"name": "mine", "policy": "own"}).status_code == 201
    sent = admin.post(C + "/mine/documents", content=jsonl(NOTES), headers=JSONL)
    assert sent.status_code == 200
    assert {c["name"]: c["policy"] for c in admin.get(C).json()["data"]} == {
        "default": "own",
        "handbook": "shared",
        "mine": "own",
    }
    # Behind them: the handbook teaches the default engine's policy, `mine` a policy of its own.
    collections = served.app.state.collections
    assert collections.get("handbook").policy is served.default.policy
    mine = collections.get("mine").policy
    assert mine is not served.default.policy
    if served.default.settings.store.kind == "files":
        assert str(mine.store.path).endswith("collections/mine/policy.sqlite")
        return
    assert mine.store.namespace == "mine"
    # Another server (a replica) over the same database sees the collection and answers from it.
    settings = settings_with(served.default.settings, data_dir=str(tmp_path / "replica"))
    replica = Engine(settings, models=served.default.models)
    with LiveServer(create_app(settings, engine=replica)) as other:
        wait_ready(other.url)
        assert "ragmend/mine" in [
            m["id"] for m in httpx.get(other.url + "/v1/models", headers=AS_ADMIN).json()["data"]
        ]
        assert doc_ids(ask(other.url, "ragmend/mine")) <= {"n1", "n2"}
        # Deleted through the first: gone from the second too (it reads the registry again).
        assert admin.delete(C + "/mine").status_code == 204
        assert ask(other.url, "ragmend/mine").status_code == 404
    replica.close()
