"""The faults of `ragmend bench soak`, when they come, and how long the service takes to answer again.

Kinds:
  kill9        SIGKILL of one replica (the last), then its restart on the same port: the load
               balancer (the soak's traffic) skips it from the kill until its /readyz is 200
  pg_restart   PostgreSQL restarted (pg_ctl restart -m fast: every session cut), replicas running
  stream_drop  a client drops a streamed chat completion after its first tokens
  bad_reload   a replica's configuration file replaced by one that fails validation; the file is
               put back once the server has counted the refused reload
               (ragmend_config_changes_total{source="file",result="error"})

recovered_s: seconds from the fault (at_s) until every replica it touched answers a probe
(POST /v1/answer, sent after the fault's own action ended: the restart issued, the stream dropped,
the reload refused) with 200. A probe waits for a slot like any request, so under the soak's
traffic the figure includes that wait.

The schedule (seconds into a run of `duration_s`, W = min(600, duration/3) the goodput windows, S =
duration - min(2400, 2 x duration/3) the start of the RSS window): kill9 between the first goodput
window and S where there is room (runs over 30 minutes), so the restarted process is measured over
the whole RSS window; the others (and kill9 first, in shorter runs) evenly in
[max(W, S), duration - W], clear of both goodput windows. One fault at a time: a fault comes at
its time or when the one before has recovered, whichever is later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ragmend.bench.speed.overload import delta
from ragmend.bench.speed.soak_cluster import Cluster, bearer

Metrics = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(cluster: Cluster, url: str) -> Metrics:
    """A replica's /metrics as {(sample, labels): value}, read with the admin key (a server with
    keys protects its metrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", headers=bearer(cluster.keys.admin), timeout=30).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


FAULT_KINDS = ("kill9", "pg_restart", "stream_drop", "bad_reload")
NEEDS_POSTGRES = frozenset({"pg_restart"})
RECOVERY_TARGET_S = 30.0  # every replica answers again within this of a restart
RESTARTS = frozenset({"kill9", "pg_restart"})


def windows(duration_s: float) -> tuple[float, float]:
    """(W, S): the length of the first and last goodput windows, and where the RSS window starts."""
    w = min(600.0, duration_s / 3)
    s = duration_s - min(2400.0, 2 * duration_s / 3)
    return w, s


def schedule(duration_s: float, kinds: tuple[str, ...]) -> list[tuple[float, str]]:
    """(seconds into the run, kind) of each fault, in order."""
    w, s = windows(duration_s)
    lo, hi = max(w, s), duration_s - w
    first: list[tuple[float, str]] = []
    rest = list(kinds)
    if "kill9" in kinds and s > w:
        first, rest = [((w + s) / 2, "kill9")], [k for k in kinds if k != "kill9"]
    elif "kill9" in kinds:  # no room before the RSS window: the kill comes first in the middle
        rest = ["kill9", *(k for k in kinds if k != "kill9")]
    return first + [(lo + (i + 1) * (hi - lo) / (len(rest) + 1), kind) for i, kind in enumerate(rest)]


@dataclass
class FaultContext:
    """What a fault needs of the running soak."""

    cluster: Cluster
    http: httpx.AsyncClient
    now: Callable[[], float]  # seconds since the soak's start
    up: set[int]  # the replicas the traffic may use
    questions: list[str]
    recovery_timeout_s: float
    log: Callable[[str], None]
    rng: random.Random = field(default_factory=lambda: random.Random(7))


@dataclass
class Fault:
    kind: str
    at_s: float
    replica: str | None = None
    recovered_s: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at_s": round(self.at_s, 1),
            "recovered_s": None if self.recovered_s is None else round(self.recovered_s, 1),
            "replica": self.replica,
            **self.detail,
        }


async def probe(ctx: FaultContext, index: int, since: float) -> float | None:
    """Seconds from `since` until replica `index` answers a /v1/answer with 200; None past the
    recovery timeout."""
    replica = ctx.cluster.replicas[index]
    headers = bearer(ctx.cluster.keys.users[0])
    while ctx.now() - since < ctx.recovery_timeout_s:
        question = ctx.rng.choice(ctx.questions)
        with contextlib.suppress(httpx.HTTPError):
            r = await ctx.http.post(replica.url + "/v1/answer", json={"query": question}, headers=headers)
            if r.status_code == 200:
                return ctx.now() - since
        await asyncio.sleep(0.5)
    return None


async def all_answer(ctx: FaultContext, indexes: list[int], since: float) -> float | None:
    times = await asyncio.gather(*(probe(ctx, i, since) for i in indexes))
    return None if any(t is None for t in times) else max(t for t in times if t is not None)


async def kill9(ctx: FaultContext) -> Fault:
    index = len(ctx.cluster.replicas) - 1
    replica = ctx.cluster.replicas[index]
    ctx.up.discard(index)
    fault = Fault("kill9", ctx.now(), replica.name)
    old_pid = replica.pid
    await asyncio.to_thread(replica.kill9)
    try:
        ready_s = await asyncio.to_thread(replica.start_until_ready, ctx.recovery_timeout_s)
    except RuntimeError as e:
        fault.detail = {"error": str(e)}
        return fault
    ctx.up.add(index)
    fault.recovered_s = await probe(ctx, index, fault.at_s)
    fault.detail = {"killed_pid": old_pid, "new_pid": replica.pid, "ready_s": round(ready_s, 1)}
    return fault


async def pg_restart(ctx: FaultContext) -> Fault:
    postgres = ctx.cluster.postgres
    assert postgres is not None  # scheduled only with PostgreSQL
    fault = Fault("pg_restart", ctx.now())
    t0 = time.monotonic()
    await asyncio.to_thread(postgres.restart)
    fault.detail = {"restart_s": round(time.monotonic() - t0, 1)}
    fault.recovered_s = await all_answer(ctx, sorted(ctx.up), fault.at_s)
    return fault


async def stream_drop(ctx: FaultContext) -> Fault:
    index = min(ctx.up) if ctx.up else 0
    replica = ctx.cluster.replicas[index]
    before = await asyncio.to_thread(scrape, ctx.cluster, replica.url)
    fault = Fault("stream_drop", ctx.now(), replica.name)
    body = {
        "model": ctx.cluster.config(replica)["server"].get("model_name", "ragmend"),
        "stream": True,
        "messages": [{"role": "user", "content": ctx.rng.choice(ctx.questions)}],
    }
    chunks = 0
    try:
        async with ctx.http.stream(
            "POST",
            replica.url + "/v1/chat/completions",
            json=body,
            headers=bearer(ctx.cluster.keys.users[0]),
        ) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                delta_ = json.loads(line[6:])["choices"][0].get("delta", {})
                chunks += 1
                if delta_.get("content"):
                    break  # leaving the block closes the connection mid-stream
    except httpx.HTTPError as e:
        fault.detail["error"] = type(e).__name__
    fault.recovered_s = await probe(ctx, index, fault.at_s)
    after = await asyncio.to_thread(scrape, ctx.cluster, replica.url)
    fault.detail.update(
        chunks_read=chunks,
        cancelled=int(delta(before, after, "ragmend_requests_cancelled_total", reason="disconnect")),
    )
    return fault


async def bad_reload(ctx: FaultContext) -> Fault:
    index = min(ctx.up) if ctx.up else 0
    replica = ctx.cluster.replicas[index]
    refused = "ragmend_config_changes_total"
    before = await asyncio.to_thread(scrape, ctx.cluster, replica.url)
    fault = Fault("bad_reload", ctx.now(), replica.name)
    ctx.cluster.held.add(replica.name)
    ctx.cluster.write_config(replica, broken=True)
    counted = False
    try:
        while ctx.now() - fault.at_s < 60:
            await asyncio.sleep(0.25)
            now = await asyncio.to_thread(scrape, ctx.cluster, replica.url)
            if delta(before, now, refused, source="file", result="error") >= 1:
                counted = True
                break
    finally:
        ctx.cluster.write_config(replica, comment="the valid configuration again")
        ctx.cluster.held.discard(replica.name)
    fault.recovered_s = await probe(ctx, index, fault.at_s)
    fault.detail = {"refused": counted}
    return fault


INJECT = {"kill9": kill9, "pg_restart": pg_restart, "stream_drop": stream_drop, "bad_reload": bad_reload}


async def run_faults(ctx: FaultContext, plan: list[tuple[float, str]], done: list[Fault]) -> None:
    """Each fault of `plan` at its time (or after the previous one recovered), into `done`."""
    for at, kind in plan:
        await asyncio.sleep(max(0.0, at - ctx.now()))
        ctx.log(f"{ctx.now():7.1f} s  fault: {kind}")
        try:
            fault = await INJECT[kind](ctx)
        except Exception as e:  # a fault that fails to inject is reported, not fatal to the soak
            fault = Fault(kind, ctx.now(), detail={"error": f"{type(e).__name__}: {e}"})
        ctx.log(f"{ctx.now():7.1f} s  fault: {kind} recovered after {fault.recovered_s} s")
        done.append(fault)
