"""Runtime configuration: Engine.apply_tunables, and the hot reload of the configuration file over
a live server (file change and SIGHUP), counted, with a broken file keeping the running one."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI

from ragmend.engine import Engine
from ragmend.errors import ConfigError
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.server.reload import ConfigReloader
from ragmend.settings import Settings, load_settings, settings_with
from tests.conftest import LiveServer, tiny_settings
from tests.test_metrics import value

ADMIN_KEY = "admin-key-reload-0123456789"
NEW_ADMIN_KEY = "admin-key-rotated-987654321"


def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- Engine.apply_tunables ---------------------------------------------------------------------------


def test_apply_tunables_applies_the_tunable_part_and_warns_about_the_rest(
    tmp_path: Path, registry: ModelRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    settings = tiny_settings(tmp_path)
    eng = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    policy = eng.policy
    held = eng.settings  # what a request in flight holds: a frozen value, never changed under it
    new = settings_with(
        settings,
        policy={
            "alpha": 0.5,
            "enabled_actions": ["rerank", "depth"],
            "request_latency_budget_s": 20.0,
            "repair": False,
            "refresh_cooldown_s": 10.0,
            "context_dim": 4,  # changes the context layout: a restart
        },
        rag={"k": 9},
        models={"generator": {"max_tokens": 20}},
    )
    with caplog.at_level(logging.WARNING, logger="ragmend.engine"):
        applied = eng.apply_tunables(new)
    assert applied == [
        "policy.alpha",
        "policy.enabled_actions",
        "policy.refresh_cooldown_s",
        "policy.repair",
        "policy.request_latency_budget_s",
    ]
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "need a restart" in warning
    for key in ("rag.k", "models.generator.max_tokens", "policy.context_dim"):
        assert key in warning
    s = eng.settings
    assert s is not held and held.policy.alpha == 2.0
    assert (s.policy.alpha, s.policy.enabled_actions, s.policy.repair) == (0.5, ("rerank", "depth"), False)
    assert (s.rag.k, s.models.generator.max_tokens, s.policy.context_dim) == (5, 48, 16)  # kept
    assert (policy.alpha, policy.enabled_actions, policy.config.request_latency_budget_s) == (
        0.5,
        ("rerank", "depth"),
        20.0,
    )
    assert eng.apply_tunables(new) == []  # nothing new
    # All or nothing: an unknown action refuses the whole change.
    bad = settings_with(s, policy={"alpha": 1.0, "enabled_actions": ["rerank", "teleport"]})
    with pytest.raises(ConfigError, match="teleport"):
        eng.apply_tunables(bad)
    assert eng.settings is s and policy.alpha == 0.5 and policy.enabled_actions == ("rerank", "depth")
    # The same path serves the admin API's partial changes.
    applied = eng.change_policy({"kind": "beta_ts", "budget_scale": 0.7})
    assert applied == ["policy.budget_scale", "policy.kind"]
    assert policy.kind == "beta_ts" and policy.budgets_for().latency_s == pytest.approx(12.0 * 0.7)
    with pytest.raises(ConfigError, match=r"policy\.budget_scale"):
        eng.change_policy({"budget_scale": -1})
    eng.close()


def test_a_change_before_the_policy_exists_is_what_it_is_built_with(tmp_path: Path) -> None:
    eng = Engine(tiny_settings(tmp_path))
    eng.apply_tunables(settings_with(eng.settings, policy={"kind": "lints", "budget_scale": 1.5}))
    assert eng.policy.kind == "lints" and eng.policy.config.budget_scale == 1.5
    eng.close()


# --- hot reload over a live server -------------------------------------------------------------------


def write_config(path: Path, tmp: Path, **sections: Any) -> None:
    """A configuration file for an engine that never loads models (the reload needs none)."""
    data: dict[str, Any] = {
        "data_dir": str(tmp / "data"),
        "cache_dir": str(tmp / "cache"),
        "models": {"generator": {"profile": "tiny"}},
        "server": {"admin_keys": [ADMIN_KEY], "reload_poll_s": 0.1},
    }
    for section, values in sections.items():
        data[section] = {**data.get(section, {}), **values}
    write_atomically(path, yaml.safe_dump(data))


def write_atomically(path: Path, text: str) -> None:
    # Through a temporary file and a rename, as editors and ConfigMap updates do.
    tmp_file = path.with_suffix(".tmp")
    tmp_file.write_text(text)
    tmp_file.replace(path)


@pytest.fixture
def reloading(tmp_path: Path) -> Iterator[tuple[LiveServer, Path, Engine, FastAPI]]:
    path = tmp_path / "ragmend.yaml"
    write_config(path, tmp_path)
    settings = load_settings(path)
    eng = Engine(settings)
    app = create_app(settings, engine=eng, load_on_start=False, config_path=path)
    with LiveServer(app) as live:
        yield live, path, eng, app
    eng.close()


def admin_get(url: str, key: str = ADMIN_KEY) -> httpx.Response:
    return httpx.get(url + "/admin/policy", headers={"Authorization": f"Bearer {key}"})


def alpha(url: str, key: str = ADMIN_KEY) -> float:
    r = admin_get(url, key)
    assert r.status_code == 200, r.text
    return float(r.json()["alpha"])


def metrics(url: str, key: str = ADMIN_KEY) -> str:
    """/metrics, read with an admin key (a server with keys serves it to keys only)."""
    r = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return r.text


def counted(url: str, source: str, result: str, key: str = ADMIN_KEY) -> float:
    return value(metrics(url, key), "ragmend_config_changes_total", source=source, result=result)


def test_hot_reload_on_file_change(
    reloading: tuple[LiveServer, Path, Engine, FastAPI], caplog: pytest.LogCaptureFixture
) -> None:
    live, path, eng, _ = reloading
    caplog.set_level(logging.INFO)
    url, tmp = live.url, path.parent
    assert alpha(url) == 2.0
    write_config(path, tmp, policy={"alpha": 0.5, "budget_scale": 0.7}, rag={"k": 9})
    until(lambda: alpha(url) == 0.5)
    assert eng.settings.policy.budget_scale == 0.7 and eng.settings.rag.k == 5  # rag.k needs a restart
    assert counted(url, "file", "ok") == 1
    text = metrics(url)
    assert value(text, "ragmend_config_reloads_total", result="success") == 1
    assert value(text, "ragmend_policy_budget_scale") == pytest.approx(0.7)  # settings stand in: not loaded
    assert "rag.k" in caplog.text and "need a restart" in caplog.text

    # A broken file: logged, counted, the running configuration kept; reported once, not per poll.
    write_atomically(path, "policy: [unclosed\n  alpha: 0.1\n")
    until(lambda: counted(url, "file", "error") == 1)
    time.sleep(0.5)  # several polls
    assert counted(url, "file", "error") == 1 and alpha(url) == 0.5
    assert "not valid YAML" in caplog.text and "the running one is kept" in caplog.text
    # An invalid value: the key is named.
    write_config(path, tmp, policy={"alpha": -3})
    until(lambda: counted(url, "file", "error") == 2)
    assert alpha(url) == 0.5 and "policy.alpha" in caplog.text
    assert value(metrics(url), "ragmend_config_reloads_total", result="failure") == 2

    # A good file again, with the admin key rotated: the new key works, the old one is refused.
    write_config(path, tmp, policy={"alpha": 1.5}, server={"admin_keys": [NEW_ADMIN_KEY]})
    until(lambda: admin_get(url).status_code == 401)
    assert alpha(url, NEW_ADMIN_KEY) == 1.5 and counted(url, "file", "ok", NEW_ADMIN_KEY) == 2
    config = httpx.get(url + "/admin/config", headers={"Authorization": f"Bearer {NEW_ADMIN_KEY}"})
    assert config.status_code == 200 and config.json()["config_file"] == str(path)
    for key in (ADMIN_KEY, NEW_ADMIN_KEY):
        assert key not in caplog.text and key not in config.text

    # A file that drops every key would open the API: refused, the running keys kept.
    write_config(path, tmp, policy={"alpha": 1.0}, server={"admin_keys": []})
    until(lambda: counted(url, "file", "error", NEW_ADMIN_KEY) == 3)
    assert alpha(url, NEW_ADMIN_KEY) == 1.5 and "drops every key" in caplog.text


def test_reload_never_drops_a_request(reloading: tuple[LiveServer, Path, Engine, FastAPI]) -> None:
    live, path, _, app = reloading
    reloader: ConfigReloader = app.state.reloader
    seen: list[Any] = []
    stop = threading.Event()

    def client() -> None:
        with httpx.Client() as c:
            while not stop.is_set():
                admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
                r = c.get(live.url + "/admin/policy", headers=admin)
                seen.append((r.status_code, r.json().get("alpha")))
                seen.append((c.get(live.url + "/metrics", headers=admin).status_code, None))

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    # Reload at least 20 times and until the clients have made 40 calls, so requests really do
    # overlap reloads however fast either side runs on the machine at hand.
    deadline = time.monotonic() + 120
    reloads = 0
    try:
        while reloads < 20 or len(seen) < 40:
            write_config(path, path.parent, policy={"alpha": 0.25 if reloads % 2 else 0.75})
            assert reloader.reload().ok
            reloads += 1
            assert time.monotonic() < deadline, f"{len(seen)} calls in {reloads} reloads"
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert len(seen) >= 40
    assert all(status == 200 for status, _ in seen)
    assert {a for _, a in seen if a is not None} <= {2.0, 0.25, 0.75}


def test_reload_on_sighup(tmp_path: Path) -> None:
    path = tmp_path / "ragmend.yaml"
    # A poll so long that only the signal can trigger the reload within the test.
    write_config(path, tmp_path, server={"reload_poll_s": 3600})
    settings = load_settings(path)
    eng = Engine(settings)
    app = create_app(settings, engine=eng, load_on_start=False, config_path=path)
    reloader: ConfigReloader = app.state.reloader
    with LiveServer(app) as live:
        # The lifespan ran in the server's thread, so it could not take SIGHUP: this thread (the
        # main one) installs the same handler, as `ragmend serve`'s lifespan does.
        previous = signal.getsignal(signal.SIGHUP)
        assert reloader.install_sighup()
        try:
            write_config(path, tmp_path, policy={"alpha": 0.25}, server={"reload_poll_s": 3600})
            os.kill(os.getpid(), signal.SIGHUP)
            until(lambda: alpha(live.url) == 0.25)
            assert counted(live.url, "signal", "ok") == 1 and counted(live.url, "file", "ok") == 0
            assert reloader.last is not None and reloader.last.applied == ("policy.alpha",)
        finally:
            reloader.uninstall_sighup()
        assert signal.getsignal(signal.SIGHUP) == previous
    eng.close()


def test_overrides_of_the_command_line_keep_winning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "ragmend.yaml"
    write_config(path, tmp_path, rag={"k": 3})
    overrides: dict[str, Any] = {"rag": {"k": 7}}
    settings: Settings = load_settings(path, **overrides)
    eng = Engine(settings)
    app = create_app(settings, engine=eng, load_on_start=False, config_path=path, config_overrides=overrides)
    reloader: ConfigReloader = app.state.reloader
    write_config(path, tmp_path, rag={"k": 4}, policy={"learn": False})
    with caplog.at_level(logging.WARNING):
        result = reloader.reload()
    assert result.ok and result.applied == ("policy.learn",) and result.source == "file"
    assert eng.settings.rag.k == 7 and not eng.policy.learn
    assert "rag.k" not in caplog.text  # the override still wins: nothing changed there
    eng.close()
