"""The Prometheus handler of ragmend's events: one `Metrics` per server, in its own registry.

Nothing goes to prometheus_client's global default registry, so tests and several apps in one
process never collide. Each event (engine/events.py, server/events.py) updates the series
metrics/declared.py declares; what belongs to the policy, readiness, the index generation and
NVML is read when Prometheus scrapes (metrics/scraped.py). Naming is the Prometheus way:
`ragmend_` prefix, base units (seconds, bytes), `_total` for counters, histograms with explicit
buckets chosen for a CPU deployment. The metric list with the PromQL the dashboards use is in
deploy/README.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ragmend import __version__
from ragmend.engine import events as answered
from ragmend.instrumentation import Event
from ragmend.server import events as served
from ragmend.server.metrics import declared as d
from ragmend.server.metrics.scraped import StateCollector
from ragmend.settings import Settings

if TYPE_CHECKING:
    from ragmend.engine import Engine
    from ragmend.engine.router import Router
    from ragmend.policy import Policy

log = logging.getLogger("ragmend.metrics")

Series = Counter | Gauge | Histogram


class Metrics:
    """Every metric of one server, and the handler of its events (`handle`).

    `policy`, `router`, `ready` and `index_generation` are read at scrape time (see
    `for_engine`); left out, the policy figures come from settings and readiness and the index
    are not reported. `nvml_status` returns "available" or "unavailable: why"; left out, a
    CostMeter of this object's own asks NVML once (it is a fact of the machine, the same the
    repair meter finds).
    """

    content_type = CONTENT_TYPE_LATEST

    def __init__(
        self,
        settings: Settings,
        *,
        policy: Callable[[], Policy | None] | None = None,
        router: Callable[[], Router | None] | None = None,
        current_settings: Callable[[], Settings] | None = None,
        ready: Callable[[], bool] | None = None,
        index_generation: Callable[[], str | None] | None = None,
        nvml_status: Callable[[], str] | None = None,
    ):
        self.settings = settings
        # The settings in force now (a hot reload replaces them); `settings` stays the start's.
        self._current_settings = current_settings or (lambda: settings)
        self._policy = policy or (lambda: None)
        self._router = router or (lambda: None)
        self.ready = ready
        self.index_generation = index_generation
        self._nvml_status = nvml_status
        self._meter: Any = None  # the lazily created CostMeter behind the default nvml_status
        self._meter_lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.series: dict[str, Series] = {}
        for declared in d.DECLARED:
            self._create(declared)
        self.registry.register(StateCollector(self))
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            answered.PlanChosen: self._plan_chosen,
            answered.AnswerDiagnosed: self._answer_diagnosed,
            answered.RepairRan: self._repair_ran,
            answered.RepairSkipped: self._repair_skipped,
            answered.RequestAnswered: self._request_answered,
            answered.AnswerChecked: self._answer_checked,
            served.SlotsChanged: self._slots_changed,
            served.RequestRefused: lambda e: self._inc(d.REFUSED, e.at),
            served.RequestCancelled: lambda e: self._inc(d.CANCELLED, e.reason, e.stopped_at),
            served.GeneratorTimeSpent: self._generator_time,
            served.ServiceEstimated: lambda e: self._set(d.ADMISSION_PREDICTED, e.seconds, e.estimate),
            served.ErrorAnswered: self._error_answered,
            served.ConfigChanged: self._config_changed,
        }

    @classmethod
    def for_engine(cls, engine: Engine) -> Metrics:
        """Metrics reading the engine's policy, readiness and index generation at scrape time."""

        def policy() -> Policy | None:
            # Only once loaded (a scrape does not open the state store of a server still starting).
            # With repair off there is no policy to report (settings stand in). engine.settings
            # is read each time: a hot reload or an admin change replaces it.
            if not (engine.ready and engine.settings.policy.repair):
                return None
            return engine.policy

        def index_generation() -> str | None:
            gen = engine.status()["index"]
            return str(gen) if gen else None

        def router() -> Router | None:
            return engine.router if engine.ready else None

        return cls(
            engine.settings,
            policy=policy,
            router=router,
            current_settings=lambda: engine.settings,
            ready=lambda: engine.ready,
            index_generation=index_generation,
        )

    # --- creation -----------------------------------------------------------------------------------

    def _create(self, declared: d.Declared) -> None:
        """The series of one declaration, with those it names created at zero, so rates and
        dashboards have data from the first scrape instead of appearing with the first event."""
        r, name, doc, labels = self.registry, declared.name, declared.doc, declared.label_names
        if declared.kind == "info":
            Info(name, doc, registry=r).info({"version": __version__})
            return
        if declared.scraped:
            return
        series: Series
        if declared.kind == "histogram":
            series = Histogram(name, doc, labels, buckets=declared.buckets, registry=r)
        elif declared.kind == "counter":
            series = Counter(name, doc, labels, registry=r)
        else:
            series = Gauge(name, doc, labels, registry=r)
        for values in declared.series_at_zero(self.settings):
            series.labels(*values)
        self.series[name] = series

    def _labelled(self, declared: d.Declared, values: Sequence[str]) -> Any:
        series = self.series[declared.name]
        return series.labels(*declared.bound(values)) if values else series

    def _inc(self, declared: d.Declared, *values: str, by: float = 1.0) -> None:
        self._labelled(declared, values).inc(by)

    def _observe(self, declared: d.Declared, value: float, *values: str) -> None:
        self._labelled(declared, values).observe(value)

    def _set(self, declared: d.Declared, value: float, *values: str) -> None:
        self._labelled(declared, values).set(value)

    # --- the events ---------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Record one event; an event these metrics do not count is ignored."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _plan_chosen(self, e: answered.PlanChosen) -> None:
        self._inc(d.ROUTER_PLANS, e.plan, e.kind, e.chosen_by)
        if e.seconds is not None:
            self._observe(d.ROUTER_FIRST_PASS_SECONDS, e.seconds, e.plan)
        if e.reward is not None:
            self._observe(d.ROUTER_REWARD, e.reward, e.plan)
        self._scores(d.ROUTER_PLAN_SCORE, e.scores)

    def _answer_diagnosed(self, e: answered.AnswerDiagnosed) -> None:
        self._inc(d.ANSWERS, e.pass_name, e.failure)
        self._inc(d.FAILURE_STAGES, e.pass_name, e.stage)
        if e.support is not None:
            self._observe(d.ANSWER_SUPPORT, e.support, e.pass_name)
        if e.p_unsupported is not None:
            self._observe(d.ANSWER_UNSUPPORTED, e.p_unsupported, e.pass_name)
        for check in e.checks:
            self._inc(d.DIAGNOSIS_CHECKS, e.pass_name, check)

    def _repair_ran(self, e: answered.RepairRan) -> None:
        self._inc(d.REPAIR_ACTIONS, e.failure, e.action)
        self._observe(d.REQUEST_SECONDS, e.seconds, "repair")
        self._observe(d.ACTION_SECONDS, e.seconds, e.action)
        if e.memory_bytes is not None:
            self._observe(d.ACTION_BYTES, e.memory_bytes, e.action)
        for source in answered.MEMORY_SOURCES:
            self._set(d.MEMORY_SOURCE, 1 if e.memory_source == source else 0, source)
        self._observe(d.REPAIR_REWARD, e.reward, e.action)
        if e.success:
            self._inc(d.REPAIR_SUCCESS, e.action)
        self._inc(d.REPAIR_KEPT, e.action, e.kept)
        for budget in e.over_budget:
            self._inc(d.BUDGET_VIOLATIONS, budget)
        self._scores(d.ARM_SCORE, e.scores)

    def _repair_skipped(self, e: answered.RepairSkipped) -> None:
        self._inc(d.REPAIRS_SKIPPED, e.reason)
        if e.timed_out:  # the request succeeded, with its first answer: a model error only
            self._inc(d.MODEL_ERRORS, "generator")

    def _request_answered(self, e: answered.RequestAnswered) -> None:
        for stage, seconds in e.stage_seconds:
            self._observe(d.REQUEST_SECONDS, seconds, stage)
        self._inc(d.COLLECTION_REQUESTS, e.collection)
        for purpose, prompt, completion in e.tokens:
            self._inc(d.GENERATOR_TOKENS, purpose, "prompt", by=prompt)
            self._inc(d.GENERATOR_TOKENS, purpose, "completion", by=completion)
        if e.over_request_budget:
            self._inc(d.BUDGET_VIOLATIONS, "request")
        for role, held, waiting in e.generator_seconds:
            self._inc(d.GENERATOR_SECONDS, role, "held", by=held)
            self._inc(d.GENERATOR_SECONDS, role, "waiting", by=waiting)

    def _answer_checked(self, e: answered.AnswerChecked) -> None:
        self._inc(d.CHECKED_ANSWERS, e.verdict)
        self._observe(d.CHECK_SECONDS, e.seconds)

    def _scores(self, declared: d.Declared, scores: Sequence[answered.Scored]) -> None:
        for s in scores:
            self._set(declared, s.score, s.name, "score")
            self._set(declared, s.exploit, s.name, "exploit")
            self._set(declared, s.explore, s.name, "explore")

    def _slots_changed(self, e: served.SlotsChanged) -> None:
        self._set(d.REQUESTS_IN_FLIGHT, e.running)
        self._set(d.QUEUE_DEPTH, e.waiting)

    def _generator_time(self, e: served.GeneratorTimeSpent) -> None:
        self._inc(d.GENERATOR_REQUEST_SECONDS, e.outcome, by=e.seconds)

    def _error_answered(self, e: served.ErrorAnswered) -> None:
        self._inc(d.ERRORS, e.kind, "4xx" if 400 <= e.status < 500 else "5xx")
        if e.role is not None:
            self._inc(d.MODEL_ERRORS, e.role)

    def _config_changed(self, e: served.ConfigChanged) -> None:
        """A runtime change; one from the file or a signal is also a reload of the configuration."""
        self._inc(d.CONFIG_CHANGES, e.source, "ok" if e.ok else "error")
        if e.source in ("file", "signal"):
            self._inc(d.CONFIG_RELOADS, "success" if e.ok else "failure")

    # --- exposition and what is read at scrape time ------------------------------------------------

    def exposition(self) -> bytes:
        """The text exposition of this registry (what GET /metrics returns)."""
        return generate_latest(self.registry)

    def current_settings(self) -> Settings:
        return self._current_settings()

    def policy(self) -> Policy | None:
        try:
            return self._policy()
        except Exception:  # a scrape must not fail because the policy store cannot be read
            log.warning("metrics: the policy could not be read", exc_info=True)
            return None

    def router(self) -> Router | None:
        try:
            return self._router()
        except Exception:  # a scrape must not fail because the router's store cannot be read
            log.warning("metrics: the router could not be read", exc_info=True)
            return None

    def nvml_status(self) -> str:
        if self._nvml_status is not None:
            return self._nvml_status()
        with self._meter_lock:
            if self._meter is None:
                from ragmend.actions.meter import CostMeter  # pynvml is imported by the meter, on first use

                self._meter = CostMeter()
            meter = self._meter
        return str(meter.nvml_status)
