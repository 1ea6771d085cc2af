"""What a reply says of its sources, over real HTTP with the real models: an answer the diagnosis
passes is consistent with the retrieved sources and no more (a planted document passes as well as
a true one), each cited passage says where it came from (its collection, its document, its
source's trust level), and an answer the diagnosis could not judge goes through the answer policy
like any other: kept with the caveat that it was not checked, or, under `abstain`, withheld."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.engine.presentation import NOT_CHECKED, WITHHELD
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer, tiny_settings

# A planted document, said plainly so that the tiny test generator restates it, beside others.
PLANTED = {
    "id": "uploads/zorvath.md",
    "title": "Zorvath Bridge",
    "text": "The Zorvath Bridge was completed in 1931.",
    "trust": 0.1,
}
OTHERS = [
    {"id": "owl", "title": "Snowy owl", "text": "The snowy owl is a large owl of the Arctic.", "trust": 0.9},
    {"id": "harbour", "title": "Harbour Line", "text": "The Harbour Line is a tram line in Bergen."},
]
QUESTION = "When was the Zorvath Bridge completed?"
FRENCH = "Quel aéroport se trouve à Elko, dans le Nevada ?"
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, registry: ModelRegistry) -> Iterator[LiveServer]:
    """A server over a corpus holding the planted document (no router, no repair: one answer)."""
    tmp = tmp_path_factory.mktemp("planted")
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in [PLANTED, *OTHERS]))
    settings = tiny_settings(
        tmp / "data",
        sources=[str(corpus)],
        models={"generator": {"profile": "tiny", "max_tokens": 48}, "escalation": None},
        router={"enabled": False},
        policy={"repair": False},
    )
    eng = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    eng.load()
    try:
        with LiveServer(create_app(eng.settings, engine=eng)) as server:
            yield server
    finally:
        eng.close()


def streamed(server: LiveServer, question: str, verify_first: bool) -> list[dict[str, Any]]:
    payload = {
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "stream_options": {"verify_first": verify_first},
    }
    with httpx.stream("POST", server.url + CHAT, json=payload, timeout=600) as r:
        assert r.status_code == 200
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


def test_an_answer_from_a_planted_source_reads_as_consistent_with_it_and_says_where_it_came_from(
    planted: LiveServer,
) -> None:
    r = httpx.post(planted.url + "/v1/answer", json={"query": QUESTION}, timeout=600)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "1931" in body["generated"] and body["diagnosis"]["failure"] == "NoFailure", body["generated"]
    # The check passed the answer against what was retrieved, and says no more than that.
    assert body["status"] == "Consistent with the retrieved sources; the sources themselves are not verified"
    assert body["answer_policy"] is None
    # Each passage says where it came from: the planted one by its document and its low trust.
    evidence = {p["doc_id"]: p for p in body["evidence"]}
    assert all(p["collection"] == "default" for p in body["evidence"])
    assert evidence[PLANTED["id"]]["trust"] == PLANTED["trust"]
    assert evidence.get("harbour", {}).get("trust") is None  # a row that says none has none

    # The chat reply: the same line as the status event, each cited source with its provenance.
    chunks = streamed(planted, QUESTION, verify_first=True)
    events = [c["event"] for c in chunks if "event" in c]
    extension = chunks[-1]["ragmend"]
    assert events[-1]["data"]["description"] == extension["status"]
    assert not any("supported" in e["data"].get("description", "") for e in events)
    sources = [e["data"]["metadata"][0] for e in events if e["type"] == "source"]
    assert sources and all(s["collection"] == "default" for s in sources)
    assert [(s["doc_id"], s["trust"]) for s in sources] == [(PLANTED["id"], PLANTED["trust"])]


def test_an_unjudged_answer_goes_through_the_answer_policy_over_http(live_server: LiveServer) -> None:
    """The default policy keeps it with the caveat, and says that it applied."""
    r = httpx.post(live_server.url + "/v1/answer", json={"query": FRENCH}, timeout=600)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["diagnosis"]["not_judged"] and body["diagnosis"]["failure"] == "NoFailure"
    assert body["answer_policy"] == "not_judged" and body["answer_note"] == NOT_CHECKED
    assert body["answer"] == f"{body['generated']} {NOT_CHECKED}".strip()
    assert body["status"] == "Not checked against the retrieved sources: the checks read English only"


def test_the_abstain_policy_withholds_an_unjudged_answer_over_http(
    engine: Engine, registry: ModelRegistry
) -> None:
    """`abstain` shows no answer the check does not stand behind: an answer it could not judge is
    withheld, unstreamed and streamed alike (a live stream ends with the correction)."""
    settings = settings_with(
        engine.settings,
        models={"generator": {"profile": "tiny", "max_tokens": 24}, "escalation": None},
        router={"enabled": False},
        server={"answer_policy": "abstain"},
        policy={"repair": False},
    )
    strict = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    strict.load()
    try:
        with LiveServer(create_app(settings, engine=strict, load_on_start=False)) as server:
            r = httpx.post(server.url + "/v1/answer", json={"query": FRENCH}, timeout=600)
            live = streamed(server, FRENCH, verify_first=False)
    finally:
        strict.close()
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["diagnosis"]["not_judged"] and body["generated"]
    assert body["answer"] == WITHHELD and body["answer_policy"] == "withheld"
    assert body["abstained_by"] is None  # nothing says the sources do not answer
    assert body["status"] == "Not checked against the retrieved sources: the answer is withheld"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in live if c["choices"])
    assert text.endswith(f"[Correction] The answer above is withdrawn. {WITHHELD}")
    assert live[-1]["ragmend"]["answer_policy"] == "withheld"
