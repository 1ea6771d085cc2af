"""Auth and the admin API over real HTTP (a live uvicorn server on a loopback port), with the real
engine and models behind it: the 401/403/200 matrix, /metrics protection, runtime policy changes
seen in /metrics and in the next repair, export -> reset -> import, index refresh, the redacted
configuration, and keys that never reach a log."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from ragmend.engine import Engine
from ragmend.engine.engine import open_policy
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import Settings, settings_with
from tests.conftest import LiveServer
from tests.test_metrics import value
from tests.test_repair import UNANSWERABLE

USER_KEY = "user-key-0123456789abcdef"
ADMIN_KEY = "admin-key-fedcba9876543210"
WRONG_KEY = "wrong-key-0000000000000000"
USER = {"Authorization": f"Bearer {USER_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
WRONG = {"Authorization": f"Bearer {WRONG_KEY}"}


def keyed_settings(base: Settings, data_dir: Path, **server: Any) -> Settings:
    return settings_with(
        base,
        data_dir=str(data_dir),
        # Budgets wide enough for two CPU generations on a loaded test machine (as test_repair).
        policy={
            "latency_budget_s": 120.0,
            "request_latency_budget_s": 600.0,
            "seed": 1,
            "state_path": str(data_dir / "policy.sqlite"),
        },
        server={"api_keys": [USER_KEY], "admin_keys": [ADMIN_KEY]} | server,
    )


@pytest.fixture(scope="module")
def keyed_engine(tmp_path_factory: pytest.TempPathFactory, engine: Engine) -> Iterator[Engine]:
    """The session engine's index and graph, copied (the refresh writes), its models shared, its
    own policy state, and keys."""
    data_dir = tmp_path_factory.mktemp("admin") / "data"
    skip = shutil.ignore_patterns("policy.sqlite*", "cache")
    shutil.copytree(engine.settings.data_dir, data_dir, ignore=skip)
    settings = keyed_settings(engine.settings, data_dir)
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    eng.load(build_index=False)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def server(keyed_engine: Engine) -> Iterator[LiveServer]:
    with LiveServer(create_app(keyed_engine.settings, engine=keyed_engine)) as live:
        yield live


def unloaded_app(engine: Engine, tmp: Path, **server: Any) -> LiveServer:
    """A server whose engine never loads: enough for auth (a request let through gets a 503)."""
    settings = settings_with(engine.settings, data_dir=str(tmp), server=server)
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    return LiveServer(create_app(settings, engine=eng, load_on_start=False))


def metric(url: str, name: str, headers: dict[str, str] = ADMIN, **labels: str) -> float:
    r = httpx.get(url + "/metrics", headers=headers)  # a server with keys serves it to keys only
    assert r.status_code == 200, r.text
    return value(r.text, name, **labels)


# --- who may call what -------------------------------------------------------------------------------

# (method, path, body): /v1 with a body that fails validation after auth (400), so nothing runs.
V1 = ("POST", "/v1/answer", {"query": ""})
ADMIN_GET = ("GET", "/admin/policy", None)


MATRIX: list[tuple[tuple[str, str, Any], dict[str, str], int]] = [
    (V1, {}, 401),
    (V1, WRONG, 401),
    (V1, {"Authorization": USER_KEY}, 401),  # no scheme
    (V1, {"Authorization": f"Basic {USER_KEY}"}, 401),
    (V1, USER, 400),
    (V1, {"Authorization": f"bearer {USER_KEY}"}, 400),  # the scheme is case-insensitive
    (V1, ADMIN, 400),  # admin keys open the user endpoints too
    (("GET", "/v1/models", None), {}, 401),  # another engineer's route under /v1: covered
    (("POST", "/v1/chat/completions", {"messages": []}), {}, 401),
    (("GET", "/v1/no-such-route", None), USER, 404),
    (ADMIN_GET, {}, 401),
    (ADMIN_GET, WRONG, 401),
    (ADMIN_GET, USER, 403),
    (ADMIN_GET, ADMIN, 200),
    (("POST", "/admin/policy/reset", None), USER, 403),
    (("POST", "/admin/index/refresh", None), USER, 403),
    (("GET", "/admin/no-such-route", None), USER, 403),  # the scope, before any routing
    (("GET", "/metrics", None), {}, 401),  # keys are configured: /metrics needs one too
    (("GET", "/metrics", None), WRONG, 401),
    (("GET", "/metrics", None), USER, 200),  # an API key that reads every collection
    (("GET", "/metrics", None), ADMIN, 200),
    (("GET", "/healthz", None), {}, 200),
    (("GET", "/readyz", None), {}, 200),
    (("GET", "/docs", None), {}, 200),
    (("GET", "/openapi.json", None), {}, 200),
    (("GET", "/healthz", None), WRONG, 200),  # open means open, whatever is sent
]


def _who(headers: dict[str, str]) -> str:
    names = {
        None: "no-key",
        f"Bearer {USER_KEY}": "user",
        f"Bearer {ADMIN_KEY}": "admin",
        f"Bearer {WRONG_KEY}": "wrong",
        USER_KEY: "user-without-scheme",
        f"Basic {USER_KEY}": "user-as-basic",
        f"bearer {USER_KEY}": "user-lowercase-bearer",
    }
    return names[headers.get("Authorization")]


@pytest.mark.parametrize(
    ("request_", "headers", "status"),
    MATRIX,
    ids=[f"{r[0]} {r[1]} {_who(h)} {s}" for r, h, s in MATRIX],
)
def test_the_auth_matrix(
    server: LiveServer, request_: tuple[str, str, Any], headers: dict[str, str], status: int
) -> None:
    method, path, body = request_
    before = metric(server.url, "ragmend_errors_total", kind="auth")
    r = httpx.request(method, server.url + path, json=body, headers=headers, timeout=60)
    assert r.status_code == status, r.text
    if status in (401, 403):
        err = r.json()["error"]  # the app's JSON error shape
        assert err["code"] == status and err["message"]
        assert (r.headers.get("www-authenticate") == 'Bearer realm="ragmend"') == (status == 401)
        assert metric(server.url, "ragmend_errors_total", kind="auth", code_class="4xx") == before + 1
    if status == 403 and path.startswith("/admin"):
        assert "admin key" in r.json()["error"]["message"]


def test_metrics_protection_and_the_open_defaults(engine: Engine, tmp_path: Path) -> None:
    with unloaded_app(
        engine, tmp_path / "a", api_keys=[USER_KEY], admin_keys=[ADMIN_KEY], protect_metrics=True
    ) as live:
        assert httpx.get(live.url + "/metrics").status_code == 401
        assert httpx.get(live.url + "/metrics", headers=WRONG).status_code == 401
        assert httpx.get(live.url + "/metrics", headers=USER).status_code == 200
        text = httpx.get(live.url + "/metrics", headers=ADMIN).text
        assert value(text, "ragmend_errors_total", kind="auth", code_class="4xx") == 2
        assert httpx.get(live.url + "/healthz").status_code == 200
    # No key configured at all (the laptop default): /v1 open, /admin disabled with a message.
    with unloaded_app(engine, tmp_path / "b") as live:
        assert httpx.post(live.url + "/v1/answer", json={"query": "x"}).status_code == 503  # let through
        r = httpx.get(live.url + "/admin/policy", headers=ADMIN)
        assert r.status_code == 403 and "server.admin_keys" in r.json()["error"]["message"]
        assert httpx.get(live.url + "/metrics").status_code == 200
        # ... but only to requests addressed to the loopback: a page that rebinds its own name
        # to 127.0.0.1 sends that name as the Host (DNS rebinding) and reads nothing.
        rebound = {"Host": "attacker.example:8000"}
        r = httpx.post(live.url + "/v1/answer", json={"query": "x"}, headers=rebound)
        assert r.status_code == 403 and "addressed to localhost" in r.json()["error"]["message"]
        assert httpx.get(live.url + "/metrics", headers=rebound).status_code == 403
        assert httpx.get(live.url + "/healthz", headers={"Host": "localhost:8000"}).status_code == 200
    # Served open on purpose (server.allow_open): any Host.
    with unloaded_app(engine, tmp_path / "e", allow_open=True) as live:
        r = httpx.post(live.url + "/v1/answer", json={"query": "x"}, headers={"Host": "ragmend.internal"})
        assert r.status_code == 503  # let through
    # Admin keys only: /v1 needs a key too (an admin key opens it), /admin the admin key.
    with unloaded_app(engine, tmp_path / "c", admin_keys=[ADMIN_KEY]) as live:
        assert httpx.post(live.url + "/v1/answer", json={"query": "x"}).status_code == 401
        assert httpx.post(live.url + "/v1/answer", json={"query": "x"}, headers=ADMIN).status_code == 503
        assert httpx.get(live.url + "/admin/policy").status_code == 401
        assert httpx.get(live.url + "/admin/policy", headers=ADMIN).status_code == 200  # no model needed
    # Protected metrics with no key to protect them with: refused, saying what to configure.
    with unloaded_app(engine, tmp_path / "d", protect_metrics=True) as live:
        r = httpx.get(live.url + "/metrics")
        assert r.status_code == 403 and "server.metrics_keys" in r.json()["error"]["message"]


# --- the policy at runtime ---------------------------------------------------------------------------


def patch(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.patch(url + "/admin/policy", json=body, headers=ADMIN, timeout=60)


def test_patch_alpha_and_budgets_show_in_metrics(server: LiveServer, keyed_engine: Engine) -> None:
    url = server.url
    assert metric(url, "ragmend_policy_alpha") == pytest.approx(2.0)
    changes = metric(url, "ragmend_config_changes_total", source="admin", result="ok")
    r = patch(url, {"alpha": 0.7, "budget_scale": 1.5, "learn": "frozen"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert sorted(body["changed"]) == ["policy.alpha", "policy.budget_scale", "policy.learn"]
    assert (body["alpha"], body["mode"], body["budgets"]["budget_scale"]) == (0.7, "frozen", 1.5)
    assert body["budgets"]["scaled"]["latency_s"] == pytest.approx(120.0 * 1.5)
    text = httpx.get(url + "/metrics", headers=ADMIN).text
    assert value(text, "ragmend_policy_alpha") == pytest.approx(0.7)
    assert value(text, "ragmend_policy_budget_scale") == pytest.approx(1.5)
    assert value(text, "ragmend_action_latency_budget_seconds") == pytest.approx(180.0)
    assert value(text, "ragmend_policy_learning") == 0
    assert value(text, "ragmend_config_changes_total", source="admin", result="ok") == changes + 1
    assert keyed_engine.settings.policy.alpha == 0.7 and keyed_engine.policy.alpha == 0.7
    # Invalid values: 400 naming the field, nothing changed, counted when it reached the engine.
    bad_patches: list[tuple[dict[str, Any], str]] = [
        ({"alpha": -1}, "alpha"),
        ({"alpha": "nan"}, "alpha"),
        ({"budget_scale": 0}, "budget_scale"),
        ({"memory_budget_bytes": -5}, "memory_budget_bytes"),
        ({"kind": "eps_greedy"}, "kind"),
        ({"enabled_actions": []}, "enabled_actions"),
        ({"enabled_actions": ["rerank", "teleport"]}, "enabled_actions"),
        ({"learn": "sometimes"}, "learn"),
        ({"context_dim": 4}, "context_dim"),  # not tunable at runtime
        ({}, "nothing to change"),
    ]
    for bad, field in bad_patches:
        r = patch(url, bad)
        assert r.status_code == 400 and field in r.json()["error"]["message"], (bad, r.text)
    r = patch(url, {"kind": "lints", "alpha": 1.0})
    assert r.status_code == 400 and "alpha" in r.json()["error"]["message"]
    assert metric(url, "ragmend_config_changes_total", source="admin", result="error") >= 2
    assert patch(url, {"alpha": 2.0, "budget_scale": 1.0, "learn": True}).status_code == 200
    assert metric(url, "ragmend_policy_alpha") == pytest.approx(2.0)


def test_a_disabled_action_is_never_picked_and_keeps_its_statistics(
    server: LiveServer, keyed_engine: Engine
) -> None:
    url, policy = server.url, keyed_engine.policy
    # Make mode_switch the arm this policy would pick for an IE failure (it serves IE) ...
    rng = np.random.default_rng(0)
    from tests.test_policy import diagnosis

    for _ in range(20):
        x = policy.context(rng.standard_normal(384), diagnosis("IE"), 500.0, 3 * 2**20)
        policy.update("mode_switch", x, 1.0)
    # ... then disable it.
    others = [a for a in keyed_engine.settings.policy.enabled_actions if a != "mode_switch"]
    r = patch(url, {"enabled_actions": others})
    assert r.status_code == 200 and r.json()["arms"]["mode_switch"] == {
        "enabled": False,
        "pulls": 20,
        "mean_reward": 1.0,
        "successes": 20,
        "failures": 0,
    }
    # An admin key reads the policy's internals (a user key's reply leaves them out).
    r = httpx.post(url + "/v1/answer", json={"query": UNANSWERABLE}, headers=ADMIN, timeout=600)
    assert r.status_code == 200, r.text
    repair = r.json()["repair"]
    assert repair is not None and "action" in repair, repair
    assert repair["action"] != "mode_switch" and "mode_switch" in repair["decision"]["masked"]
    assert "mode_switch" not in repair["decision"]["scores"]
    arms = httpx.get(url + "/admin/policy", headers=ADMIN).json()["arms"]
    assert arms["mode_switch"]["pulls"] == 20 and arms[repair["action"]]["pulls"] >= 1
    # The state file is the same state under the smaller enabled set: a fresh start reads it.
    fresh = open_policy(keyed_engine.settings)
    try:
        assert fresh.enabled_actions == tuple(others) and fresh.stats()["mode_switch"].pulls == 20
    finally:
        fresh.close()
    assert patch(url, {"enabled_actions": [*others, "mode_switch"]}).status_code == 200


def test_kind_switch_keeps_the_state(server: LiveServer) -> None:
    url = server.url
    before = httpx.get(url + "/admin/policy/export", headers=ADMIN).json()
    for kind in ("lints", "beta_ts", "linucb"):
        r = patch(url, {"kind": kind})
        assert r.status_code == 200 and r.json()["kind"] == kind and r.json()["changed"] == ["policy.kind"]
        after = httpx.get(url + "/admin/policy/export", headers=ADMIN).json()
        assert after["arms"] == before["arms"] and after["kind"] == kind
        info = value(httpx.get(url + "/metrics", headers=ADMIN).text, "ragmend_policy_info", kind=kind)
        assert info == 1
    assert httpx.get(url + "/admin/policy", headers=ADMIN).json()["alpha"] == 2.0


def test_export_reset_import_round_trip(server: LiveServer, keyed_engine: Engine) -> None:
    url = server.url
    keyed_engine.policy.update("depth", np.full(keyed_engine.policy.dim, 0.1), 0.5)
    exported = httpx.get(url + "/admin/policy/export", headers=ADMIN).json()
    assert exported["schema"] == "ragmend.policy.state" and exported["arms"]["depth"]["pulls"] >= 1
    r = httpx.post(url + "/admin/policy/reset", headers=ADMIN)
    assert r.status_code == 200 and all(a["pulls"] == 0 for a in r.json()["arms"].values())
    assert value(httpx.get(url + "/metrics", headers=ADMIN).text, "ragmend_policy_arm_pulls") == 0
    r = httpx.post(url + "/admin/policy/import", json=exported, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["arms"]["depth"]["pulls"] == exported["arms"]["depth"]["pulls"]
    assert httpx.get(url + "/admin/policy/export", headers=ADMIN).json() == exported
    # A foreign or corrupt export: 400 with the reason, the state unchanged.
    foreign = exported | {"dim": 19, "feature_names": exported["feature_names"][16:]}
    corrupt = exported | {"arms": {"depth": exported["arms"]["depth"] | {"pulls": -1}}}
    for body, message in [
        ({"schema": "somebody.else", "version": 1}, "not a ragmend policy state"),
        (foreign, "context features"),
        (corrupt, "malformed"),
        (exported | {"arms": {"teleport": exported["arms"]["depth"]}}, "teleport"),
    ]:
        r = httpx.post(url + "/admin/policy/import", json=body, headers=ADMIN)
        assert r.status_code == 400 and message in r.json()["error"]["message"], r.text
    as_json = ADMIN | {"content-type": "application/json"}
    r = httpx.post(url + "/admin/policy/import", content=b"{not json", headers=as_json)
    assert r.status_code == 400
    assert httpx.get(url + "/admin/policy/export", headers=ADMIN).json() == exported


def test_index_refresh(server: LiveServer, keyed_engine: Engine) -> None:
    r = httpx.post(server.url + "/admin/index/refresh", headers=ADMIN, timeout=600)
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["generation"].startswith("gen-") and report["documents"] > 0
    assert report["embedded_chunks"] == 0  # nothing changed in the sources: nothing re-embedded
    assert keyed_engine.status()["index"] == report["generation"]


def test_config_is_redacted_and_keys_never_logged(
    server: LiveServer, keyed_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    r = httpx.get(server.url + "/admin/config", headers=ADMIN)
    assert r.status_code == 200
    body = r.json()
    assert body["settings"]["server"]["api_keys"] == ["**********"]
    assert body["settings"]["server"]["admin_keys"] == ["**********"]
    assert body["settings"]["policy"]["alpha"] == keyed_engine.settings.policy.alpha
    for headers in (WRONG, USER, ADMIN, {"Authorization": f"Bearer {ADMIN_KEY}x"}):
        httpx.get(server.url + "/admin/policy", headers=headers)
        httpx.post(server.url + "/v1/answer", json={"query": ""}, headers=headers)
    patch(server.url, {"alpha": 1.25})
    patch(server.url, {"alpha": 2.0})
    assert "admin: policy changed" in caplog.text and "auth: 401" in caplog.text
    for key in (USER_KEY, ADMIN_KEY, WRONG_KEY):
        assert key not in r.text
        assert key not in caplog.text
    assert USER_KEY not in repr(keyed_engine.settings) and ADMIN_KEY not in str(keyed_engine.settings.server)
