"""Two `ragmend serve` processes on loopback sharing one PostgreSQL (pgserver's, with pgvector):
what one ingests the other answers from, what one learns the other selects with within the
staleness bound, and killing one with SIGKILL under load loses no acknowledged update while the
other keeps answering.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from ragmend.bench.speed.startup import free_port, wait_ready
from ragmend.engine import Engine
from ragmend.policy.pgstore import PostgresStore
from tests.conftest import REPO

NEW_DOC = {
    "id": "Quillbury Lantern Fair",
    "title": "Quillbury Lantern Fair",
    "text": "The Quillbury Lantern Fair is held every October on the shores of Lake Venmoor.",
}
ADMIN = {"Authorization": "Bearer replica-admin-key"}  # the admin endpoints need a key
UNANSWERABLE = "What is the name of the dragon that lives under the royal castle of Wawel?"


class Replica:
    def __init__(self, name: str, config: Path, log: Path):
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ragmend.cli",
                    "--config",
                    str(config),
                    "serve",
                    "--port",
                    str(self.port),
                ],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.log = log

    def pulls(self) -> dict[str, int]:
        view = httpx.get(self.url + "/admin/policy", headers=ADMIN, timeout=60).json()
        return {arm: a["pulls"] for arm, a in view["arms"].items()}

    def plan_pulls(self) -> dict[str, float]:
        """The router's learned updates per plan, as this replica's metrics read them."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(self.url + "/metrics", headers=ADMIN, timeout=60).text
        return {
            s.labels["plan"]: s.value
            for f in text_string_to_metric_families(text)
            if f.name == "ragmend_router_plan_pulls"
            for s in f.samples
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def replicas(
    dsn: str, engine: Engine, small_corpus: Path, tmp_path: Path
) -> Iterator[tuple[Replica, Replica, Path]]:
    """A and B over one database; each its own data_dir (its graph off: shared state only)."""
    corpus = tmp_path / "corpus.jsonl"
    shutil.copy(small_corpus, corpus)
    started: list[Replica] = []
    try:
        for name in ("a", "b"):
            config = {
                "data_dir": str(tmp_path / name),
                "cache_dir": str(engine.settings.cache_dir),
                "sources": [str(corpus)],
                "models": {
                    "generator": {"profile": "tiny", "max_tokens": 24},
                    "escalation": {"profile": "tiny", "max_tokens": 24},
                },
                "kg": {"enabled": False},
                "store": {"kind": "postgres", "dsn": dsn, "max_staleness_s": 1.0},
                "policy": {"latency_budget_s": 120.0, "request_latency_budget_s": 600.0, "seed": 1},
                "server": {"admin_keys": [ADMIN["Authorization"].removeprefix("Bearer ")]},
            }
            path = tmp_path / f"{name}.yaml"
            path.write_text(yaml.safe_dump(config))
            replica = Replica(name, path, tmp_path / f"{name}.log")
            started.append(replica)
            # A builds the shared index at its start; B starts on it (one writer at a time).
            wait_ready(replica.port, replica.proc, timeout_s=600)
        yield started[0], started[1], corpus
    finally:
        for r in started:
            r.stop()


def test_two_replicas_share_the_index_and_the_policy(
    replicas: tuple[Replica, Replica, Path], dsn: str
) -> None:
    a, b, corpus = replicas
    # A document ingested through A (its index refresh re-reads the sources) is answered by B.
    with corpus.open("a") as f:
        f.write(json.dumps(NEW_DOC) + "\n")
    refreshed = httpx.post(a.url + "/admin/index/refresh", headers=ADMIN, timeout=600)
    assert refreshed.status_code == 200, refreshed.text
    answer = httpx.post(
        b.url + "/v1/answer",
        json={"query": "Where is the Quillbury Lantern Fair held?"},
        headers=ADMIN,
        timeout=600,
    ).json()
    assert NEW_DOC["title"] in [p["title"] for p in answer["evidence"]], answer["evidence"]

    # Repairs learned on A reach B's statistics within the bound (1 s).
    before = b.pulls()
    learned = 0
    for _ in range(3):
        out = httpx.post(
            a.url + "/v1/answer", json={"query": UNANSWERABLE}, headers=ADMIN, timeout=600
        ).json()
        learned += bool(out.get("repair") and out["repair"].get("learned"))
    assert learned >= 1, "no repair was learned on A"
    time.sleep(1.2)
    after = b.pulls()
    assert sum(after.values()) - sum(before.values()) == learned
    assert after == a.pulls()
    # The router's too: every first pass A routed is one update B reads (namespace default/router).
    routed = a.plan_pulls()
    assert sum(routed.values()) >= 3 and b.plan_pulls() == routed

    # A killed with SIGKILL under load: every update it acknowledged (a response that says the
    # repair was learned) is in the database; B keeps answering.
    acked: list[bool] = []

    def load() -> None:
        for _ in range(6):
            try:
                r = httpx.post(a.url + "/v1/answer", json={"query": UNANSWERABLE}, headers=ADMIN, timeout=600)
            except httpx.TransportError:
                return  # A is gone
            acked.append(bool(r.json().get("repair", {}).get("learned")))

    workers = [threading.Thread(target=load) for _ in range(3)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 600
    while sum(acked) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=30)
    for w in workers:
        w.join(timeout=60)
    store = PostgresStore(dsn)
    stored = sum(arm.pulls for arm in store.export_state().arms.values())
    store.close()
    # What A acknowledged is stored; at most the three in flight when it died may have committed
    # without their answer reaching the client.
    assert sum(after.values()) + sum(acked) <= stored <= sum(after.values()) + sum(acked) + 3
    still = httpx.post(b.url + "/v1/answer", json={"query": UNANSWERABLE}, headers=ADMIN, timeout=600)
    assert still.status_code == 200, still.text
