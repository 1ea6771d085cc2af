"""`ragmend bench soak`: the server under sustained mixed traffic, with faults, for --minutes.

It starts its own servers from the current configuration (bench/speed/soak_cluster.py): by default
two replicas sharing a PostgreSQL it starts itself (pgserver's, in the work directory), or one on
the file backend (--replicas 1). Then:

1. The rate: --rate, or one client's goodput on /v1/answer over --warmup-s (closed loop).
2. For --minutes, requests arrive at that rate (Poisson, seeded) spread over the replicas that are
   up (a load balancer's job): /v1/answer (50%), streamed chat completions (35%, read to [DONE]),
   /v1/diagnose/batch of 3 answers (15%). Half the answers get a vote (/v1/feedback, thumbs up or
   down, from the key that received the answer, to any replica) 0.5-3 s later. Every
   --admin-every-s one admin operation in turn: a document sent to the default collection, a
   configuration file rewritten (a reload with nothing to change), the collection refreshed.
3. Faults on a schedule (bench/speed/soak_faults.py): kill -9 of a replica and its restart, a
   PostgreSQL restart, a client dropping a stream mid-way, a reload that fails validation.
4. Each --bucket-s (a minute): goodput, latency, statuses, each replica's RSS and descriptors, the
   size of the policy state and of the vote ledger.
5. After the traffic: every vote a replica acknowledged (200) is in the ledger with its score,
   every document acknowledged (2xx) is in every replica's collection, and the replicas report the
   policy's statistics the store holds.

The figures and targets: bench/speed/soak_report.py; docs/benchmarks.md, "Soak".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from ragmend.bench.speed.load import QUESTIONS, load_questions
from ragmend.bench.speed.overload import delta
from ragmend.bench.speed.soak_cluster import Cluster, Replica, bearer
from ragmend.bench.speed.soak_faults import (
    FAULT_KINDS,
    NEEDS_POSTGRES,
    Fault,
    FaultContext,
    run_faults,
    schedule,
    scrape,
    windows,
)
from ragmend.bench.speed.soak_report import Record, Sample, summarize
from ragmend.errors import InputError

KINDS, WEIGHTS = ("answer", "chat", "diagnose"), (0.50, 0.35, 0.15)
ADMIN_CYCLE = ("document", "config_reload", "refresh")
DIAGNOSE_BATCH = 3


@dataclass(frozen=True, kw_only=True)
class SoakOptions:
    duration_s: float
    rate: float | None = None  # model requests a second over all replicas; None: measured
    replicas: int = 2
    faults: tuple[str, ...] | None = None  # None: every kind the setup allows
    bucket_s: float = 60.0
    warmup_s: float = 60.0
    admin_every_s: float = 30.0
    vote_share: float = 0.5
    seed: int = 0
    recovery_timeout_s: float = 300.0
    workdir: Path | None = None


def fault_kinds(options: SoakOptions) -> tuple[str, ...]:
    """The faults of this run; InputError for a kind unknown or impossible with one replica."""
    if options.faults is None:
        return tuple(k for k in FAULT_KINDS if options.replicas > 1 or k not in NEEDS_POSTGRES)
    unknown = [k for k in options.faults if k not in FAULT_KINDS]
    if unknown:
        raise InputError(f"--faults: {', '.join(unknown)} unknown; the kinds are {', '.join(FAULT_KINDS)}")
    if options.replicas == 1 and NEEDS_POSTGRES & set(options.faults):
        raise InputError(
            "--faults pg_restart needs PostgreSQL, which the soak starts with --replicas 2 or more"
        )
    return tuple(dict.fromkeys(options.faults))


def base_config(path: Path | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """The operator's configuration as a mapping: the file, then the command line's settings."""
    base = yaml.safe_load(path.read_text()) if path is not None else {}
    return merged(base or {}, overrides)


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` over `base`, section by section (--profile sets models.generator, not all models)."""
    out = dict(base)
    for key, value in overrides.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if nested else value
    return out


def _pairs() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(r["question"], str(r["answer"])) for r in rows]


class Traffic:
    """The soak's clients: what they send, and what the servers acknowledged."""

    def __init__(
        self,
        cluster: Cluster,
        http: httpx.AsyncClient,
        options: SoakOptions,
        now: Callable[[], float],
        log: Callable[[str], None],
    ):
        self.cluster, self.http, self.options, self.now, self.log = cluster, http, options, now, log
        self.rng = random.Random(options.seed)
        self.questions = load_questions()
        self.pairs = _pairs()
        self.up: set[int] = set(range(len(cluster.replicas)))
        self.records: list[Record] = []
        self.votes: dict[str, float] = {}  # response id -> the score a replica acknowledged
        self.documents: set[str] = set()  # ids of the documents a replica acknowledged
        self.tasks: set[asyncio.Task[None]] = set()
        self.run_id = secrets.token_hex(3)
        self._documents_sent = 0
        self._reloads = 0

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def send(
        self, kind: str, call: Callable[[Replica], Awaitable[tuple[str, bool]]], index: int | None = None
    ) -> None:
        """One request of `kind` to replica `index` (default: any that is up), recorded."""
        if index is None or index not in self.up:
            index = self.rng.choice(sorted(self.up)) if self.up else None
        started = self.now()
        if index is None:
            self.records.append(Record(kind, None, "unavailable", started, started))
            return
        replica = self.cluster.replicas[index]
        try:
            status, answered = await call(replica)
        except httpx.HTTPError:
            status, answered = "transport", False
        except Exception as e:  # a reply the soak cannot read is counted, not fatal to the run
            status, answered = f"unreadable:{type(e).__name__}", False
        self.records.append(Record(kind, replica.name, status, started, self.now(), answered))

    # -- the model requests -------------------------------------------------------------------------

    def _after_answer(self, response_id: str | None, key: int) -> None:
        if response_id and self.rng.random() < self.options.vote_share:
            self.spawn(self._vote(response_id, key, self.rng.uniform(0.5, 3.0)))

    async def answer(self) -> None:
        key, question = self.rng.randrange(len(self.cluster.keys.users)), self.rng.choice(self.questions)

        async def call(replica: Replica) -> tuple[str, bool]:
            r = await self.http.post(
                replica.url + "/v1/answer", json={"query": question}, headers=self._user(key)
            )
            if r.status_code == 200:
                self._after_answer(r.json().get("id"), key)
            return str(r.status_code), r.status_code == 200

        await self.send("answer", call)

    async def chat(self) -> None:
        key, question = self.rng.randrange(len(self.cluster.keys.users)), self.rng.choice(self.questions)
        body = {"stream": True, "messages": [{"role": "user", "content": question}]}

        async def call(replica: Replica) -> tuple[str, bool]:
            response_id = None
            async with self.http.stream(
                "POST", replica.url + "/v1/chat/completions", json=body, headers=self._user(key)
            ) as r:
                if r.status_code != 200:
                    await r.aread()
                    return str(r.status_code), False
                async for line in r.aiter_lines():
                    if line == "data: [DONE]":
                        self._after_answer(response_id, key)
                        return "200", True
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        if "error" in chunk:  # an error after the stream began: its own status
                            return str(chunk["error"].get("code") or "stream_error"), False
                        response_id = response_id or chunk.get("id")
            return "cut", False

        await self.send("chat", call)

    async def diagnose(self) -> None:
        items = [{"question": q, "answer": a} for q, a in self.rng.sample(self.pairs, DIAGNOSE_BATCH)]
        key = self.rng.randrange(len(self.cluster.keys.users))

        async def call(replica: Replica) -> tuple[str, bool]:
            r = await self.http.post(
                replica.url + "/v1/diagnose/batch", json={"items": items}, headers=self._user(key)
            )
            return str(r.status_code), False

        await self.send("diagnose", call)

    async def _vote(self, response_id: str, key: int, after_s: float) -> None:
        await asyncio.sleep(after_s)
        rating = self.rng.choice(("up", "down"))

        async def call(replica: Replica) -> tuple[str, bool]:
            r = await self.http.post(
                replica.url + "/v1/feedback",
                json={"response_id": response_id, "rating": rating},
                headers=self._user(key),
            )
            if r.status_code == 200:
                self.votes[response_id] = 1.0 if rating == "up" else 0.0
            return str(r.status_code), False

        await self.send("vote", call)

    def _user(self, key: int) -> dict[str, str]:
        return bearer(self.cluster.keys.users[key])

    # -- the admin operations -----------------------------------------------------------------------

    async def document(self) -> None:
        self._documents_sent += 1
        n = self._documents_sent
        doc_id = f"soak-{self.run_id}-{n:05d}"
        word = secrets.token_hex(4)
        text = f"Soak document {n} of run {self.run_id}: the lighthouse keeper's code word is {word}."
        line = json.dumps({"id": doc_id, "title": f"Soak document {n}", "text": text}) + "\n"
        headers = {**bearer(self.cluster.keys.admin), "Content-Type": "application/x-ndjson"}

        async def call(replica: Replica) -> tuple[str, bool]:
            r = await self.http.post(
                replica.url + "/admin/collections/default/documents", content=line, headers=headers
            )
            if 200 <= r.status_code < 300:
                self.documents.add(doc_id)
            return str(r.status_code), False

        await self.send("document", call)

    async def refresh(self) -> None:
        async def call(replica: Replica) -> tuple[str, bool]:
            r = await self.http.post(
                replica.url + "/admin/collections/default/refresh", headers=bearer(self.cluster.keys.admin)
            )
            return str(r.status_code), False

        await self.send("refresh", call)

    async def config_reload(self) -> None:
        self._reloads += 1
        free = [i for i in sorted(self.up) if self.cluster.replicas[i].name not in self.cluster.held]

        async def call(replica: Replica) -> tuple[str, bool]:
            before = await asyncio.to_thread(scrape, self.cluster, replica.url)
            self.cluster.write_config(replica, comment=f"soak reload {self._reloads}")
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                await asyncio.sleep(0.25)
                after = await asyncio.to_thread(scrape, self.cluster, replica.url)
                if delta(before, after, "ragmend_config_changes_total", source="file", result="ok") >= 1:
                    return "ok", False
            return "not_seen", False

        await self.send("config_reload", call, self.rng.choice(free) if free else None)

    # -- the loops ------------------------------------------------------------------------------------

    async def arrivals(self, rate: float, stop: asyncio.Event) -> None:
        send = {"answer": self.answer, "chat": self.chat, "diagnose": self.diagnose}
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.rng.expovariate(rate))
            if not stop.is_set():
                self.spawn(send[self.rng.choices(KINDS, WEIGHTS)[0]]())

    async def admin(self, stop: asyncio.Event) -> None:
        ops = {"document": self.document, "config_reload": self.config_reload, "refresh": self.refresh}
        n = 0
        wait = self.options.admin_every_s / 2
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            if stop.is_set():
                break
            started = time.monotonic()
            await ops[ADMIN_CYCLE[n % len(ADMIN_CYCLE)]]()
            n += 1
            wait = max(0.0, self.options.admin_every_s - (time.monotonic() - started))


async def measure_capacity(
    http: httpx.AsyncClient, cluster: Cluster, warmup_s: float, log: Callable[[str], None]
) -> tuple[float, int, float]:
    """One closed-loop client on the first replica for `warmup_s`: (answers/s, answers, seconds)."""
    questions = load_questions()
    url, headers = cluster.replicas[0].url + "/v1/answer", bearer(cluster.keys.users[0])
    t0, ok, i = time.monotonic(), 0, 0
    while time.monotonic() - t0 < warmup_s or (ok == 0 and time.monotonic() - t0 < 10 * warmup_s):
        with contextlib.suppress(httpx.HTTPError):
            r = await http.post(url, json={"query": questions[i % len(questions)]}, headers=headers)
            ok += r.status_code == 200
        i += 1
    wall = time.monotonic() - t0
    if ok == 0:
        raise InputError(
            f"the warm-up got no answer in {wall:.0f} s: nothing to set the rate by (give --rate)"
        )
    log(f"warm-up: {ok} answers in {wall:.1f} s from one client: {ok / wall:.3f} answers/s")
    return ok / wall, ok, wall


async def _checks(
    traffic: Traffic, http: httpx.AsyncClient, staleness_s: float
) -> tuple[int, int, dict[str, Any]]:
    """(votes lost, documents lost, the policy's consistency) once the traffic has ended."""
    cluster = traffic.cluster
    await asyncio.sleep(staleness_s + 0.5)  # every replica re-reads what the others learned
    stored = await asyncio.to_thread(cluster.ledger_votes, sorted(traffic.votes))
    votes_lost = sum(stored.get(rid) != score for rid, score in traffic.votes.items())
    admin = bearer(cluster.keys.admin)
    missing: dict[str, int] = {}
    lost: set[str] = set()
    views: dict[str, dict[str, int]] = {}
    for i in sorted(traffic.up):
        replica = cluster.replicas[i]
        r = await http.get(replica.url + "/admin/collections/default/documents", headers=admin)
        have = {d["id"] for d in r.json()["data"]} if r.status_code == 200 else set()
        gone = traffic.documents - have
        missing[replica.name] = len(gone)
        lost |= gone
        p = await http.get(replica.url + "/admin/policy", headers=admin)
        if p.status_code == 200:
            views[replica.name] = {a: v["pulls"] for a, v in p.json()["arms"].items() if v["pulls"]}
    store = await asyncio.to_thread(cluster.stored_policy)
    pulled = {a: n for a, n in store.items() if n} if store is not None else None
    same = len({json.dumps(v, sort_keys=True) for v in views.values()}) == 1 and len(views) == len(traffic.up)
    policy = {
        "consistent": same and (pulled is None or pulled == next(iter(views.values()))),
        "pulls": {name: sum(v.values()) for name, v in views.items()}
        | ({"store": sum(pulled.values())} if pulled is not None else {}),
        "documents_missing_by_replica": missing,
    }
    return votes_lost, len(lost), policy


async def _soak(
    cluster: Cluster, options: SoakOptions, kinds: tuple[str, ...], log: Callable[[str], None]
) -> dict[str, Any]:
    server = cluster.base.get("server", {})
    timeout = float(server.get("request_timeout_s", 180.0)) + 30
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=32, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        capacity = None
        if options.rate is None:
            capacity, _, _ = await measure_capacity(http, cluster, options.warmup_s, log)
        rate = options.rate or capacity
        assert rate is not None and rate > 0
        t0 = time.monotonic()

        def now() -> float:
            return time.monotonic() - t0

        traffic = Traffic(cluster, http, options, now, log)
        plan = schedule(options.duration_s, kinds)
        log(
            f"soak: {options.duration_s:g} s at {rate:.3f} requests/s; faults at "
            + ", ".join(f"{kind} {at:.0f} s" for at, kind in plan)
        )
        samples: list[Sample] = []

        async def sample() -> None:
            processes = {r.name: r.process() for r in cluster.replicas}
            state = await asyncio.to_thread(cluster.state_sizes)
            samples.append(Sample(now(), processes, state))

        stop = asyncio.Event()

        def marks() -> Iterator[float]:
            # Each bucket's end, and the start of the RSS window between them.
            _, rss_start = windows(options.duration_s)
            for k in itertools.count(1):
                at = k * options.bucket_s
                if (k - 1) * options.bucket_s < rss_start < at:
                    yield rss_start
                yield at

        async def sampler() -> None:
            for at in marks():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, at - now()))
                if stop.is_set():
                    return
                await sample()

        await sample()
        faults: list[Fault] = []
        ctx = FaultContext(cluster, http, now, traffic.up, traffic.questions, options.recovery_timeout_s, log)
        loops = [
            asyncio.ensure_future(traffic.arrivals(rate, stop)),
            asyncio.ensure_future(traffic.admin(stop)),
            asyncio.ensure_future(sampler()),
        ]
        fault_task = asyncio.ensure_future(run_faults(ctx, plan, faults))
        minute = 0
        while now() < options.duration_s or not fault_task.done():
            await asyncio.sleep(min(1.0, max(0.05, options.duration_s - now())))
            if int(now() // 60) > minute:
                minute = int(now() // 60)
                done = sum(r.answered for r in traffic.records)
                log(f"{now():7.1f} s  {len(traffic.records)} requests, {done} answers")
        await fault_task
        stop.set()
        await asyncio.gather(*loops)
        if traffic.tasks:
            await asyncio.wait(set(traffic.tasks), timeout=timeout)
        end = now()
        await sample()
        staleness = float(cluster.base.get("store", {}).get("max_staleness_s", 1.0))
        votes_lost, documents_lost, policy = await _checks(traffic, http, staleness)
    report = summarize(
        records=traffic.records,
        samples=samples,
        faults=faults,
        duration_s=options.duration_s,
        end=end,
        bucket_s=options.bucket_s,
        votes_acked=len(traffic.votes),
        votes_lost=votes_lost,
        documents_acked=len(traffic.documents),
        documents_lost=documents_lost,
        policy=policy,
    )
    return {
        **report,
        "rate_rps": round(rate, 4),
        "rate_from": "given" if options.rate else "warm-up",
        "capacity_rps": round(capacity, 4) if capacity else None,
    }


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_soak(
    base: dict[str, Any], options: SoakOptions, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """The soak over servers started from the configuration `base` (a settings mapping)."""
    if options.duration_s <= 0 or options.bucket_s <= 0:
        raise InputError("--minutes and --bucket-s: more than 0")
    if options.rate is not None and options.rate <= 0:
        raise InputError("--rate: more than 0 requests a second")
    kinds = fault_kinds(options)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="ragmend-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(base, workdir, options.replicas, log)
    ok = False
    # A SIGTERM (a supervisor, `kill`) stops the soak as Ctrl-C does: its servers and PostgreSQL
    # are stopped, not left running.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster.start()
        result = asyncio.run(_soak(cluster, options, kinds, log))
        ok = True
    finally:
        signal.signal(signal.SIGTERM, previous)
        cluster.close()
        if options.workdir is None and ok:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not ok:
            log(f"the replicas' logs are kept in {workdir}")
    models = base.get("models", {})
    shipped = {"generator": "default", "escalation": "large"}
    return {
        **result,
        "replicas": options.replicas,
        "store": cluster.store,
        "generators": {
            role: None
            if role in models and models[role] is None
            else (models.get(role) or {}).get("profile", p)
            for role, p in shipped.items()
        },
        "cpu_count": os.cpu_count(),
        "loadavg_1m_end": round(os.getloadavg()[0], 2),
    }
