"""Admission control and timeouts: the Admission primitive on plain blocking functions (slots,
queue, deadline, the thread limiter), then over real HTTP with the real engine (tiny generator):
503 with Retry-After when full, 504 for a generator timeout and for the request deadline, and a
repair pass abandoned on a generator timeout with the first answer kept."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend.engine import Engine
from ragmend.errors import GeneratorTimeout, Overloaded, RequestTimeout
from ragmend.models.generator import Generator
from ragmend.models.registry import ModelRegistry
from ragmend.server.admission import Admission
from ragmend.server.app import create_app
from ragmend.server.metrics import Metrics
from ragmend.settings import Settings, settings_with
from tests.conftest import LiveServer, sample_questions
from tests.test_metrics import value
from tests.test_repair import UNANSWERABLE, repair_settings

# --- the primitive ---------------------------------------------------------------------------------


class Gate:
    """Blocking work for worker threads: each call waits for `open`, and the peak of calls running
    at once is recorded."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.started: list[int] = []

    def work_started(self, i: int) -> None:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.started.append(i)

    def work_done(self) -> None:
        with self.lock:
            self.running -= 1

    def work(self, i: int) -> int:
        self.work_started(i)
        try:
            assert self.open.wait(30)
            return i
        finally:
            self.work_done()


async def until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_at_most_max_concurrency_work_at_once_and_the_rest_wait_in_order() -> None:
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(2, 10, 30.0, queue_depth=metrics.queue_depth, in_flight=metrics.requests_in_flight)
    gate = Gate()
    release = [threading.Event() for _ in range(6)]

    def work(i: int) -> int:
        gate.work_started(i)
        try:
            assert release[i].wait(30)
            return i
        finally:
            gate.work_done()

    async def main() -> list[int]:
        tasks = []
        for i in range(6):
            tasks.append(asyncio.create_task(admission.run(work, i)))
            await asyncio.sleep(0.01)  # arrival order is the queue's order
        await until(lambda: admission.running == 2 and admission.waiting == 4)
        text = metrics.exposition().decode()
        assert value(text, "ragmend_queue_depth") == 4
        assert value(text, "ragmend_requests_in_flight") == 2
        assert sorted(gate.started) == [0, 1]
        # One finishes at a time: the slot goes to the longest waiter (first come, first served).
        for i in range(4):
            release[i].set()
            await until(lambda n=i: len(gate.started) == n + 3)
            assert gate.started[-1] == i + 2
        for e in release:
            e.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == list(range(6))
    assert gate.peak == 2
    assert admission.running == 0 and admission.waiting == 0
    text = metrics.exposition().decode()
    assert value(text, "ragmend_queue_depth") == 0 and value(text, "ragmend_requests_in_flight") == 0


def test_a_full_queue_is_refused_at_once_with_retry_after() -> None:
    admission = Admission(1, 1, 30.0, retry_after_s=7)
    gate = Gate()

    async def main() -> None:
        first = asyncio.create_task(admission.run(gate.work, 1))
        second = asyncio.create_task(admission.run(gate.work, 2))
        await until(lambda: admission.running == 1 and admission.waiting == 1)
        t0 = time.monotonic()
        with pytest.raises(Overloaded, match=r"server\.max_queue = 1") as refused:
            await admission.run(gate.work, 3)
        assert time.monotonic() - t0 < 1 and refused.value.retry_after_s == 7
        assert refused.value.http_status == 503
        gate.open.set()
        assert await first == 1 and await second == 2

    asyncio.run(main())
    assert gate.started == [1, 2]


def test_the_deadline_passing_in_the_queue_is_a_503() -> None:
    admission = Admission(1, 5, 0.3)
    gate = Gate()

    async def main() -> None:
        first = asyncio.create_task(admission.run(gate.work, 1))
        await until(lambda: admission.running == 1)
        with pytest.raises(Overloaded, match="no worker slot became free"):
            await admission.run(gate.work, 2)
        assert admission.waiting == 0  # it left the queue
        gate.open.set()
        # The first one is past its deadline too: a 504, its work still finishing.
        with pytest.raises(RequestTimeout):
            await first
        assert await admission.drain(5)

    asyncio.run(main())
    assert gate.started == [1]


def test_the_deadline_passing_at_work_is_a_504_and_the_slot_stays_taken_until_the_thread_ends() -> None:
    admission = Admission(1, 5, 0.3)
    gate = Gate()

    async def main() -> None:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout, match=r"server\.request_timeout_s = 0\.3 s") as late:
            await admission.run(gate.work, 1)
        assert 0.25 < time.monotonic() - t0 < 2 and late.value.http_status == 504
        # The thread still works: its slot is still taken, so the next request waits for it...
        assert admission.running == 1 and gate.running == 1
        nxt = asyncio.create_task(admission.run(lambda: "next"))
        await asyncio.sleep(0.1)
        assert not nxt.done() and admission.waiting == 1
        # ...and gets it as soon as the thread ends.
        gate.open.set()
        assert await nxt == "next"
        assert await admission.drain(5)
        assert admission.running == 0

    asyncio.run(main())


def test_drain_reports_work_still_running() -> None:
    admission = Admission(1, 0, 0.1)
    gate = Gate()

    async def main() -> None:
        with pytest.raises(RequestTimeout):
            await admission.run(gate.work, 1)
        assert not await admission.drain(0.1)
        gate.open.set()
        assert await admission.drain(5)

    asyncio.run(main())


def test_more_slots_than_anyios_default_thread_limiter() -> None:
    """50 slots really run 50 threads at once: the default limiter (40) is not the hidden limit."""
    n = 50
    admission = Admission(n, 0, 30.0)
    barrier = threading.Barrier(n, timeout=20)  # breaks (BrokenBarrierError) if fewer run at once

    async def main() -> list[int]:
        return list(await asyncio.gather(*(admission.run(barrier.wait) for _ in range(n))))

    assert sorted(asyncio.run(main())) == list(range(n))


def test_errors_of_the_work_free_the_slot() -> None:
    admission = Admission(1, 0, 30.0)

    def fail() -> None:
        raise GeneratorTimeout("slow")

    async def main() -> None:
        for _ in range(3):  # with a leaked slot the second would be refused (max_queue 0)
            with pytest.raises(GeneratorTimeout):
                await admission.run(fail)
        assert admission.running == 0

    asyncio.run(main())


# --- over HTTP with the real engine ----------------------------------------------------------------


class TimesOutAfter(Generator):
    """The real generator; its calls after the first `n` get a deadline they cannot meet."""

    def __init__(self, base: Generator, settings: Settings, n: int):
        super().__init__(base.model, settings.models.generator)
        self.n = n
        self.calls = 0

    def chat(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls > self.n:
            self._params = self._params.model_copy(update={"timeout_s": 0.001})
        return super().chat(*args, **kwargs)


def engine_with(base: Engine, tmp: Path, generator_calls: int | None = None) -> Engine:
    """An engine over the session engine's models and index, with its own policy state; with
    `generator_calls`, a generator whose calls past that many time out."""
    settings = repair_settings(tmp, base)
    models = ModelRegistry.sharing(base.models, settings)
    if generator_calls is not None:
        # A copy of the shared table, so the session's registry keeps its own generator.
        models._loaded = {
            **models._loaded,
            "generator": TimesOutAfter(base.models.generator, settings, generator_calls),
        }
    eng = Engine(settings, models=models)
    eng.load(build_index=False)
    return eng


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[tuple[LiveServer, Engine]] = []

    def start(eng: Engine, **server: Any) -> LiveServer:
        settings = settings_with(eng.settings, server=server) if server else eng.settings
        live = LiveServer(create_app(settings, engine=eng)).__enter__()
        started.append((live, eng))
        return live

    yield start
    for live, eng in started:
        live.__exit__(None, None, None)
        eng.close()


def metric(url: str, name: str, **labels: str) -> float:
    return value(httpx.get(url + "/metrics").text, name, **labels)


def wait_for(url: str, name: str, wanted: float, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while metric(url, name) != wanted:
        assert time.monotonic() < deadline, f"{name} never reached {wanted}"
        time.sleep(0.02)


def test_a_full_server_answers_503_with_retry_after_in_the_error_shape(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path), max_concurrency=1, max_queue=1, retry_after_s=3)
    url = live.url + "/v1/answer"
    q = sample_questions()
    with ThreadPoolExecutor(2) as pool:
        # A repair makes the first request last several seconds: long enough to fill the queue.
        first = pool.submit(httpx.post, url, json={"query": UNANSWERABLE}, timeout=600)
        wait_for(live.url, "ragmend_requests_in_flight", 1)
        second = pool.submit(httpx.post, url, json={"query": q[0]["question"]}, timeout=600)
        wait_for(live.url, "ragmend_queue_depth", 1)
        r = httpx.post(url, json={"query": q[1]["question"]}, timeout=10)
        assert r.status_code == 503 and r.headers["retry-after"] == "3", r.text
        error = r.json()["error"]
        assert error["type"] == "server_error" and error["code"] == 503
        assert error["error_class"] == "Overloaded"
        assert "server.max_queue = 1" in error["message"]
        assert first.result().status_code == 200 and second.result().status_code == 200
    assert metric(live.url, "ragmend_errors_total", kind="overloaded", code_class="5xx") == 1
    assert metric(live.url, "ragmend_queue_depth") == 0
    assert metric(live.url, "ragmend_requests_in_flight") == 0


def test_a_generator_timeout_is_a_504_counted_as_a_generator_error(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path, generator_calls=0))
    r = httpx.post(live.url + "/v1/answer", json={"query": sample_questions()[0]["question"]}, timeout=120)
    assert r.status_code == 504, r.text
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["code"] == 504
    assert error["error_class"] == "GeneratorTimeout"
    assert "models.generator.timeout_s = 0.001 s" in error["message"]
    assert metric(live.url, "ragmend_errors_total", kind="generator_timeout", code_class="5xx") == 1
    assert metric(live.url, "ragmend_model_errors_total", role="generator") == 1


def test_a_repair_pass_that_times_out_is_abandoned_and_the_first_answer_kept(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    eng = engine_with(engine, tmp_path, generator_calls=1)  # the first pass only
    live = serve(eng)
    r = httpx.post(live.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=300)
    assert r.status_code == 200, r.text
    body = r.json()
    repair = body["repair"]
    assert repair["timed_out"] is True and repair["action"] in eng.settings.policy.enabled_actions
    assert repair["reason"].startswith("repair pass abandoned after") and "timeout_s" in repair["reason"]
    # The reply is the first answer with its own diagnosis (the failure it had).
    assert body["diagnosis"]["failure"] != "NoFailure" and body["first_diagnosis"] is not None
    assert body["generator_seconds"] > 0 and body["seconds"] >= body["generator_seconds"]
    assert metric(live.url, "ragmend_repairs_skipped_total", reason="timed_out") == 1
    assert metric(live.url, "ragmend_model_errors_total", role="generator") == 1
    assert metric(live.url, "ragmend_errors_total") == 0  # the request itself succeeded
    # An abandoned pass teaches the policy nothing.
    assert all(s.pulls == 0 for s in eng.policy.stats().values())


def test_the_request_deadline_is_a_504_and_the_work_finishes_in_the_background(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path), request_timeout_s=0.2)
    r = httpx.post(live.url + "/v1/answer", json={"query": sample_questions()[2]["question"]}, timeout=60)
    assert r.status_code == 504, r.text
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["error_class"] == "RequestTimeout"
    assert "server.request_timeout_s = 0.2 s" in error["message"]
    assert metric(live.url, "ragmend_errors_total", kind="request_timeout", code_class="5xx") == 1
    # The work holds its slot until it ends, then the answer is recorded like any other.
    wait_for(live.url, "ragmend_requests_in_flight", 0, timeout_s=120)
    assert metric(live.url, "ragmend_answers_total", **{"pass": "final"}) == 1


def test_the_generator_tally_counts_every_call_of_a_request(engine: Engine) -> None:
    outcome = engine.respond(sample_questions()[4]["question"])
    first = outcome.first or outcome.answer
    assert outcome.generator_s >= first.timings.generate_s > 0
    assert outcome.seconds >= outcome.generator_s


def test_generator_timeout_directly(engine: Engine) -> None:
    base = engine.models.generator
    tight = Generator(base.model, engine.settings.models.generator.model_copy(update={"timeout_s": 0.001}))
    t0 = time.monotonic()
    with tight.tally() as tally, pytest.raises(GeneratorTimeout, match=r"timeout_s = 0\.001 s"):
        tight.chat([{"role": "user", "content": "Tell a long story about a castle."}], max_tokens=128)
    assert time.monotonic() - t0 < 30 and tally.calls == 1 and tally.seconds > 0
    # The model is left in a clean state: the next call answers normally.
    assert base.chat([{"role": "user", "content": "Say hello."}], max_tokens=8).text
