"""`ragmend bench load`: N concurrent clients send M answer requests in all to a loopback server.

Loopback only, bounded in count (at most MAX_CLIENTS clients and MAX_REQUESTS requests) and in
time (each request times out after --timeout-s; no request starts after --max-wall-s). Without
--url it starts its own `ragmend serve` on a free loopback port with the current configuration
and stops it afterwards (SIGTERM, a graceful shutdown).

Figures (docs/benchmarks.md, "Load"):
  throughput_rps   answers (HTTP 200) per second of wall time
  p50_s, p99_s     client-side latency of the answers (queue wait and HTTP included)
  overhead_share   ragmend's own share of the server-side time of the answers:
                   sum(seconds - generator_seconds) / sum(seconds), where `seconds` is the
                   engine's time for the request (first pass, diagnosis, repair; from the worker
                   thread's start, so the wait for an admission slot is not in it) and
                   `generator_seconds` the time in generator calls (first pass, rewrites, repair
                   pass; the wait for the in-process model's lock included: with one llama.cpp
                   context generation is serial, and that wait is the generator's capacity, not
                   ragmend's work). What is left is retrieval, reranking, diagnosis (NLI, KG
                   alignment, EGC), the policy, and the contention for CPU between them.
  overhead_s_per_wall_s  the same overhead seconds per second of wall time (above 1 when
                   several requests do non-generator work at once)
  queue_share      sum(latency - seconds) / sum(latency): the time the answers spent waiting
                   for a slot and in HTTP, as a share of their client-side latency
  rss_*_bytes      the server process's VmRSS (and VmHWM, the peak) from /proc/<pid>/status:
                   for a server this command started, or, with --url, the process listening on
                   that port when this machine's /proc shows it (else null)
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from ragmend.bench.speed.startup import free_port, start_server, stop, wait_ready
from ragmend.errors import InputError
from ragmend.rag.documents import BUNDLED_CORPUS

MAX_CLIENTS = 256
MAX_REQUESTS = 10_000
# Beside the bundled corpus (rag/data/), found through the rag package wherever it is installed.
QUESTIONS = BUNDLED_CORPUS.with_name("sample_questions.jsonl")


@dataclass(frozen=True, kw_only=True)
class Result:
    status: int | None  # None: no HTTP response (timeout, connection error)
    latency_s: float
    seconds: float = 0.0  # the engine's time (AnswerResponse.seconds)
    generator_seconds: float = 0.0
    repaired: bool = False  # a repair pass ran to the end
    repair_timed_out: bool = False
    error: str | None = None


def loopback_url(url: str) -> str:
    """`url` without a trailing slash, if it is http(s) on a loopback host; InputError otherwise."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme not in ("http", "https") or not loopback:
        raise InputError(
            f"--url {url!r}: only a loopback server (127.0.0.0/8, ::1, localhost) may be load-tested"
        )
    return url.rstrip("/")


def load_questions(path: Path = QUESTIONS) -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["question"] for r in rows]


def proc_status(pid: int | None, field: str) -> int | None:
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM) in bytes; None if unreadable."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def pid_listening_on(port: int) -> int | None:
    """The process listening on a local TCP port, from /proc (Linux); None where not visible."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
            except OSError:
                continue
    return None


async def drive(
    url: str,
    questions: list[str],
    clients: int,
    requests: int,
    timeout_s: float,
    max_wall_s: float,
    on_result: Callable[[int], None] = lambda done: None,
) -> tuple[list[Result], float]:
    """`clients` concurrent loops sending `requests` questions in all; (results, wall seconds).
    `on_result(n)` is called after each of the n results."""
    counter = itertools.count()
    results: list[Result] = []
    t0 = time.monotonic()

    def record(result: Result) -> None:
        results.append(result)
        on_result(len(results))

    async def client(http: httpx.AsyncClient) -> None:
        while (i := next(counter)) < requests and time.monotonic() - t0 < max_wall_s:
            started = time.monotonic()
            try:
                r = await http.post(url + "/v1/answer", json={"query": questions[i % len(questions)]})
            except httpx.HTTPError as e:
                record(Result(status=None, latency_s=time.monotonic() - started, error=type(e).__name__))
                continue
            latency = time.monotonic() - started
            if r.status_code != 200:
                try:
                    # The ragmend class names the failure (Overloaded, RequestTimeout, ...); the
                    # OpenAI `type` is coarser (server_error for all of those).
                    error = r.json()["error"]
                    message = str(error.get("error_class") or error["type"])
                except (ValueError, KeyError, TypeError):
                    message = r.text[:200]
                record(Result(status=r.status_code, latency_s=latency, error=message))
                continue
            body = r.json()
            repair = body.get("repair") or {}
            record(
                Result(
                    status=200,
                    latency_s=latency,
                    seconds=float(body.get("seconds") or 0.0),
                    generator_seconds=float(body.get("generator_seconds") or 0.0),
                    repaired="action" in repair and "decision" in repair,
                    repair_timed_out=bool(repair.get("timed_out")),
                )
            )

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return results, time.monotonic() - t0


def summarize(results: list[Result], wall_s: float) -> dict[str, Any]:
    ok = [r for r in results if r.status == 200]
    latencies = np.asarray([r.latency_s for r in ok], dtype=np.float64)
    seconds = sum(r.seconds for r in ok)
    generator = sum(r.generator_seconds for r in ok)
    overhead = seconds - generator
    latency_sum = float(latencies.sum()) if len(latencies) else 0.0
    statuses = Counter("transport" if r.status is None else str(r.status) for r in results)
    return {
        "completed": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "status_counts": dict(sorted(statuses.items())),
        "error_types": dict(Counter(r.error for r in results if r.error)),
        "wall_s": round(wall_s, 3),
        "throughput_rps": round(len(ok) / wall_s, 4) if wall_s > 0 else 0.0,
        "p50_s": round(float(np.percentile(latencies, 50)), 3) if len(latencies) else None,
        "p99_s": round(float(np.percentile(latencies, 99)), 3) if len(latencies) else None,
        "mean_s": round(float(latencies.mean()), 3) if len(latencies) else None,
        "overhead_share": round(overhead / seconds, 4) if seconds > 0 else None,
        "overhead_s_per_wall_s": round(overhead / wall_s, 4) if wall_s > 0 else None,
        "queue_share": round((latency_sum - seconds) / latency_sum, 4) if latency_sum > 0 else None,
        "server_seconds": round(seconds, 3),
        "generator_seconds": round(generator, 3),
        "overhead_seconds": round(overhead, 3),
        "repairs": sum(r.repaired for r in ok),
        "repairs_timed_out": sum(r.repair_timed_out for r in ok),
    }


@contextmanager
def served(
    config: Path | None, overrides: dict[str, Any], url: str | None, log: Callable[[str], None]
) -> Iterator[tuple[str, subprocess.Popen[bytes] | None]]:
    """The server a benchmark talks to: the one at `url` (loopback only, ready), or without it a
    `ragmend serve` this starts on a free port with the current configuration, waits for, and
    stops afterwards. Yields (base URL, the started process or None)."""
    if url is not None:
        base = loopback_url(url)
        if httpx.get(base + "/readyz", timeout=10).status_code != 200:
            raise InputError(f"{base}/readyz is not 200: the server is not ready")
        yield base, None
        return
    port = free_port()
    log(f"starting ragmend serve on 127.0.0.1:{port}")
    proc = start_server(config, overrides, port)
    try:
        log(f"ready after {wait_ready(port, proc):.1f} s")
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)


def run_load_bench(
    config: Path | None,
    overrides: dict[str, Any],
    *,
    clients: int,
    requests: int,
    url: str | None = None,
    timeout_s: float = 600.0,
    max_wall_s: float = 3600.0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    if not 1 <= clients <= MAX_CLIENTS:
        raise InputError(f"--clients must be between 1 and {MAX_CLIENTS}")
    if not 1 <= requests <= MAX_REQUESTS:
        raise InputError(f"--requests must be between 1 and {MAX_REQUESTS}")
    questions = load_questions()
    with served(config, overrides, url, log) as (base, proc):
        port = urlsplit(base).port or (443 if base.startswith("https") else 80)
        pid = proc.pid if proc is not None else pid_listening_on(port)
        rss_start = proc_status(pid, "VmRSS")
        load_start = os.getloadavg()
        # RSS after each quarter of the requests: growth that stops after the first answers (model
        # buffers, caches) is bounded; growth to the end would be a leak.
        rss_by_quarter: dict[str, int | None] = {}

        def sample(done: int) -> None:
            quarter = f"{100 * (4 * done // requests) // 4}%"
            if done * 4 >= requests and quarter not in rss_by_quarter:
                rss_by_quarter[quarter] = proc_status(pid, "VmRSS")

        log(f"{clients} clients, {requests} requests")
        results, wall_s = asyncio.run(
            drive(base, questions, clients, requests, timeout_s, max_wall_s, on_result=sample)
        )
        rss_end, rss_peak = proc_status(pid, "VmRSS"), proc_status(pid, "VmHWM")
        load_end = os.getloadavg()
    summary = summarize(results, wall_s)
    log(
        f"{summary['ok']}/{requests} answered in {wall_s:.1f} s: {summary['throughput_rps']} rps, "
        f"p50 {summary['p50_s']} s, p99 {summary['p99_s']} s, overhead {summary['overhead_share']}"
    )
    return {
        "clients": clients,
        "requests": requests,
        "errors": summary.pop("errors") + requests - summary["completed"],  # unsent ones too
        "throughput_rps": summary.pop("throughput_rps"),
        "p50_s": summary.pop("p50_s"),
        "p99_s": summary.pop("p99_s"),
        "overhead_share": summary.pop("overhead_share"),
        "rss_start_bytes": rss_start,
        "rss_end_bytes": rss_end,
        **summary,
        "rss_peak_bytes": rss_peak,
        "rss_by_progress_bytes": rss_by_quarter,
        "server": "started" if proc is not None else "given",
        "server_pid": pid,
        "url": base,
        "timeout_s": timeout_s,
        "cpu_count": os.cpu_count(),
        "loadavg_1m_start": round(load_start[0], 2),
        "loadavg_1m_end": round(load_end[0], 2),
    }
