"""`ragmend bench load --sweep 1,2,4`: the server under 1x, 2x and 4x the load it can serve.

First one client alone: `--single-requests` questions one after the other, its answers per second
(`one_client_rps`: what the server does for one user, the yardstick of the phases; it also warms
the server up). Then the capacity: `--capacity-requests` questions from as many closed-loop
clients as the server has slots (server.max_concurrency), answers per second of wall time (RSS is
read after it). Then, for each factor k, an open loop: requests arrive at
k x capacity per second (Poisson arrivals, seeded) for `--phase-s` seconds, each with the deadline
`--deadline-s` sent as X-Request-Timeout, whatever the server does with the earlier ones; the
phase ends when its last request has its response.

Per phase (docs/benchmarks.md, "Overload"):
  goodput_rps          answers within the deadline per second, from the phase's first arrival
                       to its last response
  goodput_vs_1x        goodput over the 1x phase's
  goodput_vs_one_client  goodput over one client's alone (a capacity measured under contention
                       would hide a server that does less work together than apart)
  wasted_share         generator seconds whose answer nobody received (cancelled or abandoned
                       work) over all the generator seconds spent for requests, from the
                       server's ragmend_generator_request_seconds_total
  refused_share        503s over requests sent; refused_before_work: how many of them the
                       server counted as refused before any model work
                       (ragmend_requests_refused_total), retry_after_missing: 503s without it
  other_5xx            5xx answers other than those 503s (504s included)
  p99_s                client-side latency of the answers
and over the run: RSS after the capacity phase and after the sweep.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from ragmend.bench.speed.load import drive, load_questions, pid_listening_on, proc_status, served
from ragmend.errors import InputError


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: no HTTP response (client timeout, connection error)
    latency_s: float
    retry_after: bool = False


def scrape(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The server's /metrics as {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    text = httpx.get(base + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def delta(before: dict[Any, float], after: dict[Any, float], name: str, **labels: str) -> float:
    """The change of one series (summed over the labels not given)."""
    wanted = set(labels.items())

    def total(metrics: dict[Any, float]) -> float:
        return sum(v for (n, ls), v in metrics.items() if n == name and wanted <= set(ls))

    return total(after) - total(before)


async def open_loop(
    base: str, questions: list[str], rate: float, duration_s: float, deadline_s: float, seed: int
) -> tuple[list[Reply], float]:
    """Requests arriving at `rate` per second (Poisson) for `duration_s`; (replies, seconds from
    the first arrival to the last reply)."""
    rng = random.Random(seed)
    replies: list[Reply] = []
    headers = {"X-Request-Timeout": f"{deadline_s:g}"}

    async def one(http: httpx.AsyncClient, question: str) -> None:
        started = time.monotonic()
        try:
            r = await http.post(base + "/v1/answer", json={"query": question}, headers=headers)
        except httpx.HTTPError:
            replies.append(Reply(None, time.monotonic() - started))
            return
        replies.append(Reply(r.status_code, time.monotonic() - started, "retry-after" in r.headers))

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    # The client waits past the deadline: the server, not the client, must end each request.
    async with httpx.AsyncClient(timeout=deadline_s + 60, limits=limits) as http:
        t0 = time.monotonic()
        tasks = []
        at, i = 0.0, 0
        while at < duration_s:
            await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))
            tasks.append(asyncio.ensure_future(one(http, questions[i % len(questions)])))
            i += 1
            at += rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return replies, time.monotonic() - t0


def phase_summary(
    factor: float,
    rate: float,
    replies: list[Reply],
    wall_s: float,
    deadline_s: float,
    metrics: dict[str, float],
) -> dict[str, Any]:
    answered = [r for r in replies if r.status == 200]
    good = [r for r in answered if r.latency_s <= deadline_s]
    refused = [r for r in replies if r.status == 503]
    other_5xx = [r for r in replies if r.status is not None and r.status >= 500 and r.status != 503]
    latencies = np.asarray([r.latency_s for r in answered], dtype=np.float64)
    spent = metrics["answered_s"] + metrics["wasted_s"]
    return {
        "factor": factor,
        "offered_rps": round(rate, 4),
        "sent": len(replies),
        "answered": len(answered),
        "answered_within_deadline": len(good),
        "wall_s": round(wall_s, 1),
        "goodput_rps": round(len(good) / wall_s, 4) if wall_s > 0 else 0.0,
        "refused": len(refused),
        "refused_share": round(len(refused) / len(replies), 4) if replies else 0.0,
        "refused_before_work": int(metrics["refused"]),
        "retry_after_missing": sum(not r.retry_after for r in refused),
        "other_5xx": len(other_5xx),
        "other_status": sorted({r.status for r in replies if r.status not in (200, 503)}, key=str),
        "no_response": sum(r.status is None for r in replies),
        "p50_s": round(float(np.percentile(latencies, 50)), 3) if len(latencies) else None,
        "p99_s": round(float(np.percentile(latencies, 99)), 3) if len(latencies) else None,
        "generator_answered_s": round(metrics["answered_s"], 2),
        "generator_wasted_s": round(metrics["wasted_s"], 2),
        "wasted_share": round(metrics["wasted_s"] / spent, 4) if spent > 0 else 0.0,
        "cancelled": int(metrics["cancelled"]),
    }


def relative_goodput(phases: list[dict[str, Any]], one_client_rps: float) -> None:
    """Each phase's goodput over the 1x phase's (None without a 1x phase) and over one client's."""
    at_1x = next((p["goodput_rps"] for p in phases if p["factor"] == 1), None)
    for p in phases:
        p["goodput_vs_1x"] = round(p["goodput_rps"] / at_1x, 3) if at_1x else None
        p["goodput_vs_one_client"] = round(p["goodput_rps"] / one_client_rps, 3) if one_client_rps else None


def run_overload_sweep(
    config: Path | None,
    overrides: dict[str, Any],
    *,
    factors: list[float],
    phase_s: float,
    deadline_s: float,
    capacity_requests: int,
    capacity_clients: int,
    single_requests: int = 6,
    url: str | None = None,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    if not factors or min(factors) <= 0:
        raise InputError("--sweep: positive load factors, comma-separated (e.g. 1,2,4)")
    questions = load_questions()
    with served(config, overrides, url, log) as (base, proc):
        port = urlsplit(base).port or 80
        pid = proc.pid if proc is not None else pid_listening_on(port)
        log(f"one client: {single_requests} requests, one after the other")
        alone, alone_wall_s = asyncio.run(
            drive(base, questions, 1, single_requests, deadline_s + 600, 3600.0)
        )
        one_client = sum(r.status == 200 for r in alone) / alone_wall_s
        log(f"one client {one_client:.3f} answers/s")
        log(f"capacity: {capacity_requests} requests from {capacity_clients} clients")
        results, wall_s = asyncio.run(
            drive(base, questions, capacity_clients, capacity_requests, deadline_s + 600, 3600.0)
        )
        ok = sum(r.status == 200 for r in results)
        if ok == 0:
            raise InputError("the capacity phase got no answer: nothing to scale the sweep by")
        capacity = ok / wall_s
        rss_warm = proc_status(pid, "VmRSS")
        log(f"capacity {capacity:.3f} answers/s ({ok} in {wall_s:.1f} s); RSS {rss_warm}")
        phases = []
        for k, factor in enumerate(factors):
            rate = factor * capacity
            before = scrape(base)
            log(f"{factor:g}x: {rate:.3f} requests/s for {phase_s:g} s, deadline {deadline_s:g} s")
            # Each phase starts elsewhere in the questions.
            offset = (k + 1) * 7 % len(questions)
            asked = questions[offset:] + questions[:offset]
            replies, phase_wall = asyncio.run(open_loop(base, asked, rate, phase_s, deadline_s, seed + k))
            after = scrape(base)
            spent = "ragmend_generator_request_seconds_total"
            metrics = {
                "answered_s": delta(before, after, spent, outcome="answered"),
                "wasted_s": delta(before, after, spent, outcome="wasted"),
                "refused": delta(before, after, "ragmend_requests_refused_total"),
                "cancelled": delta(before, after, "ragmend_requests_cancelled_total"),
            }
            summary = phase_summary(factor, rate, replies, phase_wall, deadline_s, metrics)
            log(f"{factor:g}x: {summary}")
            phases.append(summary)
        rss_end = proc_status(pid, "VmRSS")
    relative_goodput(phases, one_client)
    return {
        "one_client_rps": round(one_client, 4),
        "one_client_phase": {"requests": single_requests, "wall_s": round(alone_wall_s, 1)},
        "capacity_rps": round(capacity, 4),
        "capacity_phase": {
            "requests": capacity_requests,
            "clients": capacity_clients,
            "wall_s": round(wall_s, 1),
        },
        "deadline_s": deadline_s,
        "phase_s": phase_s,
        "phases": phases,
        "rss_after_warmup_bytes": rss_warm,
        "rss_after_sweep_bytes": rss_end,
        "rss_growth": round(rss_end / rss_warm - 1, 4) if rss_warm and rss_end else None,
        "server": "started" if proc is not None else "given",
        "seed": seed,
    }
