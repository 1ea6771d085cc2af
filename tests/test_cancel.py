"""A request's cancellation (ragmend/cancel.py): the token, its child for a repair pass, and the
real parts that look at it: the in-process generator (tiny model) stops at its next token and
leaves the model clean, a waiter for the model leaves the line, the model serves the request with
the earliest deadline first, and the repairer skips a repair the deadline has no room for."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from ragmend import cancel, clock
from ragmend.cancel import NEVER, Cancellation
from ragmend.engine import Engine
from ragmend.engine.repair import RepairSkip
from ragmend.errors import Cancelled
from ragmend.models.gate import GateTimeout, ModelGate
from ragmend.models.generator import PROVIDER, _local_provider
from ragmend.models.pace import MIN_CALLS, Pace
from tests.test_repair import UNANSWERABLE, make_engine


def test_a_token_is_cancelled_by_its_deadline_or_by_a_reason_and_keeps_the_first() -> None:
    token = Cancellation(time.monotonic() + 0.05, "test")
    assert not token.cancelled and 0 < token.remaining() <= 0.05
    time.sleep(0.06)
    assert token.cancelled and token.reason == "deadline" and token.remaining() == 0
    token.cancel("disconnect")
    assert token.reason == "deadline"  # the first reason stands
    with pytest.raises(Cancelled, match="ran past its deadline; its work stopped at generator"):
        token.check("generator")
    other = Cancellation()
    other.cancel("disconnect")
    with pytest.raises(Cancelled, match="lost its client") as gone:
        other.check("diagnosis")
    assert gone.value.stage == "diagnosis" and gone.value.http_status == 504


def test_outside_a_request_nothing_is_ever_cancelled() -> None:
    assert cancel.current() is NEVER
    assert NEVER.timeout() is None and NEVER.remaining() == float("inf")
    NEVER.check("anything")


def test_the_current_token_is_the_scopes_own_in_its_thread() -> None:
    token = Cancellation(time.monotonic() + 10, "test")
    seen: list[Cancellation] = []
    with cancel.scope(token):
        assert cancel.current() is token
        other = threading.Thread(target=lambda: seen.append(cancel.current()))
        other.start()
        other.join()
    assert cancel.current() is NEVER
    assert seen == [NEVER]  # a plain thread does not inherit it: admission sets it in its worker


def test_a_child_ends_at_its_own_deadline_or_its_parents_cancellation() -> None:
    parent = Cancellation(time.monotonic() + 10, "parent")
    child = parent.child(time.monotonic() + 0.05, "child")
    time.sleep(0.06)
    assert child.cancelled and not parent.cancelled
    capped = parent.child(time.monotonic() + 100, "child")
    assert capped.deadline == parent.deadline
    parent.cancel("disconnect")
    assert capped.cancelled and capped.reason == "disconnect"


@contextlib.contextmanager
def held_by_another_thread(hold: Callable[[], AbstractContextManager[object]]) -> Iterator[threading.Event]:
    """`hold()` entered on another thread (another request's generation) until the block ends or
    the event it yields is set."""
    holding, release = threading.Event(), threading.Event()

    def run() -> None:
        with hold():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=run)
    holder.start()
    assert holding.wait(10)
    try:
        yield release
    finally:
        release.set()
        holder.join(30)


def test_each_thread_counts_its_own_wait_in_line_and_none_for_its_own_hold() -> None:
    gate = ModelGate()
    with held_by_another_thread(lambda: gate.held(NEVER)) as release:
        threading.Timer(0.3, release.set).start()
        before = gate.waited_s()
        gate.acquire(NEVER, math.inf)
        gate.acquire(NEVER, math.inf)  # again, holding it: no wait
        gate.release()
        gate.release()
    assert gate.waited_s() - before >= 0.25
    seen: list[float] = []
    other = threading.Thread(target=lambda: seen.append(gate.waited_s()))
    other.start()
    other.join(10)
    assert seen == [0.0]  # another thread's count is its own


def test_the_model_serves_the_request_with_the_earliest_deadline_first() -> None:
    gate = ModelGate()
    now = time.monotonic()
    older = Cancellation(now + 30, "an older request")
    its_repair = older.child(now + 29, "its repair pass")
    newer = Cancellation(now + 40, "a newer request")
    newest = Cancellation(now + 50, "the newest request")
    served: list[str] = []

    def use(name: str, token: Cancellation) -> None:
        with gate.held(token):
            served.append(name)

    gate.acquire(NEVER, math.inf)  # the model is busy while the line forms
    # They join the line in the worst order for a first-come lock: the newest first.
    waiters = [
        threading.Thread(target=use, args=pair)
        for pair in (("newest", newest), ("newer", newer), ("repair", its_repair))
    ]
    for n, t in enumerate(waiters, start=1):
        t.start()
        while gate.waiting < n:
            time.sleep(0.005)
    gate.release()
    for t in waiters:
        t.join(10)
    # What was started is finished first: the older request's repair, then by deadline.
    assert served == ["repair", "newer", "newest"]
    assert its_repair.request_deadline == older.deadline


def test_a_waiter_cancelled_or_out_of_time_leaves_the_line_and_the_next_goes() -> None:
    gate = ModelGate()
    with held_by_another_thread(lambda: gate.held(NEVER)):
        leaving = Cancellation(time.monotonic() + 60, "test")
        threading.Timer(0.1, leaving.cancel, args=("disconnect",)).start()
        with pytest.raises(GateTimeout, match="cancelled"):
            gate.acquire(leaving, math.inf)
        with pytest.raises(GateTimeout, match="deadline"):
            gate.acquire(NEVER, time.monotonic() + 0.1)
        assert gate.waiting == 0
    with gate.held(NEVER):  # the model is free again: nothing was left holding it
        pass


def test_the_in_process_generator_stops_at_its_next_token_and_stays_usable(engine: Engine) -> None:
    generator = engine.models.generator
    token = Cancellation(time.monotonic() + 60, "test")
    pieces: list[str] = []

    def on_text(piece: str) -> None:
        pieces.append(piece)
        token.cancel("disconnect")  # the client leaves after the first piece

    story = [{"role": "user", "content": "Tell a long story about a castle, with many details."}]
    with cancel.scope(token), pytest.raises(Cancelled, match="stopped at generator"):
        generator.chat(story, max_tokens=400, on_text=on_text)
    # At most the token in flight when it was cancelled came after the first piece.
    assert 1 <= len(pieces) <= 3
    # The model is unlocked and clean: the next call answers in full.
    assert generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=8).text


def test_a_generation_its_deadline_leaves_no_time_for_is_not_started(engine: Engine) -> None:
    generator = engine.models.generator
    local = _local_provider().models[generator.model.removeprefix(f"{PROVIDER}/")]
    places = ["castle stood on the hill", "mill turned by the river", "ship lay in the harbour"]
    for place in places[:MIN_CALLS]:  # the model measures its own pace on prompts like the next
        generator.chat([{"role": "user", "content": f"Summarize: The old {place}. " * 60}], max_tokens=4)
    long = [{"role": "user", "content": "Summarize: The old tower rose above the town. " * 60}]
    expected = local._pace.expected_s(local._prompt_tokens(long))
    assert expected is not None and expected > 0
    token = Cancellation(time.monotonic() + expected / 2, "test")
    evaluated = local._llm.n_tokens
    with cancel.scope(token), pytest.raises(Cancelled, match="stopped at generator"):
        generator.chat(long, max_tokens=8)
    # Refused before its deadline, the long prompt never evaluated.
    assert token.reason == "deadline" and time.monotonic() < token.deadline
    assert local._llm.n_tokens == evaluated
    # With the time it needs, the same call runs.
    with cancel.scope(Cancellation(time.monotonic() + 60, "test")):
        assert generator.chat(long, max_tokens=8).text


def test_the_pace_is_the_median_call_once_measured() -> None:
    pace = Pace()
    for _ in range(MIN_CALLS - 1):
        pace.observe(100, 1.0, 0.5)
    assert pace.expected_s(200) is None  # nothing refused on a guess
    pace.observe(100, 0.5, 5.0)  # one slow decode does not move the median
    assert pace.expected_s(200) == pytest.approx(200 / 100 + 0.5)
    for _ in range(MIN_CALLS):
        pace.observe(10, 0.5, 0.5)  # short prompts: their fixed part looks like slow tokens
    assert pace.expected_s(200) == pytest.approx(200 / 100 + 0.5)  # taken from prompts like it


def test_a_request_cancelled_while_waiting_for_the_model_leaves_the_line(engine: Engine) -> None:
    generator = engine.models.generator
    busy = threading.Event()
    release = threading.Event()
    story = [{"role": "user", "content": "Tell a long story about a castle, with many details."}]

    def hold_the_model() -> None:
        def on_text(_: str) -> None:
            busy.set()
            release.wait(30)  # holds the model's lock mid-generation

        generator.chat(story, max_tokens=16, on_text=on_text)

    holder = threading.Thread(target=hold_the_model)
    holder.start()
    assert busy.wait(60)
    token = Cancellation(time.monotonic() + 0.3, "test")
    t0 = time.monotonic()
    with cancel.scope(token), pytest.raises(Cancelled):
        generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert time.monotonic() - t0 < 5  # it did not wait for the holder to finish
    release.set()
    holder.join(60)


def test_a_repair_the_deadline_leaves_no_room_for_is_skipped(tmp_path: Path, engine: Engine) -> None:
    eng = make_engine(tmp_path, engine)
    answer = eng.answer(UNANSWERABLE)
    diagnosis = eng.diagnose(answer)
    assert diagnosis.failed
    # Less time left than the diagnosis of a repaired answer would take: no pass starts.
    with cancel.scope(Cancellation(time.monotonic() + 0.01, "test")):
        final, _, skip = eng.repairer.repair(answer, diagnosis, clock.now())
    assert isinstance(skip, RepairSkip) and skip.code == "deadline"
    assert "deadline leaves" in skip.reason and final is answer
    assert all(arm.pulls == 0 for arm in eng.repairer.policy.stats().values())
    eng.close()


def test_the_model_leaves_a_core_to_a_request_that_works_beside_it(engine: Engine) -> None:
    """Decoding runs on every core while the request is alone; beside another request that is
    working, on every core too where the others' model work takes turns with the generations
    (models.take_turns, the default), else on one fewer (llama.cpp's threads wait for each other
    at every layer: one sharing a core slows them all). The prompt is evaluated on every core."""
    import os

    generator = engine.models.generator
    local = _local_provider().models[generator.model.removeprefix(f"{PROVIDER}/")]
    cores = os.cpu_count() or 2
    hello = [{"role": "user", "content": "Say hello."}]
    with generator.tally():
        generator.chat(hello, max_tokens=4)
    assert local._threads == (cores, cores)

    started, release = threading.Event(), threading.Event()

    def another_request() -> None:
        with generator.tally():  # in progress, not waiting for the model: its diagnosis, say
            started.set()
            release.wait(30)

    beside = threading.Thread(target=another_request)
    beside.start()
    try:
        assert started.wait(10)
        with generator.tally():
            generator.chat(hello, max_tokens=4)
        fitted = cores if engine.settings.models.take_turns else max(1, cores - 1)
        assert local._threads == (fitted, cores)
    finally:
        release.set()
        beside.join(10)


def test_the_thread_holding_the_model_may_take_it_again() -> None:
    gate, request = ModelGate(), Cancellation(time.monotonic() + 60, "test")
    gate.acquire(request, math.inf)
    gate.acquire(request, math.inf)  # a diagnosis holding the cores calls a generator
    gate.release()
    got: list[BaseException] = []
    other = threading.Thread(
        target=lambda: _record(got, lambda: gate.acquire(request, time.monotonic() + 0.2))
    )
    other.start()
    other.join(10)
    assert got and isinstance(got[0], GateTimeout)  # still held once: another thread waits
    gate.release()
    gate.acquire(request, time.monotonic() + 1)  # released as often as taken: free again
    gate.release()


def _record(errors: list[BaseException], call: Callable[[], None]) -> None:
    try:
        call()
    except BaseException as e:
        errors.append(e)


def test_a_diagnosis_waits_for_the_cores_while_a_generation_holds_them(engine: Engine) -> None:
    """Taking turns: the diagnosis of one request does not run beside another's generation."""
    generator = engine.models.generator
    gate = _local_provider().models[generator.model.removeprefix(f"{PROVIDER}/")]._gate
    answer = engine.answer("Who founded Marvel Comics?")
    holding, release = threading.Event(), threading.Event()

    def a_generation() -> None:
        with engine.models.turn_on_the_cores("generation"):
            holding.set()
            release.wait(30)

    done: list[object] = []
    held = threading.Thread(target=a_generation)
    held.start()
    assert holding.wait(10)
    diagnosing = threading.Thread(target=lambda: done.append(engine.diagnose(answer)))
    diagnosing.start()
    try:
        deadline = time.monotonic() + 10
        while gate.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gate.waiting == 1 and not done  # in line, not running
    finally:
        release.set()
        held.join(10)
    diagnosing.join(60)
    assert done and gate.waiting == 0
