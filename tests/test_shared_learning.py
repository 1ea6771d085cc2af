"""The learned state every user shares (the repair policy, the router, their cost models,
admission's service times) is steered by no single client, over real HTTP with the real models
(tiny generator): a vote counts only from the key that received the answer, at a bounded rate and
up to a share of the learning; a request that shaped its own pass is served but not learned from;
the policy's internals reach only admin keys; a client's message id stays with its first answer."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from ragmend.engine import Engine
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import LiveServer
from tests.test_repair import UNANSWERABLE, make_engine, repair_settings

KEY_A = "user-a-key-0123456789abcdef"
KEY_B = "user-b-key-0123456789abcdef"
KEY_C = "user-c-key-0123456789abcdef"
ADMIN = "admin-key-0123456789abcdef0"
BURST = 6  # votes one key may send at once on the shared server (then 1 a minute)


def guarded_engine(tmp: Path, base: Engine, **server: object) -> Engine:
    """The session engine's index and graph, copied (so its feedback ledger is its own), its models
    shared; the router on and one repair arm, no_repair, so what a vote credits is known; keys."""
    data_dir = tmp / "data"
    skip = shutil.ignore_patterns("policy.sqlite*", "router.sqlite*", "feedback.sqlite*", "cache")
    shutil.copytree(base.settings.data_dir, data_dir, ignore=skip)
    settings = settings_with(
        repair_settings(tmp, base, enabled_actions=("no_repair",)),
        data_dir=str(data_dir),
        router={"enabled": True, "state_path": str(tmp / "router.sqlite")},
        server={"api_keys": [KEY_A, KEY_B, KEY_C], "admin_keys": [ADMIN], **server},
    )
    eng = Engine(settings, models=ModelRegistry.sharing(base.models, settings))
    eng.load(build_index=False)
    return eng


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, engine: Engine
) -> Iterator[tuple[LiveServer, Engine, FastAPI]]:
    eng = guarded_engine(
        tmp_path_factory.mktemp("guarded"), engine, feedback_burst=BURST, feedback_votes_per_min=1.0
    )
    app = create_app(eng.settings, engine=eng)
    with LiveServer(app) as server:
        yield server, eng, app
    eng.close()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat(url: str, key: str, message_id: str | None = None, **body: Any) -> dict[str, Any]:
    headers = auth(key) | ({"X-OpenWebUI-Message-Id": message_id} if message_id else {})
    payload = {"messages": [{"role": "user", "content": UNANSWERABLE}], **body}
    r = httpx.post(url + "/v1/chat/completions", json=payload, headers=headers, timeout=600)
    assert r.status_code == 200, r.text
    reply: dict[str, Any] = r.json()
    return reply


def vote(url: str, key: str, **body: Any) -> httpx.Response:
    return httpx.post(url + "/v1/feedback", json=body, headers=auth(key), timeout=60)


def message(r: httpx.Response) -> str:
    text: str = r.json()["error"]["message"]
    return text


def test_a_vote_counts_only_from_the_key_that_received_the_answer(
    guarded: tuple[LiveServer, Engine, FastAPI],
) -> None:
    server, eng, _ = guarded
    reply = chat(server.url, KEY_A)
    pulls = eng.policy.stats()["no_repair"].pulls
    other = vote(server.url, KEY_B, response_id=reply["id"], rating="down")
    assert other.status_code == 403 and other.json()["error"]["type"] == "permission_error"
    assert "only the key that received it may vote" in message(other)
    assert eng.policy.stats()["no_repair"].pulls == pulls
    mine = vote(server.url, KEY_A, response_id=reply["id"], rating="down")
    assert mine.status_code == 200, mine.text
    assert mine.json()["learned"] and mine.json()["not_learned"] is None
    assert eng.policy.stats()["no_repair"].pulls == pulls + 1


def test_votes_past_a_keys_rate_are_refused_with_retry_after(
    guarded: tuple[LiveServer, Engine, FastAPI],
) -> None:
    server, _, _ = guarded
    replies = [vote(server.url, KEY_C, response_id="answer-unknown", rating="up") for _ in range(BURST + 1)]
    assert [r.status_code for r in replies] == [404] * BURST + [429]
    limited = replies[-1]
    assert limited.json()["error"]["type"] == "rate_limit_error"
    assert "server.feedback_votes_per_min" in message(limited)
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    # Each key has its own rate.
    assert vote(server.url, KEY_B, response_id="answer-unknown", rating="up").status_code == 404


def test_a_request_that_shapes_its_own_pass_is_served_but_not_learned_from(
    guarded: tuple[LiveServer, Engine, FastAPI],
) -> None:
    server, eng, app = guarded
    service = app.state.admission.service

    def learned() -> tuple[Any, ...]:
        """Everything a request may teach: both policies, the measurements of both cost models
        and of admission's service times."""
        return (
            {arm: s.pulls for arm, s in eng.policy.stats().items()},
            {plan: s.pulls for plan, s in eng.router.policy.stats().items()},
            {plan: tuple(seen) for plan, seen in eng.router.costs._latency.items()},
            {arm: tuple(seen) for arm, seen in eng.repairer.costs._latency.items()},
            {kind: tuple(seen) for kind, seen in service._first.items()},
        )

    before = learned()
    shaped = chat(server.url, KEY_A, max_tokens=40, stop=["\n\n\n"])
    answered = httpx.post(
        server.url + "/v1/answer",
        json={"query": UNANSWERABLE, "config": {"seed": 7}},
        headers=auth(KEY_A),
        timeout=600,
    )
    assert answered.status_code == 200, answered.text
    for reply in (shaped["ragmend"], answered.json()):
        assert reply["route"]["chosen_by"] == "router" and reply["route"]["learned"] is False
        assert reply["repair"]["kept"] == "original" and reply["repair"]["learned"] is False
    assert learned() == before
    # Its vote is recorded, and teaches nothing either.
    voted = vote(server.url, KEY_A, response_id=shaped["id"], rating="up")
    assert voted.status_code == 200, voted.text
    assert voted.json()["recorded"] and not voted.json()["learned"]
    assert voted.json()["not_learned"] == "request_options"
    assert learned() == before
    # The same question with no options of its own teaches every one of them.
    chat(server.url, KEY_A)
    after = learned()
    assert after[0]["no_repair"] == before[0]["no_repair"] + 1
    assert sum(after[1].values()) == sum(before[1].values()) + 1
    assert after[2] != before[2] and after[3] != before[3] and after[4] != before[4]


def test_the_policys_internals_are_shown_only_to_admin_keys(
    guarded: tuple[LiveServer, Engine, FastAPI],
) -> None:
    server, eng, _ = guarded
    plans = set(eng.settings.router.plans)
    user, admin = chat(server.url, KEY_A)["ragmend"], chat(server.url, ADMIN)["ragmend"]
    for reply in (user, admin):
        assert reply["route"]["chosen_by"] == "router" and reply["repair"]["kept"] == "original"
    assert user["route"]["plan"] is None and user["route"]["decision"] is None
    assert user["repair"]["action"] is None and user["repair"]["decision"] is None
    assert '"exploit"' not in json.dumps(user) and '"explore"' not in json.dumps(user)
    assert admin["route"]["plan"] in plans and set(admin["route"]["decision"]["scores"]) <= plans
    assert admin["repair"]["action"] == "no_repair" and isinstance(admin["repair"]["decision"]["seed"], int)
    # A vote's reply names the arm and plan it credits to an admin key only.
    by_user = vote(server.url, KEY_A, response_id=user["id"], rating="up").json()
    by_admin = vote(server.url, ADMIN, response_id=admin["id"], rating="up").json()
    assert by_user["learned"] and by_user["credited"] is None and by_user["credited_plan"] is None
    assert by_admin["learned"] and by_admin["credited"] == "no_repair"
    assert by_admin["credited_plan"] == admin["route"]["plan"]


def test_a_message_id_stays_with_its_first_answer_and_its_key(
    guarded: tuple[LiveServer, Engine, FastAPI],
) -> None:
    server, _, _ = guarded
    message_id = str(uuid.uuid4())
    first = chat(server.url, KEY_A, message_id)
    later = chat(server.url, KEY_B, message_id)  # another client names the same message
    taken = vote(server.url, KEY_B, message_id=message_id, rating="down")
    assert taken.status_code == 403 and "only the key that received it may vote" in message(taken)
    rated = vote(server.url, KEY_A, message_id=message_id, rating="up")
    assert rated.status_code == 200 and rated.json()["response_id"] == first["id"], rated.text
    # The later answer takes a vote by its own id, from its own key.
    own = vote(server.url, KEY_B, response_id=later["id"], rating="down")
    assert own.status_code == 200 and own.json()["response_id"] == later["id"], own.text


def test_a_keyless_server_takes_votes_only_from_its_own_machine(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine, enabled_actions=("no_repair",))
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        r = httpx.post(server.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=600)
        assert r.status_code == 200, r.text
        body = {"response_id": r.json()["id"], "rating": "down"}
        # A client on another machine, as a proxy on this one names it to the server.
        remote = httpx.post(
            server.url + "/v1/feedback", json=body, headers={"X-Forwarded-For": "203.0.113.7"}, timeout=60
        )
        assert remote.status_code == 403 and "its own machine" in message(remote)
        local = httpx.post(server.url + "/v1/feedback", json=body, timeout=60)
        assert local.status_code == 200 and local.json()["learned"], local.text
    eng.close()


def test_one_keys_votes_past_its_share_of_the_learning_are_recorded_not_learned(
    tmp_path: Path, engine: Engine
) -> None:
    """Of the latest 3 learned votes one key may hold 1.5: once B has voted, A's second vote is
    recorded, acknowledged and not learned. With server.show_policy_internals a user key reads
    the internals too."""
    eng = guarded_engine(
        tmp_path, engine, feedback_share_window=3, feedback_max_share=0.5, show_policy_internals=True
    )
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        a1, a2, b1 = chat(server.url, KEY_A), chat(server.url, KEY_A), chat(server.url, KEY_B)
        assert a1["ragmend"]["repair"]["action"] == "no_repair" and a1["ragmend"]["route"]["decision"]
        pulls = eng.policy.stats()["no_repair"].pulls
        assert vote(server.url, KEY_A, response_id=a1["id"], rating="up").json()["learned"]
        assert vote(server.url, KEY_B, response_id=b1["id"], rating="up").json()["learned"]
        over = vote(server.url, KEY_A, response_id=a2["id"], rating="up")
        assert over.status_code == 200, over.text
        assert over.json()["recorded"] and not over.json()["learned"]
        assert over.json()["not_learned"] == "key_share" and over.json()["credited"] == "no_repair"
        assert eng.policy.stats()["no_repair"].pulls == pulls + 2
    eng.close()
