"""Open WebUI as its users know it, over real HTTP with the real models (tiny generator): a reply's
cited passages in Open WebUI's source form, numbered as the message cites them; how it was judged
as a status event; the client's message id kept with the answer; and `ragmend feedback sync`
against a recorded copy of Open WebUI 0.12.4's real API responses (tests/recorded/; `make
demo-chat` runs the same sync against a live Open WebUI)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from typer.testing import CliRunner

from ragmend.engine import Engine
from ragmend.errors import PeerUnavailable
from ragmend.integrations.openwebui import (
    RATINGS_PAGE,
    OpenWebUIRatings,
    RagmendVotes,
    Rating,
    SyncState,
    sync,
)
from ragmend.server.chat_sources import CitedSources, status
from ragmend.server.schemas import AnswerResponse, Passage, RepairTrace
from tests.conftest import REPO, LiveServer, free_port
from tests.test_repair import UNANSWERABLE, make_engine

RECORDED = REPO / "tests" / "recorded" / "openwebui-0.12.4" / "feedbacks.json"
ADMIN_KEY = "sk-recorded-admin"
CHAT = "/v1/chat/completions"
MARKERS = re.compile(r"\[(\d+)\]")


class RecordedOpenWebUI:
    """Open WebUI's ratings API replayed from a recording of the real one (no Open WebUI runs
    here): each `phase` is the list as it was at one moment of the recording."""

    def __init__(self, recording: dict[str, Any], phase: str):
        self.recording, self.phase = recording, phase
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                if self.headers.get("Authorization") != f"Bearer {ADMIN_KEY}":
                    self.reply(replay.recording["unauthorised"])
                elif url.path != RATINGS_PAGE:
                    self.reply({"status": 404, "body": {"detail": "Not Found"}})
                else:
                    page = parse_qs(url.query).get("page", ["1"])[0]
                    pages = replay.recording["phases"][replay.phase]
                    self.reply(pages.get(page, {"status": 200, "body": {"items": [], "total": 0}}))

            def reply(self, recorded: dict[str, Any]) -> None:
                body = json.dumps(recorded["body"]).encode()
                self.send_response(recorded["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> RecordedOpenWebUI:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def voting_server(
    tmp_path_factory: pytest.TempPathFactory, engine: Engine
) -> Iterator[tuple[LiveServer, Engine]]:
    """A server whose every failed answer is decided by one arm (no_repair), so a vote's credit
    is known, with its own policy state. Its corpus does not answer UNANSWERABLE: the reply says
    so and names what was found, with citations."""
    from ragmend.server.app import create_app

    eng = make_engine(tmp_path_factory.mktemp("openwebui"), engine, enabled_actions=("no_repair",))
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        yield server, eng
    eng.close()


def ask(server: LiveServer, question: str, message_id: str | None = None, **body: Any) -> httpx.Response:
    """A chat request as Open WebUI sends it: no generation options of its own (with them, its
    answer would teach nothing, nor its rating)."""
    headers = {"X-OpenWebUI-Message-Id": message_id} if message_id else {}
    payload = {"messages": [{"role": "user", "content": question}], **body}
    return httpx.post(server.url + CHAT, json=payload, headers=headers, timeout=600)


def check_sources(content: str, sources: list[dict[str, Any]], extension: dict[str, Any]) -> None:
    """The message cites its sources 1..m in the order they are first cited, each the passage of
    `evidence` the extension's answer cites at that place."""
    cited = [int(n) for n in MARKERS.findall(content)]
    assert sources and cited and sorted(set(cited)) == list(range(1, len(sources) + 1))
    assert list(dict.fromkeys(cited)) == sorted(set(cited))  # first cited, first numbered
    native = list(dict.fromkeys(int(n) for n in MARKERS.findall(extension["answer"])))
    for source, n in zip(sources, native, strict=True):
        passage = extension["evidence"][n - 1]
        assert source["document"] == [passage["text"]] and source["metadata"][0]["source"] == passage["id"]
        assert source["source"]["name"] == (passage["title"] or passage["doc_id"])
        # Where it came from travels with it: collection, document and trust level.
        meta = source["metadata"][0]
        assert passage["collection"] == "default"
        assert (meta["collection"], meta["doc_id"], meta["trust"]) == (
            "default",
            passage["doc_id"],
            passage["trust"],
        )


def reply_of(answer: str, evidence: list[Passage]) -> AnswerResponse:
    """A reply with only what the citation rule reads (its answer and evidence)."""
    return cast(AnswerResponse, SimpleNamespace(answer=answer, evidence=evidence))


def test_citations_are_renumbered_as_the_message_cites_its_sources() -> None:
    evidence = [
        Passage(id=f"p{n}", doc_id=f"d{n}", title=f"T{n}", text=f"text {n}", score=0.5, retriever="dense")
        for n in range(1, 6)
    ]
    reply = reply_of("A is so.[3] B is so.[1][3] C, as [4, 3] say. [9]", evidence)
    cited = CitedSources.of(reply)
    assert [p.id for p in cited.passages] == ["p3", "p1", "p4"]  # as first cited; [9] is no passage
    assert cited.renumber(reply.answer) == "A is so.[1] B is so.[2][1] C, as [3, 1] say. [9]"
    assert [s.document for s in cited.sources()] == [["text 3"], ["text 1"], ["text 4"]]
    assert CitedSources.of(reply_of("No marker.", evidence)).sources() == []


def test_a_reply_carries_its_cited_sources_and_its_status_streamed_or_not(
    voting_server: tuple[LiveServer, Engine],
) -> None:
    server, _ = voting_server
    whole = ask(server, UNANSWERABLE)
    assert whole.status_code == 200, whole.text
    body = whole.json()
    content = body["choices"][0]["message"]["content"]
    check_sources(content, body["sources"], body["ragmend"])
    for verify_first in (True, False):
        options = {"verify_first": verify_first}
        with httpx.stream(
            "POST",
            server.url + CHAT,
            json={
                "messages": [{"role": "user", "content": UNANSWERABLE}],
                "stream": True,
                "stream_options": options,
            },
            timeout=600,
        ) as r:
            assert r.status_code == 200
            chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
        events = [c["event"] for c in chunks if "event" in c]
        kinds = [e["type"] for e in events]
        assert kinds == ["source"] * (len(kinds) - 1) + ["status"] and len(kinds) >= 2, kinds
        # The events come after the text and before the finish reason; their deltas are empty.
        first_event = next(i for i, c in enumerate(chunks) if "event" in c)
        assert all("event" not in c for c in chunks[first_event + len(events) :])
        assert all(c["choices"][0]["delta"] == {} for c in chunks if "event" in c)
        streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        extension = chunks[-1]["ragmend"]
        sources = [e["data"] for e in events[:-1]]
        if verify_first:  # the text sent is the presented answer, cited as the sources number it
            check_sources(streamed, sources, extension)
        else:  # live: the first answer as generated, then the correction, cited the same way
            assert [s["metadata"][0]["source"] for s in sources] == [
                s["metadata"][0]["source"] for s in body["sources"]
            ]
        status = events[-1]["data"]
        assert status["done"] is True and status["description"] == extension["status"]
        assert status["description"].startswith(("Checked", "Consistent with the retrieved sources"))
        if extension["abstained_by"]:
            assert "do not answer" in status["description"]


def test_the_client_message_id_names_the_answer_for_a_vote(voting_server: tuple[LiveServer, Engine]) -> None:
    server, eng = voting_server
    message_id = str(uuid.uuid4())
    reply = ask(server, UNANSWERABLE, message_id)
    assert reply.status_code == 200, reply.text
    pulls = eng.policy.stats()["no_repair"].pulls
    vote = httpx.post(
        server.url + "/v1/feedback", json={"message_id": message_id, "rating": "down"}, timeout=60
    )
    assert vote.status_code == 200, vote.text
    assert vote.json()["response_id"] == reply.json()["id"] and vote.json()["credited"] == "no_repair"
    assert eng.policy.stats()["no_repair"].pulls == pulls + 1
    # Clear 4xx, nothing learned: an unknown message id, both ids, too long a header.
    unknown = httpx.post(server.url + "/v1/feedback", json={"message_id": "nope", "rating": "up"}, timeout=60)
    assert unknown.status_code == 404 and "server.message_id_header" in unknown.json()["error"]["message"]
    both = {"message_id": message_id, "response_id": reply.json()["id"], "rating": "up"}
    assert httpx.post(server.url + "/v1/feedback", json=both, timeout=60).status_code == 400
    long = ask(server, UNANSWERABLE, "x" * 201)
    assert long.status_code == 400 and "X-OpenWebUI-Message-Id" in long.json()["error"]["message"]
    assert eng.policy.stats()["no_repair"].pulls == pulls + 1


def test_open_webui_ratings_are_learned_once_each(
    tmp_path: Path, voting_server: tuple[LiveServer, Engine]
) -> None:
    server, eng = voting_server
    recording = json.loads(RECORDED.read_text())
    down_then_up, up = recording["messages"]["thumbs_down_then_up"], recording["messages"]["thumbs_up"]
    for message_id in (down_then_up, up):
        assert ask(server, UNANSWERABLE, message_id).status_code == 200
    state_path = tmp_path / "sync.json"
    pulls = eng.policy.stats()["no_repair"].pulls
    with RecordedOpenWebUI(recording, "after_thumbs_down") as ui:
        ratings = OpenWebUIRatings(ui.url, ADMIN_KEY)
        # ragmend unreachable: nothing is applied, and the state does not move.
        with pytest.raises(PeerUnavailable, match=r"ragmend at .* cannot be reached"):
            sync(ratings, RagmendVotes(f"http://127.0.0.1:{free_port()}", None), SyncState.load(state_path))
        assert not state_path.exists()
        votes = RagmendVotes(server.url, None)
        first = sync(ratings, votes, SyncState.load(state_path)).as_dict()
        assert first == {
            "read": 1,
            "not_ratings": 0,
            "voted": 1,
            "already": 0,
            "kept_first": 0,
            "unknown": 0,
            "expired": 0,
        }
        assert eng.policy.stats()["no_repair"].pulls == pulls + 1
        # A second sync reads nothing new and changes nothing.
        assert sync(ratings, votes, SyncState.load(state_path)).as_dict()["read"] == 0
        # Later the user turned the thumbs down up, and rated the other answer up.
        ui.phase = "after_changes"
        later = sync(ratings, votes, SyncState.load(state_path)).as_dict()
        assert later | {"voted": 0, "kept_first": 0} == first | {"read": 2, "voted": 0}
        assert later["voted"] == 1 and later["kept_first"] == 1  # one vote per answer: the first stays
        assert eng.policy.stats()["no_repair"].pulls == pulls + 2
        assert sync(ratings, votes, SyncState.load(state_path)).as_dict()["read"] == 0


def test_a_rating_is_read_from_open_webuis_feedback_item() -> None:
    recording = json.loads(RECORDED.read_text())
    items = recording["phases"]["after_changes"]["1"]["body"]["items"]
    ratings = {r.message_id: r for r in (Rating.of(i) for i in items) if r is not None}
    assert ratings[recording["messages"]["thumbs_up"]].score == 1.0
    assert (
        ratings[recording["messages"]["thumbs_up"]].comment
        == "Accurate information: right, and with its source"
    )
    assert ratings[recording["messages"]["thumbs_down_then_up"]].score == 1.0  # as changed
    assert Rating.of({**items[0], "type": "arena"}) is None
    assert Rating.of({**items[0], "data": {"rating": 0}}) is None


def test_the_sync_command_says_what_is_wrong(tmp_path: Path) -> None:
    from ragmend.cli.main import app

    recording = json.loads(RECORDED.read_text())
    runner = CliRunner()
    state = ["--state", str(tmp_path / "sync.json")]
    with RecordedOpenWebUI(recording, "after_thumbs_down") as ui:
        refused = runner.invoke(
            app, ["feedback", "sync", "--openwebui", ui.url, *state], env={"OPENWEBUI_API_KEY": "not-the-key"}
        )
    assert refused.exit_code == 2 and "refused the key (HTTP 401)" in refused.output
    gone = runner.invoke(app, ["feedback", "sync", "--openwebui", f"http://127.0.0.1:{free_port()}", *state])
    assert gone.exit_code == 3 and "cannot be reached" in gone.output
    key_file = tmp_path / "empty.key"
    key_file.write_text("\n")
    empty = runner.invoke(
        app, ["feedback", "sync", "--openwebui", "http://x", "--openwebui-key-file", str(key_file)]
    )
    assert empty.exit_code == 2 and "empty" in empty.output
    # An admin's key is never sent in the clear to another host.
    plain = runner.invoke(
        app,
        ["feedback", "sync", "--openwebui", "http://ui.example.org:8080", *state],
        env={"OPENWEBUI_API_KEY": "sk-admin"},
    )
    assert plain.exit_code == 2 and "refusing to send a key over plain http" in " ".join(plain.output.split())
    assert not (tmp_path / "sync.json").exists()


def judged(
    failure: str = "NoFailure",
    not_judged: str | None = None,
    grade: str | None = None,
    decided_by: str | None = None,
    **reply: Any,
) -> AnswerResponse:
    """A reply with only what the status line reads."""
    verdict = SimpleNamespace(p_unsupported=0.42)
    diagnosis = SimpleNamespace(
        failure=failure, not_judged=not_judged, grade=grade, verdict=verdict, decided_by=decided_by
    )
    fields = {
        "diagnosis": diagnosis,
        "repair": None,
        "second_repair": None,
        "abstained_by": None,
        "conflict_by": None,
        "answer_policy": None,
    }
    return cast(AnswerResponse, SimpleNamespace(**(fields | reply)))


def test_the_status_line_says_how_the_answer_was_judged() -> None:
    construct = cast(Any, RepairTrace).model_construct  # only what the status line reads
    repaired = construct(action="rerank", kept="repaired")
    kept = construct(action="focus", kept="original")

    def line(reply: AnswerResponse) -> str | None:
        said = status(reply)
        return None if said is None else said.description

    # A passing answer is consistent with what was retrieved, never "supported" as if true.
    assert line(judged()) == "Consistent with the retrieved sources; the sources themselves are not verified"
    assert line(judged(repair=repaired)) == (
        "Consistent with the retrieved sources after a repair (rerank); the sources themselves are not "
        "verified"
    )
    assert line(judged("WR", repair=kept)) == "Checked: not supported by the retrieved sources"
    assert line(judged("WR", grade="uncertain", repair=kept)) == (
        "Checked: possibly not supported by the retrieved sources (42% likely unsupported); the answer "
        "is kept, marked"
    )
    assert (
        line(judged("WR", repair=repaired))
        == "Checked: not supported by the retrieved sources after a repair (rerank)"
    )
    # An "I don't know." whose sources may answer is not said to be sources that do not answer.
    assert line(judged("WR", grade="uncertain", decided_by="missed_answer", repair=kept)) == (
        "Checked: the retrieved sources may answer this question; the answer did not use them"
    )
    # A reply that hides the policy's internals from its key does not name the action either.
    hidden = construct(action=None, kept="repaired")
    assert line(judged(repair=hidden)) == (
        "Consistent with the retrieved sources after a repair; the sources themselves are not verified"
    )
    assert (
        line(judged("IE", abstained_by="answer_policy"))
        == "Checked: the retrieved sources do not answer this question"
    )
    assert (
        line(judged("WR", conflict_by="repair"))
        == "Checked: the retrieved sources disagree on this; both sides are shown"
    )
    assert (
        line(judged(not_judged="de", answer_policy="not_judged"))
        == "Not checked against the retrieved sources: the checks read English only"
    )
    assert (
        line(judged(not_judged="de", answer_policy="withheld"))
        == "Not checked against the retrieved sources: the answer is withheld"
    )
    assert line(cast(AnswerResponse, SimpleNamespace(diagnosis=None))) is None
