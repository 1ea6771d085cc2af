"""Prometheus metrics of one ragmend server (docs/metrics.md lists every series).

One `Metrics` object owns its own CollectorRegistry: nothing goes to prometheus_client's global
default registry, so tests and several apps in one process never collide. The server records
every Outcome with `observe(outcome)` and every error it maps to a response with
`observe_error(...)`; what belongs to the policy (budgets, alpha, kind, per-arm pulls and mean
reward), readiness, the index generation and NVML are read when Prometheus scrapes, by a
collector, so a value changed at run time (admin endpoint, hot reload) shows on the next scrape.

Naming is the Prometheus way: `ragmend_` prefix, base units (seconds, bytes), `_total` for
counters, histograms with explicit buckets chosen for a CPU deployment (an answer takes 1-30 s,
a diagnosis 0.05-5 s). Every label value comes from a closed set (failure types and stages from
diagnosis/types.py, actions from the catalogue, error kinds and model roles listed here); a value
outside its set is counted as "other", and no user text ever becomes a label.

The metric list with the PromQL the dashboards use is in deploy/README.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from ragmend import __version__
from ragmend.actions.catalogue import BY_NAME as ACTIONS_BY_NAME
from ragmend.actions.plans import PLAN_NAMES
from ragmend.budgets import MB
from ragmend.diagnosis.question_form import QUESTION_KINDS
from ragmend.diagnosis.types import FAILURE_TYPES, OFF_QUESTION, STAGES, Diagnosis
from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import SKIP_CODES, RepairSkip, RepairTrace
from ragmend.engine.router import Route
from ragmend.errors import METRIC_KINDS, RagmendError
from ragmend.models.generation import PURPOSES
from ragmend.models.registry import ROLES
from ragmend.server.admission import CANCEL_REASONS, REFUSED_AT, STOPPED_AT, AdmissionMetrics
from ragmend.settings import Settings

if TYPE_CHECKING:
    from ragmend.engine import Engine
    from ragmend.engine.router import Router
    from ragmend.policy import Policy

log = logging.getLogger("ragmend.metrics")

# --- closed label sets ----------------------------------------------------------------------------

OTHER = "other"  # any value outside its closed set: a new value never creates an unbounded series
UNDIAGNOSED = "undiagnosed"  # diagnosis.enabled is off: the answer has no failure type or stage
NOT_JUDGED = "not_judged"  # the diagnosis could not read the answer (not English): no type or stage
PASSES = ("first", "final")  # the first pass's diagnosis, and the one of the answer the reply carries
REQUEST_STAGES = ("retrieve", "rerank", "generate", "diagnose", "repair", "total")
FAILURE_LABELS = (*FAILURE_TYPES, UNDIAGNOSED, NOT_JUDGED, OTHER)
STAGE_LABELS = (*STAGES, UNDIAGNOSED, NOT_JUDGED, OTHER)
# The diagnosis' checks that can find against an answer beside its scores (docs/diagnosis.md): what
# of the question it does not address (OFF_QUESTION), a comparison in time or a choice of
# attribute the passages decide the other way, a conflict with the knowledge graph, and a graph
# conflict the passage of its triple entails (not a conflict: the graph's false alarm). refuted and
# unbacked: the verdict's rules that fail an answer whatever its score.
CHECKS = (
    *OFF_QUESTION,
    "comparison",
    "alternatives",
    "refuted",
    "unbacked",
    "graph_conflict",
    "graph_entailed",
)
BUDGETS = ("action_latency", "action_memory", "request")
KEPT = ("repaired", "original", "abstained")
MEMORY_SOURCES = ("nvml", "rss", "unavailable")
NVML_STATES = ("available", "unavailable")
SCORE_PARTS = ("score", "exploit", "explore")
# Why no repair ran: the skip's code (engine/repair.py SkipCode), or "disabled" (policy.repair is
# off); "other" keeps the label set closed.
SKIP_REASONS = (*SKIP_CODES, "disabled", OTHER)
RELOAD_RESULTS = ("success", "failure")
# Runtime configuration changes: by an admin request, a changed configuration file, or SIGHUP.
CHANGE_SOURCES = ("admin", "file", "signal")
CHANGE_RESULTS = ("ok", "error")
# Error kinds: ragmend's own errors (each class carries its kind: RagmendError.metric_kind,
# ragmend/errors.py), the HTTP layer's errors, and anything unexpected.
# "auth": a missing or invalid key (401) or a key without the scope (403), server/auth.py.
ERROR_KINDS = (*METRIC_KINDS, "http", "validation", "auth", "internal", OTHER)
CODE_CLASSES = ("4xx", "5xx")
MODEL_ROLES = (*ROLES, "rebel", "unknown")
# The router (engine/router.py): a first pass the router did not choose ran on the configured one.
CONFIGURED = "configured"
PLAN_LABELS = (*PLAN_NAMES, CONFIGURED, OTHER)
KIND_LABELS = (*QUESTION_KINDS, OTHER)
CHOSEN_BY = ("router", "request", "off", "nothing_fits")

# --- buckets --------------------------------------------------------------------------------------

# Stages span three decades: retrieval in milliseconds, diagnosis 0.05-5 s, generation and whole
# requests 1-30 s on CPU (docs/benchmarks.md); the request budget is 30 s by default.
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 12, 20, 30, 45, 60, 120)
# A repair pass repeats a CPU generation (4-8 s) against a 12 s default budget.
ACTION_LATENCY_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 8, 10, 12, 15, 20, 30, 60)
# Peak memory growth of a repair pass: the paper's budget is 6 MiB of accelerator memory; on CPU
# it is resident-set growth, which can reach hundreds of MiB when a model's buffers grow.
ACTION_MEMORY_BUCKETS = tuple(float(mib * MB) for mib in (0, 0.25, 1, 2, 4, 6, 8, 16, 32, 64, 128, 256, 1024))
# Eq. 2: quality in {0, .25, .5, .75, 1} times factors in [0, 1]. The "unconstrained" variant's
# overrun penalty is negative: it lands in le=0, and no bucket is negative because
# prometheus_client leaves out _sum (which the mean reward needs) when one is.
# Dimensionless scores in [0, 1]: the repair reward and the answers' support.
REWARD_BUCKETS = (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1)


TOKEN_KINDS = ("prompt", "completion")


def bounded(value: str, allowed: Iterable[str]) -> str:
    """`value` when it is in the closed set, else "other"."""
    return value if value in allowed else OTHER


def error_kind(exc: BaseException) -> str:
    """The ERROR_KINDS value of an exception: its class's metric_kind, else "internal"."""
    return exc.metric_kind if isinstance(exc, RagmendError) else "internal"


def _code_class(status: int) -> str:
    return "4xx" if 400 <= status < 500 else "5xx"


class Metrics:
    """Every metric of one server, in its own registry.

    `policy`, `ready` and `index_generation` are read at scrape time (see `for_engine`); left
    out, the policy figures come from settings and readiness and the index are not reported.
    `nvml_status` returns "available" or "unavailable: why"; left out, a CostMeter of this
    object's own asks NVML once (it is a fact of the machine, the same the repair meter finds).
    """

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
        self.registry = CollectorRegistry()
        self._policy = policy or (lambda: None)
        self._router = router or (lambda: None)
        self._ready = ready
        self._index_generation = index_generation
        self._nvml_status = nvml_status
        self._meter: Any = None  # the lazily created CostMeter behind the default nvml_status
        self._meter_lock = threading.Lock()
        self.actions = tuple(sorted(ACTIONS_BY_NAME))
        r = self.registry

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        self.build_info = Info("ragmend_build", "The ragmend version serving.", registry=r)
        self.build_info.info({"version": __version__})

        # Requests
        self.request_seconds = Histogram(
            "ragmend_request_duration_seconds",
            "Seconds per request stage: retrieve, rerank, generate (the first pass), diagnose (every "
            "diagnosis of the request), repair (the metered repair pass), total (end to end).",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.answers = counter(
            "ragmend_answers_total",
            "Answers by diagnosed failure type; pass=first is the first answer, pass=final the one "
            "the reply carries (the repaired one when it is better supported).",
            ("pass", "failure"),
        )
        self.answer_support = Histogram(
            "ragmend_answer_support",
            "Support of each answer's claims by its evidence, per pass: the mean over claims of the "
            "best P(entail) any passage gives it (diagnosis e_r.support; answers without claims, such "
            "as abstentions, are not observed). The graded form of the entail verdict.",
            ["pass"],
            buckets=REWARD_BUCKETS,
            registry=r,
        )
        self.answer_unsupported = Histogram(
            "ragmend_answer_p_unsupported",
            "The diagnosis verdict's calibrated P(unsupported) of each answer, per pass (answers "
            "diagnosed without a verdict model are not observed). An answer fails at or above the "
            "configured threshold (diagnosis.unsupported_threshold, or the model's own).",
            ["pass"],
            buckets=REWARD_BUCKETS,
            registry=r,
        )
        self.collection_requests = counter(
            "ragmend_collection_requests_total",
            "Answered requests by the corpus that answered: default, or a collection's name "
            "(docs/collections.md; one series per collection, which admins create).",
            ("collection",),
        )
        self.generator_tokens = counter(
            "ragmend_generator_tokens_total",
            "Tokens of every generator call of the answered requests, by purpose (answer: first "
            "pass, repair: the repair pass, rewrite: query rewrites, condense: follow-ups made "
            "standalone, other) and kind (prompt, completion).",
            ("purpose", "kind"),
        )
        self.failure_stages = counter(
            "ragmend_failure_stages_total",
            "Answers by the pipeline stage the diagnosis blames (none: no failure), per pass.",
            ("pass", "stage"),
        )
        self.diagnosis_checks = counter(
            "ragmend_diagnosis_checks_total",
            "Answers each diagnosis check found against, per pass: what of the question the answer "
            "does not address (subject, relation, kind, year, restated, support, choice), a "
            "comparison in time or a choice of attribute the passages decide the other way "
            "(comparison, alternatives), a claim a passage refutes or an answer no passage "
            "supports, whatever its score (refuted, unbacked), a knowledge-graph conflict "
            "(graph_conflict), and graph conflicts the "
            "passage of their triple entails (graph_entailed: not conflicts; the graph's false alarms).",
            ("pass", "check"),
        )
        self.requests_in_flight = gauge(
            "ragmend_requests_in_flight",
            "Model-work slots taken: requests being answered, and the work of timed-out ones still "
            "running (at most server.max_concurrency).",
        )
        self.queue_depth = gauge(
            "ragmend_queue_depth",
            "Requests waiting for a model-work slot (server.max_concurrency); at most server.max_queue.",
        )
        self.refused = counter(
            "ragmend_requests_refused_total",
            "Requests refused with a 503 before any model work, by where: on arrival (the queue is "
            "full, or its predicted wait and service end past the deadline), in the queue (the "
            "deadline passed while waiting), at the start (the time left no longer covers the "
            "predicted service).",
            ("at",),
        )
        self.cancelled = counter(
            "ragmend_requests_cancelled_total",
            "Requests whose model work was stopped, by why (their deadline passed, or their client "
            "disconnected) and where the work stopped: retrieval, generator, diagnosis, repair "
            "(before the stage or inside it), finished (it ended before it looked), failed, other.",
            ("reason", "stopped_at"),
        )
        self.generator_request_seconds = counter(
            "ragmend_generator_request_seconds_total",
            "Generator seconds spent for requests, by whether their answer reached the client "
            "(answered) or not (wasted: cancelled or abandoned work).",
            ("outcome",),
        )
        self.admission_predicted = gauge(
            "ragmend_admission_predicted_seconds",
            "What admission predicts, measured online: first_pass_<n>, the 95th percentile of a "
            "request's answer and diagnosis once it holds a slot with n requests running (itself "
            "included; 8: 8 or more); slot_interval, the mean interval between two slots freeing "
            "while requests wait (repairs included).",
            ("estimate",),
        )

        # Repairs
        self.repair_actions = counter(
            "ragmend_repair_actions_total",
            "Repair actions chosen by the policy, by the failure type they repaired.",
            ("failure", "action"),
        )
        self.action_seconds = Histogram(
            "ragmend_action_latency_seconds",
            "Measured latency of the repair pass (the action and the pipeline pass it patched).",
            ["action"],
            buckets=ACTION_LATENCY_BUCKETS,
            registry=r,
        )
        self.action_bytes = Histogram(
            "ragmend_action_memory_bytes",
            "Peak memory growth during the repair pass (NVML device memory, or process RSS where no "
            "NVIDIA GPU is readable: see ragmend_memory_source). Not observed when nothing was readable.",
            ["action"],
            buckets=ACTION_MEMORY_BUCKETS,
            registry=r,
        )
        self.budget_violations = counter(
            "ragmend_budget_violations_total",
            "Budgets overrun: action_latency and action_memory by a repair pass, request by a whole "
            "request (with or without a repair) over the end-to-end latency budget.",
            ("budget",),
        )
        self.reward = Histogram(
            "ragmend_repair_reward",
            "Reward of each repair (Eq. 2: quality times the latency and memory factors).",
            ["action"],
            buckets=REWARD_BUCKETS,
            registry=r,
        )
        self.repair_success = counter(
            "ragmend_repair_success_total",
            "Repairs after which the failure was gone (the repaired answer diagnosed NoFailure).",
            ("action",),
        )
        self.repair_kept = counter(
            "ragmend_repair_kept_total",
            "Repairs by which answer the reply carries: repaired (better supported) or original.",
            ("action", "kept"),
        )
        self.repairs_skipped = counter(
            "ragmend_repairs_skipped_total",
            "Failed answers that got no repair, by reason class.",
            ("reason",),
        )
        self.arm_score = gauge(
            "ragmend_policy_arm_score",
            "The score of each feasible arm in the latest decision that weighed it (part=score is "
            "exploit + explore; LinUCB: x'theta and alpha*sqrt(x'A^-1 x)).",
            ("action", "part"),
        )
        self.memory_source = gauge(
            "ragmend_memory_source",
            "Where the latest repair pass's memory reading came from (1 for that source, 0 otherwise).",
            ("source",),
        )

        # The router
        self.plans = counter(
            "ragmend_router_plans_total",
            "First passes by the plan they ran on (configured: the rag section's, when the router "
            "did not choose), the kind of question (claim, choice, yes_no, who, what, ...) and who "
            "chose (router, request: its config set a plan key, off, nothing_fits: no plan fitted "
            "the time left).",
            ("plan", "kind", "chosen_by"),
        )
        self.plan_seconds = Histogram(
            "ragmend_router_first_pass_seconds",
            "Measured seconds of each first pass (retrieval and generation) by its plan.",
            ["plan"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.plan_reward = Histogram(
            "ragmend_router_reward",
            "The router's reward of each routed first pass (Eq. 2 of its diagnosis at its cost).",
            ["plan"],
            buckets=REWARD_BUCKETS,
            registry=r,
        )
        self.plan_score = gauge(
            "ragmend_router_plan_score",
            "The score of each feasible plan in the router's latest decision that weighed it "
            "(part=score is exploit + explore).",
            ("plan", "part"),
        )

        # Errors and operations
        self.errors = counter(
            "ragmend_errors_total",
            "Requests answered with an error, by error kind and HTTP status class.",
            ("kind", "code_class"),
        )
        self.model_errors = counter(
            "ragmend_model_errors_total",
            "Model load or inference errors by model role.",
            ("role",),
        )
        self.config_reloads = counter(
            "ragmend_config_reloads_total",
            "Reloads of the tunable configuration, by result.",
            ("result",),
        )
        self.config_changes = counter(
            "ragmend_config_changes_total",
            "Runtime configuration changes by source (admin request, changed file, SIGHUP) and result.",
            ("source", "result"),
        )

        self._initialise_series()
        r.register(_StateCollector(self))

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

    def _initialise_series(self) -> None:
        """Create the series of the closed sets at zero, so rates and dashboards have data from
        the first scrape instead of appearing with the first event."""
        for stage in REQUEST_STAGES:
            self.request_seconds.labels(stage)
        for p in PASSES:
            self.answer_support.labels(p)
            self.answer_unsupported.labels(p)
            for failure in FAILURE_TYPES:
                self.answers.labels(p, failure)
            for stage in STAGES:
                self.failure_stages.labels(p, stage)
            for check in CHECKS:
                self.diagnosis_checks.labels(p, check)
        # The Engine refuses unknown action names; a Metrics built from settings alone skips them.
        enabled = [a for a in self.settings.policy.enabled_actions if a in ACTIONS_BY_NAME]
        for action in enabled:
            for failure in FAILURE_TYPES[1:]:  # every failure it may repair (not NoFailure)
                self.repair_actions.labels(failure, action)
            self.action_seconds.labels(action)
            self.action_bytes.labels(action)
            self.reward.labels(action)
            self.repair_success.labels(action)
            for kept in KEPT:
                self.repair_kept.labels(action, kept)
        for plan in (*self.settings.router.plans, CONFIGURED):
            for kind in QUESTION_KINDS:
                self.plans.labels(bounded(plan, PLAN_LABELS), kind, "router" if plan != CONFIGURED else "off")
            self.plan_seconds.labels(bounded(plan, PLAN_LABELS))
            if plan != CONFIGURED:
                self.plan_reward.labels(bounded(plan, PLAN_LABELS))
        for b in BUDGETS:
            self.budget_violations.labels(b)
        for reason in SKIP_REASONS:
            self.repairs_skipped.labels(reason)
        for source in MEMORY_SOURCES:
            self.memory_source.labels(source)
        for kind in ("generator", "generator_timeout", "request_timeout", "overloaded"):
            self.errors.labels(kind, "5xx")
        for at in REFUSED_AT:
            self.refused.labels(at)
        for reason in CANCEL_REASONS:
            for stage in STOPPED_AT:
                self.cancelled.labels(reason, stage)
        for outcome in ("answered", "wasted"):
            self.generator_request_seconds.labels(outcome)
        for kind in ("model_unavailable", "internal"):
            self.errors.labels(kind, "5xx")
        self.errors.labels("input", "4xx")
        for role in ROLES:
            self.model_errors.labels(role)
        for result in RELOAD_RESULTS:
            self.config_reloads.labels(result)
        for source in CHANGE_SOURCES:
            for result in CHANGE_RESULTS:
                self.config_changes.labels(source, result)
        self.errors.labels("auth", "4xx")

    def admission(self) -> AdmissionMetrics:
        """The series the server's admission control keeps (server/admission.py)."""
        return AdmissionMetrics(
            queue_depth=self.queue_depth,
            in_flight=self.requests_in_flight,
            refused=self.refused,
            cancelled=self.cancelled,
            generator_seconds=self.generator_request_seconds,
            predicted=self.admission_predicted,
        )

    # --- recording ----------------------------------------------------------------------------------

    def observe(self, outcome: Outcome) -> None:
        """Record everything one Outcome carries: stage latencies, failure types of both passes,
        the repair (action, cost, reward, success, kept, budgets overrun) or why none ran."""
        try:
            self._observe(outcome)
        except Exception:  # a metrics fault must never cost the caller its answer
            log.exception("metrics: an outcome could not be recorded")

    def _observe(self, outcome: Outcome) -> None:
        first = outcome.first or outcome.answer
        t = first.timings
        self.request_seconds.labels("retrieve").observe(t.retrieve_s)
        if first.config.rerank:  # 0 s when the pass did not rerank: not a measurement
            self.request_seconds.labels("rerank").observe(t.rerank_s)
        self.request_seconds.labels("generate").observe(t.generate_s)
        self.request_seconds.labels("total").observe(outcome.seconds)
        self.collection_requests.labels(outcome.collection).inc()
        for purpose, tokens in outcome.usage.items():
            label = bounded(purpose, PURPOSES)
            self.generator_tokens.labels(label, TOKEN_KINDS[0]).inc(tokens.prompt_tokens)
            self.generator_tokens.labels(label, TOKEN_KINDS[1]).inc(tokens.completion_tokens)

        if outcome.route is not None:
            self._observe_route(outcome.route)
        first_diagnosis = outcome.first_diagnosis or outcome.diagnosis
        self._count_answer("first", first_diagnosis)
        self._count_answer("final", outcome.diagnosis)

        diagnose_s = _diagnosis_seconds(first_diagnosis)
        trace = outcome.repair
        if isinstance(outcome.second_repair, RepairTrace):
            diagnose_s = (diagnose_s or 0.0) + (_diagnosis_seconds(outcome.second_repair.diagnosis) or 0.0)
            self._observe_repair(outcome.second_repair)
        if isinstance(trace, RepairTrace):
            diagnose_s = (diagnose_s or 0.0) + (_diagnosis_seconds(trace.diagnosis) or 0.0)
            self._observe_repair(trace)
        elif isinstance(trace, RepairSkip):
            self.repairs_skipped.labels(bounded(trace.code, SKIP_REASONS)).inc()
            if trace.timed_out:  # the request succeeded, with its first answer: a model error only
                self.model_errors.labels("generator").inc()
        elif first_diagnosis is not None and first_diagnosis.failed:
            self.repairs_skipped.labels("disabled").inc()  # policy.repair is off
        if diagnose_s is not None:
            self.request_seconds.labels("diagnose").observe(diagnose_s)

        over = set(trace.over_budget) if isinstance(trace, RepairTrace) else set()
        if "request" not in over and outcome.seconds > self._request_budget_s():
            self.budget_violations.labels("request").inc()

    def _count_answer(self, pass_: str, diagnosis: Diagnosis | None) -> None:
        if diagnosis is None or not diagnosis.judged:
            label = UNDIAGNOSED if diagnosis is None else NOT_JUDGED
            self.answers.labels(pass_, label).inc()
            self.failure_stages.labels(pass_, label).inc()
        else:
            self.answers.labels(pass_, bounded(diagnosis.failure, FAILURE_TYPES)).inc()
            self.failure_stages.labels(pass_, bounded(diagnosis.stage, STAGES)).inc()
            if diagnosis.e_r.support is not None:
                self.answer_support.labels(pass_).observe(diagnosis.e_r.support)
            if diagnosis.verdict is not None:
                self.answer_unsupported.labels(pass_).observe(diagnosis.verdict.p_unsupported)
            for check in checks_against(diagnosis):
                self.diagnosis_checks.labels(pass_, check).inc()

    def _observe_route(self, route: Route) -> None:
        plan = bounded(route.plan, PLAN_LABELS) if route.plan is not None else CONFIGURED
        kind = bounded(route.kind, KIND_LABELS)
        self.plans.labels(plan, kind, bounded(route.chosen_by, CHOSEN_BY)).inc()
        if route.cost is not None:
            self.plan_seconds.labels(plan).observe(route.cost.latency_s)
        if route.reward is not None:
            self.plan_reward.labels(plan).observe(route.reward.total)
        d = route.decision
        if d is not None:
            for name, score in d.scores.items():
                label = bounded(name, PLAN_LABELS)
                self.plan_score.labels(label, "score").set(score)
                self.plan_score.labels(label, "exploit").set(d.exploit.get(name, 0.0))
                self.plan_score.labels(label, "explore").set(d.explore.get(name, 0.0))

    def _observe_repair(self, trace: RepairTrace) -> None:
        action = bounded(trace.action, self.actions)
        self.repair_actions.labels(bounded(trace.failure, FAILURE_TYPES), action).inc()
        self.request_seconds.labels("repair").observe(trace.cost.latency_s)
        self.action_seconds.labels(action).observe(trace.cost.latency_s)
        if trace.cost.memory_bytes is not None:
            self.action_bytes.labels(action).observe(trace.cost.memory_bytes)
        for source in MEMORY_SOURCES:
            self.memory_source.labels(source).set(1 if trace.cost.memory_source == source else 0)
        self.reward.labels(action).observe(trace.reward.total)
        if trace.success:
            self.repair_success.labels(action).inc()
        self.repair_kept.labels(action, bounded(trace.kept, KEPT)).inc()
        for budget in trace.over_budget:
            self.budget_violations.labels(bounded(budget, BUDGETS)).inc()
        d = trace.decision
        for arm, score in d.scores.items():
            arm_label = bounded(arm, self.actions)
            self.arm_score.labels(arm_label, "score").set(score)
            self.arm_score.labels(arm_label, "exploit").set(d.exploit.get(arm, 0.0))
            self.arm_score.labels(arm_label, "explore").set(d.explore.get(arm, 0.0))

    def observe_error(self, kind: str, *, status: int = 500, role: str | None = None) -> None:
        """Count one error response. `kind` is one of ERROR_KINDS; `role` (a model role) also
        counts it as a model error."""
        self.errors.labels(bounded(kind, ERROR_KINDS), _code_class(status)).inc()
        if role is not None:
            self.model_errors.labels(bounded(role, MODEL_ROLES)).inc()

    def observe_exception(self, exc: BaseException, status: int) -> None:
        """observe_error for an exception: its kind, and the generator role for a generator error
        (a ModelUnavailable does not say which role failed: counted under "unknown")."""
        kind = error_kind(exc)
        roles = {"generator": "generator", "generator_timeout": "generator", "model_unavailable": "unknown"}
        role = roles.get(kind)
        self.observe_error(kind, status=status, role=role)

    def observe_reload(self, ok: bool) -> None:
        """Count one reload of the tunable configuration (for the hot reload)."""
        self.config_reloads.labels("success" if ok else "failure").inc()

    def observe_config_change(self, source: str, ok: bool) -> None:
        """Count one runtime configuration change (source: admin, file or signal). A reload from
        the file or a signal also counts in ragmend_config_reloads_total."""
        self.config_changes.labels(bounded(source, CHANGE_SOURCES), "ok" if ok else "error").inc()
        if source in ("file", "signal"):
            self.observe_reload(ok)

    def current_settings(self) -> Settings:
        return self._current_settings()

    # --- exposition ---------------------------------------------------------------------------------

    content_type = CONTENT_TYPE_LATEST

    def exposition(self) -> bytes:
        """The text exposition of this registry (what GET /metrics returns)."""
        return generate_latest(self.registry)

    # --- values read at scrape time -----------------------------------------------------------------

    def policy(self) -> Policy | None:
        try:
            return self._policy()
        except Exception:  # a scrape must not fail because the policy store cannot be read
            log.warning("metrics: the policy could not be read", exc_info=True)
            return None

    def _request_budget_s(self) -> float:
        p = self.policy()
        return (p.config if p is not None else self.current_settings().policy).request_latency_budget_s

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


def checks_against(d: Diagnosis) -> list[str]:
    """The CHECKS that found against a diagnosed answer (a graph conflict its triple's passage
    entails counts as graph_entailed, not as a conflict)."""
    found: list[str] = [d.off_question] if d.off_question else []
    if d.comparison is not None and d.comparison.outcome == "disagrees":
        found.append("comparison")
    if d.alternatives is not None and d.alternatives.outcome == "disagrees":
        found.append("alternatives")
    if d.verdict is not None:  # the verdict's own rules (its score is no check)
        found += [r for r in d.verdict.unsupported_by if r != "score"]
    if d.kg.kappa == "conflict":
        found.append("graph_conflict")
    if any(m.verdict == "entailed" for m in d.kg.matches):
        found.append("graph_entailed")
    return [bounded(c, CHECKS) for c in found]


def _diagnosis_seconds(d: Diagnosis | None) -> float | None:
    if d is None:
        return None
    return d.timings.get("total_s")


class _StateCollector(Collector):
    """Gauges computed at scrape time from the policy, the engine and the machine."""

    def __init__(self, metrics: Metrics):
        self.m = metrics

    def describe(self) -> Iterator[Metric]:
        # Names only (no values): describe() must not touch the engine at registration.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        # Gauge and info families: each has its own add_metric signature, so they are kept untyped.
        fams: dict[str, Any] = {f.name: f for f in self._families()}
        m = self.m
        if m._ready is not None:
            fams["ragmend_ready"].add_metric([], 1.0 if m._ready() else 0.0)
        if m._index_generation is not None:
            gen = m._index_generation()
            if gen:
                fams["ragmend_index"].add_metric([], {"generation": gen})

        p = m.policy()
        cfg = p.config if p is not None else m.current_settings().policy
        if p is not None:
            latency_budget, memory_budget = p.budgets.latency_s, p.budgets.memory_bytes
            kind, learn, alpha = p.kind, p.learn, p.alpha
        else:
            latency_budget = cfg.latency_budget_s * cfg.budget_scale
            memory_budget = cfg.memory_budget_bytes * cfg.budget_scale
            kind, learn = cfg.kind, cfg.learn
            alpha = cfg.alpha if cfg.kind == "linucb" else None
        fams["ragmend_action_latency_budget_seconds"].add_metric([], latency_budget)
        fams["ragmend_action_memory_budget_bytes"].add_metric([], memory_budget)
        fams["ragmend_request_latency_budget_seconds"].add_metric([], cfg.request_latency_budget_s)
        fams["ragmend_policy_budget_scale"].add_metric([], cfg.budget_scale)
        if alpha is not None:  # alpha is LinUCB's; other kinds have no such series
            fams["ragmend_policy_alpha"].add_metric([], alpha)
        fams["ragmend_policy"].add_metric(
            [],
            {
                "kind": kind,
                "mode": "learn" if learn else "frozen",
                "reward_variant": cfg.reward_variant,
                "repair": "on" if cfg.repair else "off",
            },
        )
        fams["ragmend_policy_learning"].add_metric([], 1.0 if learn else 0.0)
        if p is not None:
            for arm, s in p.stats().items():
                label = [bounded(arm, m.actions)]
                fams["ragmend_policy_arm_pulls"].add_metric(label, s.pulls)
                fams["ragmend_policy_arm_successes"].add_metric(label, s.successes)
                if s.mean_reward is not None:
                    fams["ragmend_policy_arm_mean_reward"].add_metric(label, s.mean_reward)

        router = m.router()
        if router is not None:
            fams["ragmend_router_enabled"].add_metric([], 1.0 if router.enabled else 0.0)
            for plan, st in router.policy.stats().items():
                label = [bounded(plan, PLAN_LABELS)]
                fams["ragmend_router_plan_pulls"].add_metric(label, st.pulls)
                if st.mean_reward is not None:
                    fams["ragmend_router_plan_mean_reward"].add_metric(label, st.mean_reward)

        state = "available" if m.nvml_status() == "available" else "unavailable"
        for status in NVML_STATES:
            fams["ragmend_nvml_status"].add_metric([status], 1.0 if status == state else 0.0)
        yield from fams.values()

    @staticmethod
    def _families() -> Iterator[Metric]:
        yield GaugeMetricFamily("ragmend_ready", "1 when the models are loaded and the index is open.")
        yield InfoMetricFamily("ragmend_index", "The index generation requests are served from.")
        yield GaugeMetricFamily(
            "ragmend_action_latency_budget_seconds",
            "Latency budget of one repair action (policy.latency_budget_s times budget_scale).",
        )
        yield GaugeMetricFamily(
            "ragmend_action_memory_budget_bytes",
            "Memory budget of one repair action (policy.memory_budget_bytes times budget_scale).",
        )
        yield GaugeMetricFamily(
            "ragmend_request_latency_budget_seconds",
            "End-to-end latency budget of one request (policy.request_latency_budget_s).",
        )
        yield GaugeMetricFamily("ragmend_policy_budget_scale", "policy.budget_scale.")
        yield GaugeMetricFamily("ragmend_policy_alpha", "LinUCB's exploration weight alpha (linucb only).")
        yield InfoMetricFamily("ragmend_policy", "The repair policy: kind, learn|frozen, reward variant.")
        yield GaugeMetricFamily("ragmend_policy_learning", "1 when the policy learns, 0 when frozen.")
        # Gauges, not counters: reset and import of the policy state lower them.
        yield GaugeMetricFamily(
            "ragmend_policy_arm_pulls",
            "Updates learned per arm, from the policy's state store (all replicas sharing it).",
            labels=["action"],
        )
        yield GaugeMetricFamily(
            "ragmend_policy_arm_successes",
            "Updates per arm whose reward reached the success threshold (policy.beta_threshold).",
            labels=["action"],
        )
        yield GaugeMetricFamily(
            "ragmend_policy_arm_mean_reward",
            "Mean reward per arm over its learned updates (absent before the first).",
            labels=["action"],
        )
        yield GaugeMetricFamily("ragmend_router_enabled", "1 when the router chooses first passes.")
        yield GaugeMetricFamily(
            "ragmend_router_plan_pulls",
            "Updates the router learned per plan, from its state store (all replicas sharing it).",
            labels=["plan"],
        )
        yield GaugeMetricFamily(
            "ragmend_router_plan_mean_reward",
            "Mean reward per plan over the router's learned updates (absent before the first).",
            labels=["plan"],
        )
        yield GaugeMetricFamily(
            "ragmend_nvml_status",
            "1 on the NVML state of this machine: available (memory metered on the GPU) or "
            "unavailable (RSS fallback).",
            labels=["status"],
        )
