"""Graceful shutdown of a real `ragmend serve` process: SIGTERM during a slow request (one with a
repair, which writes the policy's SQLite state) lets the request finish with 200, refuses new
connections, closes the engine, exits 0, and leaves the policy file consistent."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ragmend.bench.speed.startup import free_port, wait_ready
from ragmend.engine import Engine
from ragmend.engine.engine import open_policy
from ragmend.settings import load_settings
from tests.conftest import REPO
from tests.test_metrics import value

UNANSWERABLE = "What is the name of the dragon that lives under the royal castle of Wawel?"


def test_sigterm_lets_the_request_in_flight_finish_then_exits_0(
    tmp_path: Path, engine: Engine, small_corpus: Path
) -> None:
    s = engine.settings
    state = tmp_path / "policy.sqlite"
    # The session engine's index (already built) and models configuration; its own policy state.
    config = {
        "data_dir": str(s.data_dir),
        "cache_dir": str(s.cache_dir),
        "sources": [str(small_corpus)],
        # The stronger generator tiny too, as in the session engine: the default would load the 1.5B.
        "models": {
            "generator": {"profile": "tiny", "max_tokens": 48},
            "escalation": {"profile": "tiny", "max_tokens": 48},
        },
        "policy": {
            "latency_budget_s": 120.0,
            "request_latency_budget_s": 600.0,
            "seed": 1,
            "state_path": str(state),
        },
        "server": {"shutdown_timeout_s": 120},
    }
    path = tmp_path / "ragmend.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragmend.cli", "--config", str(path), "serve", "--port", str(port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(port, proc, timeout_s=600)
        result: dict[str, httpx.Response] = {}

        def ask() -> None:
            result["r"] = httpx.post(url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=600)

        asker = threading.Thread(target=ask)
        asker.start()
        deadline = time.monotonic() + 60
        while value(httpx.get(url + "/metrics").text, "ragmend_requests_in_flight") != 1:
            assert time.monotonic() < deadline, "the request never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert proc.poll() is None, "the process exited with a request in flight"
        with pytest.raises(httpx.TransportError):  # no new connection is accepted
            httpx.get(url + "/healthz", timeout=2)
        asker.join(timeout=600)
        assert proc.wait(timeout=180) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    r = result["r"]
    assert r.status_code == 200, r.text
    repair = r.json()["repair"]
    assert repair["learned"] is True, repair  # the policy's state was written during shutdown
    text = log.read_text()
    assert "Waiting for connections to close" in text or "Shutting down" in text
    assert "engine closed" in text, text

    # The state file: checkpointed and closed (no WAL left), intact, and holding the update.
    assert state.exists() and not Path(str(state) + "-wal").exists()
    with sqlite3.connect(state) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    policy = open_policy(load_settings(path))
    try:
        assert policy.stats()[repair["action"]].pulls == 1
    finally:
        policy.close()
