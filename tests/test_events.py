"""Events and their handlers: the dispatcher, the engine's events of a real answered request,
admission's events, and the metrics' one declaration per series (what exists at zero, what a
scrape shows)."""

from __future__ import annotations

import asyncio
import doctest
import logging
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragmend import instrumentation
from ragmend.engine import Engine
from ragmend.engine.events import AnswerDiagnosed, PlanChosen, RepairRan, RepairSkipped, RequestAnswered
from ragmend.errors import Overloaded
from ragmend.instrumentation import Event, EventLog, Events
from ragmend.server.admission import Admission
from ragmend.server.events import GeneratorTimeSpent, RequestRefused, SlotsChanged
from ragmend.server.metrics import Metrics
from ragmend.server.metrics.declared import DECLARED, Declared
from ragmend.settings import Settings


class Recorder:
    """A handler keeping every event it hears."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def handle(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, kind)]


class Broken:
    def handle(self, event: Event) -> None:
        raise RuntimeError("a handler's bug")


def test_the_docstring_examples_run() -> None:
    result = doctest.testmod(instrumentation)
    assert result.attempted >= 5 and result.failed == 0


def test_a_failing_handler_costs_the_emitter_nothing_and_the_next_still_hears(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    events = Events((Broken(), recorder))
    with caplog.at_level(logging.ERROR, logger="ragmend.events"):
        events.emit(RequestRefused("arrival"))
    assert recorder.events == [RequestRefused("arrival")]
    assert "Broken failed on RequestRefused" in caplog.text


def test_the_event_log_writes_one_line_per_event(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ragmend.events"):
        Events((EventLog(),)).emit(GeneratorTimeSpent("answered", 1.5))
    assert "GeneratorTimeSpent outcome='answered' seconds=1.5" in caplog.messages


def test_admission_tells_its_slots_its_refusals_and_the_generator_time() -> None:
    recorder = Recorder()
    admission = Admission(1, 0, 30.0, events=Events((recorder,)))

    class Served:
        first_pass_s = 0.2
        generator_busy_s = 0.7

    async def scenario() -> None:
        started = asyncio.Event()
        release = asyncio.Event()
        loop = asyncio.get_running_loop()

        def work() -> Served:
            loop.call_soon_threadsafe(started.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)
            return Served()

        running = asyncio.ensure_future(admission.run(work))
        await started.wait()
        with pytest.raises(Overloaded):  # one slot taken, no queue: refused on arrival
            await admission.run(work)
        release.set()
        await running

    asyncio.run(scenario())
    slots = [(e.running, e.waiting) for e in recorder.of(SlotsChanged)]  # type: ignore[attr-defined]
    assert slots == [(1, 0), (0, 0)]
    assert recorder.of(RequestRefused) == [RequestRefused("arrival")]
    assert recorder.of(GeneratorTimeSpent) == [GeneratorTimeSpent("answered", 0.7)]


def test_a_real_answer_is_told_as_its_events(engine: Engine) -> None:
    recorder = Recorder()
    outcome = engine.respond("Who designed the Eiffel Tower?", events=Events((recorder,)))
    kinds = [type(e) for e in recorder.events]
    assert kinds[0] is PlanChosen and kinds[-1] is RequestAnswered
    diagnosed = recorder.of(AnswerDiagnosed)
    assert [e.pass_name for e in diagnosed] == ["first", "final"]  # type: ignore[attr-defined]
    assert diagnosed[1].failure == (outcome.diagnosis.failure if outcome.diagnosis else "undiagnosed")  # type: ignore[attr-defined]
    repairs = recorder.of(RepairRan) + recorder.of(RepairSkipped)
    first = outcome.first_diagnosis or outcome.diagnosis
    assert bool(repairs) == bool(first is not None and first.failed)
    (answered,) = recorder.of(RequestAnswered)
    stages = dict(answered.stage_seconds)  # type: ignore[attr-defined]
    assert stages["total"] == pytest.approx(outcome.seconds)
    assert {"retrieve", "generate", "total"} <= set(stages)
    assert dict((p, (a, b)) for p, a, b in answered.tokens)["answer"][1] > 0  # type: ignore[attr-defined]
    # Work outside a server tells nobody, and is the same answer.
    assert engine.respond("Who designed the Eiffel Tower?").answer.query == outcome.answer.query


def families(metrics: Metrics) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}


def exposed_name(declared: Declared) -> str:
    """The family name the text parser gives a declaration (counters without _total, info with _info)."""
    if declared.kind in ("info", "scraped_info"):
        return declared.name + "_info"
    return declared.name.removesuffix("_total") if declared.kind == "counter" else declared.name


def test_every_family_exported_is_declared_and_every_declared_one_exported() -> None:
    metrics = Metrics(
        Settings(), ready=lambda: True, index_generation=lambda: "g1", nvml_status=lambda: "available"
    )
    exported = {name for name in families(metrics) if not name.endswith("_created")}  # creation times
    assert exported == {exposed_name(d) for d in DECLARED}


RECORDED = [d for d in DECLARED if d.kind in ("counter", "histogram", "gauge")]
SAMPLE = {"counter": "", "histogram": "_count", "gauge": ""}  # the sample that counts a series


@pytest.mark.parametrize("declared", RECORDED, ids=lambda d: d.name)
def test_the_series_at_zero_are_those_the_declaration_names(declared: Declared) -> None:
    settings = Settings()
    family = families(Metrics(settings, nvml_status=lambda: "unavailable: test"))[exposed_name(declared)]
    sample = declared.name + SAMPLE[declared.kind]
    series = [s for s in family.samples if s.name == sample]
    at_zero = {tuple(s.labels[n] for n in declared.label_names) for s in series}
    assert at_zero == (set(declared.series_at_zero(settings)) if declared.labels else {()})
    assert all(s.value == 0 for s in series)
