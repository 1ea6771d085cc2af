"""`ragmend bench scale`: ragmend's own cost per request apart from the generator, to size replicas.

The generator is a FIXED-DELAY STAND-IN (`StandInGenerator`, named so everywhere it shows): an
OpenAI-compatible endpoint in this process that waits a fixed time, then answers with the first
sentence of the first passage of the prompt (so most answers are supported, as a real engine's
mostly are). It stands in for a GPU engine (vLLM, TGI) on another host, which this machine does
not have; ragmend reaches it through litellm exactly as it would reach the real one.

For each configuration (backend files | postgres, 1 | 2 replicas) it starts the replicas
(`ragmend serve`, generator pointed at the stand-in; with postgres, every replica on one
database: pgserver's, started here, or --dsn), sends `requests` /v1/answer requests from
`clients` concurrent clients spread round-robin over the replicas (the load balancer's job),
and reports per configuration:
  own_p50_s, own_p99_s  ragmend's own seconds per request: the engine's time for the request
                        minus its time in generator calls (retrieval, reranking, diagnosis,
                        policy, store round trips, and CPU contention between requests)
  rps, rps_per_replica  answers (HTTP 200) per second of wall time
  p50_s, p99_s          client-side latency
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
import yaml
from fastapi import FastAPI, Request

from ragmend import pg
from ragmend.bench.speed.load import load_questions
from ragmend.bench.speed.startup import free_port, start_server, stop, wait_ready
from ragmend.errors import InputError

STAND_IN = "fixed-delay-stand-in"


def stand_in_app(delay_s: float) -> FastAPI:
    """The FIXED-DELAY STAND-IN generator: /v1/chat/completions after `delay_s` seconds."""
    app = FastAPI(title="fixed-delay stand-in generator (not a model)")
    calls = itertools.count(1)

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        await asyncio.sleep(delay_s)
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        m = re.search(r"\[1\][^:\n]*:\s*(.+?[.!?])(\s|$)", prompt)
        text = m.group(1) if m else "I don't know."
        return {
            "id": f"standin-{next(calls)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": STAND_IN,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": len(text.split()),
                "total_tokens": len(prompt.split()) + len(text.split()),
            },
        }

    return app


@contextlib.contextmanager
def stand_in(delay_s: float) -> Iterator[str]:
    """The stand-in served on a free loopback port; yields its /v1 base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(stand_in_app(delay_s), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the stand-in generator did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def postgres(dsn: str | None, workdir: Path) -> Iterator[str]:
    """The given database, or a pgserver PostgreSQL in `workdir` for the run."""
    server = None
    if dsn is None:
        try:
            import pgserver
        except ImportError as e:
            raise InputError(
                "the postgres backend needs --dsn or the pgserver wheel (pip install pgserver)"
            ) from e
        server = pgserver.get_server(workdir / "pgdata", cleanup_mode="stop")
        dsn = server.get_uri()
    try:
        yield dsn
    finally:
        if server is not None:
            server.cleanup()


def _start(config: dict[str, Any], path: Path, log: Callable[[str], None]) -> tuple[str, Any]:
    """One replica: `config` written to `path`, `ragmend serve` on a free loopback port, ready."""
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    proc = start_server(path, {}, port)
    log(f"  replica {path.stem} on 127.0.0.1:{port}: ready after {wait_ready(port, proc):.1f} s")
    return f"http://127.0.0.1:{port}", proc


async def _drive(
    urls: list[str], questions: list[str], clients: int, requests: int
) -> tuple[list[dict], float]:
    counter = itertools.count()
    rows: list[dict] = []
    t0 = time.monotonic()

    async def client(http: httpx.AsyncClient) -> None:
        while (i := next(counter)) < requests:
            started = time.monotonic()
            try:
                r = await http.post(
                    urls[i % len(urls)] + "/v1/answer", json={"query": questions[i % len(questions)]}
                )
            except httpx.HTTPError as e:
                rows.append({"status": None, "error": type(e).__name__})
                continue
            row: dict[str, Any] = {"status": r.status_code, "latency_s": time.monotonic() - started}
            if r.status_code != 200:
                row["error"] = r.text[:300]
            if r.status_code == 200:
                body = r.json()
                row["own_s"] = float(body.get("seconds") or 0.0) - float(body.get("generator_seconds") or 0.0)
                row["repaired"] = bool((body.get("repair") or {}).get("decision"))
            rows.append(row)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return rows, time.monotonic() - t0


def _summary(rows: list[dict], wall_s: float, replicas: int) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == 200]
    own = np.asarray([r["own_s"] for r in ok]) if ok else np.zeros(0)
    lat = np.asarray([r["latency_s"] for r in ok]) if ok else np.zeros(0)

    def q(a: np.ndarray, p: float) -> float | None:
        return round(float(np.percentile(a, p)), 4) if len(a) else None

    rps = len(ok) / wall_s if wall_s > 0 else 0.0
    return {
        "ok": len(ok),
        "errors": len(rows) - len(ok),
        "own_p50_s": q(own, 50),
        "own_p99_s": q(own, 99),
        "p50_s": q(lat, 50),
        "p99_s": q(lat, 99),
        "rps": round(rps, 3),
        "rps_per_replica": round(rps / replicas, 3),
        "repairs": sum(r.get("repaired", False) for r in ok),
        "first_error": next((r.get("error") for r in rows if r["status"] != 200), None),
        "wall_s": round(wall_s, 2),
    }


def _clear_policy(dsn: str) -> None:
    """Every configuration starts with an empty policy (the index is kept: it is the same)."""
    conn = pg.connect(dsn)
    try:
        with conn.transaction():
            conn.execute("DELETE FROM ragmend_policy_arms")
            conn.execute("DELETE FROM ragmend_policy_meta")
    finally:
        conn.close()


def _seed_data_dir(template: Path | None, data_dir: Path) -> None:
    """A replica's data_dir from a stopped replica's (its index and graph, no policy state), so
    only the first replica of a backend spends minutes building them."""
    if template is not None and template.exists():
        shutil.copytree(template, data_dir, ignore=shutil.ignore_patterns("policy.sqlite*"))


def run_scale_bench(
    base: dict[str, Any],
    *,
    backends: list[str],
    replica_counts: list[int],
    clients: int,
    requests: int,
    delay_s: float,
    dsn: str | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every (backend, replicas) configuration, one after the other, on the same questions."""
    for b in backends:
        if b not in ("files", "postgres"):
            raise InputError(f"--backends: files or postgres, not {b!r}")
    questions = load_questions()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ragmend-scale-") as tmp, stand_in(delay_s) as generator_url:
        work = Path(tmp)
        pg_cm = postgres(dsn, work) if "postgres" in backends else contextlib.nullcontext(None)
        with pg_cm as server_dsn:
            database = pg.create_database(server_dsn, "ragmend_scale", replace=True) if server_dsn else None
            templates: dict[str, Path] = {}
            for backend, n in itertools.product(backends, replica_counts):
                name = f"{backend}-x{n}"
                log(f"{name}: starting {n} replica(s)")
                store: dict[str, Any] = {"kind": "files"}
                if backend == "postgres":
                    assert database is not None
                    _clear_policy(database)
                    store = {"kind": "postgres", "dsn": database}
                procs = []
                try:
                    urls = []
                    for i in range(n):
                        data_dir = work / name / f"r{i}"
                        _seed_data_dir(templates.get(backend), data_dir)
                        config = {
                            **base,
                            "data_dir": str(data_dir),
                            "models": {
                                **base.get("models", {}),
                                "generator": {
                                    "model": f"openai/{STAND_IN}",
                                    "api_base": generator_url,
                                    "api_key": "none",
                                    "logprobs": False,
                                },
                            },
                            "store": store,
                        }
                        url, proc = _start(config, work / f"{name}-r{i}.yaml", log)
                        urls.append(url)
                        procs.append(proc)
                    rows, wall = asyncio.run(_drive(urls, questions, clients, requests))
                finally:
                    for proc in procs:
                        stop(proc)
                templates.setdefault(backend, work / name / "r0")
                results[name] = {"backend": backend, "replicas": n, **_summary(rows, wall, n)}
                log(f"{name}: {json.dumps(results[name])}")
    return {
        "generator": f"{STAND_IN} ({delay_s * 1000:.0f} ms, in the benchmark process: not a model)",
        "clients": clients,
        "requests": requests,
        "cpu_count": os.cpu_count(),
        "configurations": results,
    }
