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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragmend import cancel
from ragmend.engine import Engine
from ragmend.errors import Cancelled, GeneratorTimeout, Overloaded, RequestTimeout
from ragmend.instrumentation import Events
from ragmend.models.generator import Generator
from ragmend.models.registry import ModelRegistry
from ragmend.server.admission import MAX_AGE_S, Admission, ServiceTimes
from ragmend.server.app import create_app
from ragmend.server.metrics import Metrics
from ragmend.settings import Settings, settings_with
from tests.conftest import LiveServer, sample_questions
from tests.test_metrics import value
from tests.test_repair import UNANSWERABLE, repair_settings

# --- the primitive ---------------------------------------------------------------------------------


class Gate:
    """Blocking work for worker threads: each call waits for `open`, looking at its request's
    cancellation as model work does (ragmend/cancel.py), and the peak of calls running at once
    is recorded."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.started: list[int] = []
        self.stopped: list[int] = []  # calls that saw their cancellation

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
            deadline = time.monotonic() + 30
            while not self.open.wait(0.01):
                if cancel.current().cancelled:
                    self.stopped.append(i)
                    cancel.current().check("generator")
                assert time.monotonic() < deadline
            return i
        finally:
            self.work_done()


@dataclass(frozen=True)
class Done:
    """A result that tells admission what it cost (engine/outcome.py Outcome does)."""

    first_pass_s: float
    generator_busy_s: float


async def until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def test_at_most_max_concurrency_work_at_once_and_the_rest_wait_in_order() -> None:
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(2, 10, 30.0, events=Events((metrics,)))
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


def test_the_deadline_passing_in_the_queue_is_a_503_and_at_work_a_504_that_stops_the_work() -> None:
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(1, 5, 0.3, events=Events((metrics,)))
    gate = Gate()

    async def main() -> None:
        first = asyncio.create_task(admission.run(gate.work, 1))
        await until(lambda: admission.running == 1)
        with pytest.raises(Overloaded, match="no worker slot became free before the request's deadline"):
            await admission.run(gate.work, 2, token=admission.token(0.1))
        assert admission.waiting == 0  # it left the queue
        # The first one is past its deadline too: a 504, and its work stops at its next look.
        with pytest.raises(RequestTimeout, match=r"server\.request_timeout_s = 0\.3 s") as late:
            await first
        assert late.value.http_status == 504
        await until(lambda: admission.running == 0, timeout_s=5)  # the slot is free: no gate opened
        assert await admission.drain(5)

    asyncio.run(main())
    assert gate.started == [1] and gate.stopped == [1] and not gate.open.is_set()
    text = metrics.exposition().decode()
    assert value(text, "ragmend_requests_refused_total", at="queue") == 1
    assert value(text, "ragmend_requests_cancelled_total", reason="deadline", stopped_at="generator") == 1


def test_a_slot_freed_by_a_cancelled_request_goes_to_the_next_at_once() -> None:
    admission = Admission(1, 5, 0.3)
    gate = Gate()

    async def main() -> None:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            await admission.run(gate.work, 1)
        assert 0.25 < time.monotonic() - t0 < 2
        # The next request does not wait for a thread that runs on for nobody.
        assert await admission.run(lambda: "next") == "next"
        assert time.monotonic() - t0 < 2

    asyncio.run(main())
    assert gate.stopped == [1]


def test_a_client_that_goes_away_cancels_its_work_and_its_generator_seconds_are_wasted() -> None:
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(1, 5, 30.0, events=Events((metrics,)))
    seen: list[cancel.Cancellation] = []

    def work() -> Done:
        seen.append(cancel.current())
        while not cancel.current().wait(0.01):
            pass
        # It saw the cancellation and stops, as the engine does, with what it had spent.
        raise Cancelled(cancel.current().reason or "?", "generator", generator_s=1.5)

    async def main() -> None:
        task = asyncio.create_task(admission.run(work))
        await until(lambda: bool(seen))
        task.cancel()  # what the route does when the client disconnects
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: admission.running == 0)

    asyncio.run(main())
    assert seen[0].reason == "disconnect"
    text = metrics.exposition().decode()
    assert value(text, "ragmend_requests_cancelled_total", reason="disconnect", stopped_at="generator") == 1
    assert value(text, "ragmend_generator_request_seconds_total", outcome="wasted") == 1.5


def test_work_that_cannot_finish_in_time_is_refused_before_it_starts() -> None:
    """Once a few requests were measured, one whose deadline is shorter than the predicted
    service is refused on arrival, and one that would wait in the queue past its deadline too;
    each with a Retry-After, and neither started."""
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(1, 10, 30.0, events=Events((metrics,)))
    gate = Gate()

    def served(i: int) -> Done:
        time.sleep(0.2)
        return Done(first_pass_s=0.2, generator_busy_s=0.15)

    async def main() -> None:
        # Five at once through one slot: four of them leave a waiter behind, so the queue's
        # drain rate is measured too.
        await asyncio.gather(*(admission.run(served, i) for i in range(5)))
        assert admission.service.first_s("default", 1) == pytest.approx(0.2, abs=0.05)
        assert admission.service.slot_interval() == pytest.approx(0.2, abs=0.1)
        with pytest.raises(Overloaded, match=r"less than the 0\.\d s a request takes") as short:
            await admission.run(gate.work, 1, token=admission.token(0.05))
        assert (short.value.retry_after_s or 0) >= 1
        # One running (held by the gate) and three waiting: the fourth would wait about 0.8 s
        # and answer in 0.2 s: past a 0.5 s deadline.
        running = asyncio.create_task(admission.run(gate.work, 2))
        waiting = [asyncio.create_task(admission.run(gate.work, 3 + i)) for i in range(3)]
        await until(lambda: admission.running == 1 and admission.waiting == 3)
        with pytest.raises(Overloaded, match="would end past the request's deadline") as late:
            await admission.run(gate.work, 9, token=admission.token(0.5))
        assert (late.value.retry_after_s or 0) >= 1
        gate.open.set()
        assert await running == 2 and [await w for w in waiting] == [3, 4, 5]

    asyncio.run(main())
    assert 1 not in gate.started and 9 not in gate.started
    text = metrics.exposition().decode()
    assert value(text, "ragmend_requests_refused_total", at="arrival") == 2
    assert value(text, "ragmend_generator_request_seconds_total", outcome="answered") == pytest.approx(0.75)
    assert value(text, "ragmend_admission_predicted_seconds", estimate="first_pass_1") > 0
    assert value(text, "ragmend_admission_predicted_seconds", estimate="slot_interval") > 0


def test_slow_passes_age_out_of_the_estimate_and_short_deadlines_are_admitted_again() -> None:
    """A few slow first passes (anyone can ask for one) refuse a short deadline; once they are
    older than MAX_AGE_S they no longer count, so the refusals do not last until a restart."""
    now = [1000.0]
    admission = Admission(1, 10, 30.0)
    admission.service = ServiceTimes(clock=lambda: now[0])

    def slow(i: int) -> Done:
        return Done(first_pass_s=20.0, generator_busy_s=0.0)

    async def main() -> None:
        for i in range(3):
            await admission.run(slow, i)
        with pytest.raises(Overloaded, match="less than the"):
            await admission.run(slow, 9, token=admission.token(5.0))
        now[0] += MAX_AGE_S + 1
        assert admission.service.first_s("default", 1) is None
        assert await admission.run(lambda i: Done(0.1, 0.0), 10, token=admission.token(5.0)) is not None

    asyncio.run(main())


def test_a_request_whose_time_ran_short_in_the_queue_is_refused_at_its_slot() -> None:
    metrics = Metrics(Settings(), nvml_status=lambda: "unavailable: test")
    admission = Admission(1, 10, 30.0, events=Events((metrics,)))
    gate = Gate()

    async def main() -> None:
        for _ in range(3):
            await admission.run(lambda: Done(first_pass_s=0.5, generator_busy_s=0.1))
        # No queue was measured yet, so its wait is not predicted; the first pass takes 0.5 s.
        running = asyncio.create_task(admission.run(gate.work, 1))
        await until(lambda: admission.running == 1)
        queued = asyncio.create_task(admission.run(gate.work, 2, token=admission.token(0.8)))
        await until(lambda: admission.waiting == 1)
        await asyncio.sleep(0.5)  # 0.3 s left when the slot comes: less than 0.5 x its headroom
        gate.open.set()
        with pytest.raises(Overloaded, match=r"less than the 0\.6 s a request takes"):
            await queued
        assert await running == 1

    asyncio.run(main())
    assert gate.started == [1]
    assert value(metrics.exposition().decode(), "ragmend_requests_refused_total", at="start") == 1


def test_the_client_timeout_caps_the_deadline_and_the_server_caps_the_client() -> None:
    admission = Admission(1, 0, 10.0)
    assert admission.token(2.0).remaining() == pytest.approx(2.0, abs=0.1)
    assert "the client's timeout, 2 s" in admission.token(2.0).describe
    assert admission.token(60.0).remaining() == pytest.approx(10.0, abs=0.1)
    assert admission.token(None).describe == "server.request_timeout_s = 10 s"


def test_drain_reports_work_still_stopping() -> None:
    admission = Admission(1, 0, 0.1)
    release = threading.Event()

    def deaf() -> None:  # work that never looks at its cancellation
        assert release.wait(30)

    async def main() -> None:
        with pytest.raises(RequestTimeout):
            await admission.run(deaf)
        assert not await admission.drain(0.1)
        release.set()
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


def test_the_request_deadline_is_a_504_and_its_work_stops(tmp_path: Path, engine: Engine, serve: Any) -> None:
    live = serve(engine_with(engine, tmp_path), request_timeout_s=0.2)
    r = httpx.post(live.url + "/v1/answer", json={"query": sample_questions()[2]["question"]}, timeout=60)
    assert r.status_code == 504, r.text
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["error_class"] == "RequestTimeout"
    assert "server.request_timeout_s = 0.2 s" in error["message"]
    assert metric(live.url, "ragmend_errors_total", kind="request_timeout", code_class="5xx") == 1
    # The work stops at its next safe point and frees its slot; no answer is recorded.
    wait_for(live.url, "ragmend_requests_in_flight", 0, timeout_s=60)
    text = httpx.get(live.url + "/metrics").text
    assert (
        sum(value(text, "ragmend_requests_cancelled_total", reason="deadline", stopped_at=s) for s in STAGES)
        == 1
    )
    assert value(text, "ragmend_answers_total", **{"pass": "final"}) == 0


STAGES = ("retrieval", "generator", "diagnosis", "repair")


def test_a_disconnected_streaming_client_stops_the_generator(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path))
    body = {
        "messages": [{"role": "user", "content": sample_questions()[1]["question"]}],
        "stream": True,
        "max_tokens": 2048,
    }
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if '"reasoning_content":"' in line or ('"content":"' in line and '"content":""' not in line):
                break  # the first piece of the answer (the draft's): the client leaves mid-answer
    wait_for(live.url, "ragmend_requests_cancelled_total", 1, timeout_s=60)
    text = httpx.get(live.url + "/metrics").text
    # It stopped inside the generator (at its next token), not after the answer was complete.
    assert value(text, "ragmend_requests_cancelled_total", reason="disconnect", stopped_at="generator") == 1
    assert value(text, "ragmend_generator_request_seconds_total", outcome="wasted") > 0
    wait_for(live.url, "ragmend_requests_in_flight", 0)
    # The model is free and clean: the next request is answered.
    r = httpx.post(live.url + "/v1/answer", json={"query": sample_questions()[0]["question"]}, timeout=120)
    assert r.status_code == 200, r.text


def test_a_client_that_gives_up_on_a_plain_request_stops_its_work(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path))
    with pytest.raises(httpx.ReadTimeout):  # the client stops waiting and closes its connection
        httpx.post(live.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=0.5)
    wait_for(live.url, "ragmend_requests_cancelled_total", 1, timeout_s=60)
    text = httpx.get(live.url + "/metrics").text
    cancelled = "ragmend_requests_cancelled_total"
    assert sum(value(text, cancelled, reason="disconnect", stopped_at=s) for s in STAGES) == 1
    wait_for(live.url, "ragmend_requests_in_flight", 0)
    assert value(text, "ragmend_answers_total", **{"pass": "final"}) == 0


def test_a_request_that_cannot_finish_is_refused_before_any_work(
    tmp_path: Path, engine: Engine, serve: Any
) -> None:
    live = serve(engine_with(engine, tmp_path))
    q = sample_questions()
    for i in range(3):  # measured service times: admission predicts from these
        r = httpx.post(live.url + "/v1/answer", json={"query": q[i]["question"]}, timeout=120)
        assert r.status_code == 200, r.text
    before = httpx.get(live.url + "/metrics").text
    first_pass = value(before, "ragmend_admission_predicted_seconds", estimate="first_pass_1")
    assert first_pass > 0
    # A client whose own deadline is shorter than a request takes (the OpenAI client's header).
    r = httpx.post(
        live.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": q[3]["question"]}]},
        headers={"X-Stainless-Timeout": f"{first_pass / 4:.3f}"},
        timeout=60,
    )
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) >= 1
    assert "the client's timeout" in r.json()["error"]["message"]
    after = httpx.get(live.url + "/metrics").text
    assert value(after, "ragmend_requests_refused_total", at="arrival") == 1
    # No model work for it: no generator tokens, no answer recorded.
    tokens = "ragmend_generator_tokens_total"
    assert value(after, tokens, purpose="answer", kind="prompt") == value(
        before, tokens, purpose="answer", kind="prompt"
    )
    assert value(after, "ragmend_answers_total", **{"pass": "first"}) == 3
    # A deadline header that is not a positive number of seconds is the client's error.
    r = httpx.post(
        live.url + "/v1/answer",
        json={"query": q[3]["question"]},
        headers={"X-Request-Timeout": "soon"},
        timeout=60,
    )
    assert r.status_code == 400 and "x-request-timeout" in r.json()["error"]["message"]


def test_the_generator_tally_counts_every_call_of_a_request(engine: Engine) -> None:
    outcome = engine.respond(sample_questions()[4]["question"])
    first = outcome.first or outcome.answer
    assert outcome.generator_s >= first.timings.generate_s > 0
    assert outcome.seconds >= outcome.generator_s >= outcome.generator_busy_s > 0


def test_generator_timeout_directly(engine: Engine) -> None:
    base = engine.models.generator
    tight = Generator(base.model, engine.settings.models.generator.model_copy(update={"timeout_s": 0.001}))
    t0 = time.monotonic()
    with tight.tally() as tally, pytest.raises(GeneratorTimeout, match=r"timeout_s = 0\.001 s"):
        tight.chat([{"role": "user", "content": "Tell a long story about a castle."}], max_tokens=128)
    assert time.monotonic() - t0 < 30 and tally.calls == 1 and tally.seconds > 0
    # The model is left in a clean state: the next call answers normally.
    assert base.chat([{"role": "user", "content": "Say hello."}], max_tokens=8).text
