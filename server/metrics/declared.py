"""Every metric of the server, declared once: its name, type, help text, labels with their closed
value sets, buckets, and the series that exist at zero from the first scrape.

A label's value outside its closed set is counted as "other", so a new value never creates an
unbounded series and no user text ever becomes a label; the sets come from the events that carry
the values (engine/events.py, server/events.py). `Metrics` creates each series from its
declaration and zero-initialises what the declaration names; the scrape-time gauges (`scraped`)
are built from theirs at every scrape.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ragmend.budgets import MB
from ragmend.diagnosis.types import FAILURE_TYPES, STAGES
from ragmend.engine import events as answered
from ragmend.models.registry import ROLES
from ragmend.server import events as served
from ragmend.settings import Settings

OTHER = "other"

# --- buckets --------------------------------------------------------------------------------------

# Stages span three decades: retrieval in milliseconds, diagnosis 0.05-5 s, generation and whole
# requests 1-30 s on CPU (docs/benchmarks.md); the request budget is 30 s by default.
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 12, 20, 30, 45, 60, 120)
# A repair pass repeats a CPU generation (4-8 s) against a 12 s default budget.
ACTION_LATENCY_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 8, 10, 12, 15, 20, 30, 60)
# Peak memory growth of a repair pass: the paper's budget is 6 MiB of accelerator memory; on CPU
# it is resident-set growth, which can reach hundreds of MiB when a model's buffers grow.
ACTION_MEMORY_BUCKETS = tuple(float(mib * MB) for mib in (0, 0.25, 1, 2, 4, 6, 8, 16, 32, 64, 128, 256, 1024))
# Dimensionless scores in [0, 1]: the repair reward and the answers' support. The "unconstrained"
# reward variant's overrun penalty is negative: it lands in le=0, and no bucket is negative because
# prometheus_client leaves out _sum (which the mean reward needs) when one is.
REWARD_BUCKETS = (0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1)

# --- labels ---------------------------------------------------------------------------------------

Values = tuple[str, ...]
FromSettings = Callable[[Settings], Sequence[str]]


@dataclass(frozen=True)
class Label:
    """A label and its closed set. `values` None: bounded by the configuration, not here (the
    collections an admin creates). `initial`: the values created at zero (default: all of
    `values`; a callable reads them from the settings)."""

    name: str
    values: Values | None
    initial: Values | FromSettings | None = None

    def bound(self, value: str) -> str:
        return value if self.values is None or value in self.values else OTHER

    def at_zero(self, settings: Settings) -> Sequence[str]:
        if self.initial is None:
            return self.values or ()
        return self.initial(settings) if callable(self.initial) else self.initial


def _enabled_actions(settings: Settings) -> Sequence[str]:
    # The Engine refuses unknown action names; a Metrics built from settings alone skips them.
    return [a for a in settings.policy.enabled_actions if a in answered.ACTIONS]


def _routed_plans(settings: Settings) -> Sequence[str]:
    return [Label("plan", answered.PLANS).bound(p) for p in settings.router.plans]


PASS = Label("pass", answered.PASSES)
ACTION = Label("action", answered.ACTIONS, _enabled_actions)
SCORE_PART = Label("part", ("score", "exploit", "explore"), ())
PLAN = Label("plan", answered.PLANS, lambda s: [*_routed_plans(s), answered.CONFIGURED])

# --- the series ---------------------------------------------------------------------------------

Kind = Literal["counter", "gauge", "histogram", "info", "scraped_gauge", "scraped_info"]
SeriesAtZero = Callable[[Settings], Iterable[tuple[str, ...]]]


@dataclass(frozen=True, kw_only=True)
class Declared:
    """One metric. `at_zero`, when given, lists the series created at zero where they are not
    every combination of the labels' initial values."""

    name: str
    kind: Kind
    doc: str
    labels: tuple[Label, ...] = ()
    buckets: tuple[float, ...] = ()
    at_zero: SeriesAtZero | None = None

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)

    @property
    def scraped(self) -> bool:
        return self.kind.startswith("scraped_")

    def bound(self, values: Sequence[str]) -> tuple[str, ...]:
        return tuple(label.bound(v) for label, v in zip(self.labels, values, strict=True))

    def series_at_zero(self, settings: Settings) -> list[tuple[str, ...]]:
        if self.at_zero is not None:
            return list(self.at_zero(settings))
        if not self.labels:
            return []
        return list(itertools.product(*(label.at_zero(settings) for label in self.labels)))


def _errors_at_zero(settings: Settings) -> Iterable[tuple[str, str]]:
    server_side = ("generator", "generator_timeout", "request_timeout", "overloaded", "model_unavailable")
    for kind in (*server_side, "internal"):
        yield kind, "5xx"
    yield "input", "4xx"
    yield "auth", "4xx"


def _plans_at_zero(settings: Settings) -> Iterable[tuple[str, str, str]]:
    for plan in _routed_plans(settings):
        for kind in answered.KINDS:
            yield plan, kind, "router"
    for kind in answered.KINDS:
        yield answered.CONFIGURED, kind, "off"


BUILD = Declared(name="ragmend_build", kind="info", doc="The ragmend version serving.")

# Requests
REQUEST_SECONDS = Declared(
    name="ragmend_request_duration_seconds",
    kind="histogram",
    doc="Seconds per request stage: retrieve, rerank, generate (the first pass), diagnose (every "
    "diagnosis of the request), repair (the metered repair pass), total (end to end).",
    labels=(Label("stage", answered.REQUEST_STAGES),),
    buckets=STAGE_BUCKETS,
)
ANSWERS = Declared(
    name="ragmend_answers_total",
    kind="counter",
    doc="Answers by diagnosed failure type; pass=first is the first answer, pass=final the one "
    "the reply carries (the repaired one when it is better supported).",
    labels=(PASS, Label("failure", answered.FAILURES, FAILURE_TYPES)),
)
ANSWER_SUPPORT = Declared(
    name="ragmend_answer_support",
    kind="histogram",
    doc="Support of each answer's claims by its evidence, per pass: the mean over claims of the "
    "best P(entail) any passage gives it (diagnosis e_r.support; answers without claims, such "
    "as abstentions, are not observed). The graded form of the entail verdict.",
    labels=(PASS,),
    buckets=REWARD_BUCKETS,
)
ANSWER_UNSUPPORTED = Declared(
    name="ragmend_answer_p_unsupported",
    kind="histogram",
    doc="The diagnosis verdict's calibrated P(unsupported) of each answer, per pass (answers "
    "diagnosed without a verdict model are not observed). An answer fails at or above the "
    "configured threshold (diagnosis.unsupported_threshold, or the model's own).",
    labels=(PASS,),
    buckets=REWARD_BUCKETS,
)
COLLECTION_REQUESTS = Declared(
    name="ragmend_collection_requests_total",
    kind="counter",
    doc="Answered requests by the corpus that answered: default, or a collection's name "
    "(docs/collections.md; one series per collection, which admins create).",
    labels=(Label("collection", None, ()),),
)
GENERATOR_TOKENS = Declared(
    name="ragmend_generator_tokens_total",
    kind="counter",
    doc="Tokens of every generator call of the answered requests, by purpose (answer: first "
    "pass, repair: the repair pass, rewrite: query rewrites, condense: follow-ups made "
    "standalone, other) and kind (prompt, completion).",
    labels=(Label("purpose", answered.TOKEN_PURPOSES, ()), Label("kind", answered.TOKEN_KINDS, ())),
)
FAILURE_STAGES = Declared(
    name="ragmend_failure_stages_total",
    kind="counter",
    doc="Answers by the pipeline stage the diagnosis blames (none: no failure), per pass.",
    labels=(PASS, Label("stage", answered.FAILURE_STAGES, STAGES)),
)
DIAGNOSIS_CHECKS = Declared(
    name="ragmend_diagnosis_checks_total",
    kind="counter",
    doc="Answers each diagnosis check found against, per pass: what of the question the answer "
    "does not address (subject, relation, kind, year, restated, choice), a "
    "comparison in time or a choice of attribute the passages decide the other way "
    "(comparison, alternatives), a claim a passage refutes or an answer no passage "
    "supports, whatever its score (refuted, unbacked), a knowledge-graph conflict "
    "(graph_conflict), and graph conflicts the "
    "passage of their triple entails (graph_entailed: not conflicts; the graph's false alarms).",
    labels=(PASS, Label("check", answered.CHECKS)),
)
REQUESTS_IN_FLIGHT = Declared(
    name="ragmend_requests_in_flight",
    kind="gauge",
    doc="Model-work slots taken: requests being answered, and the work of timed-out ones still "
    "running (at most server.max_concurrency).",
)
QUEUE_DEPTH = Declared(
    name="ragmend_queue_depth",
    kind="gauge",
    doc="Requests waiting for a model-work slot (server.max_concurrency); at most server.max_queue.",
)
REFUSED = Declared(
    name="ragmend_requests_refused_total",
    kind="counter",
    doc="Requests refused with a 503 before any model work, by where: on arrival (the queue is "
    "full, or its predicted wait and service end past the deadline), in the queue (the "
    "deadline passed while waiting), at the start (the time left no longer covers the "
    "predicted service).",
    labels=(Label("at", served.REFUSED_AT),),
)
CANCELLED = Declared(
    name="ragmend_requests_cancelled_total",
    kind="counter",
    doc="Requests whose model work was stopped, by why (their deadline passed, or their client "
    "disconnected) and where the work stopped: retrieval, generator, diagnosis, repair "
    "(before the stage or inside it), finished (it ended before it looked), failed, other.",
    labels=(Label("reason", served.CANCEL_REASONS), Label("stopped_at", served.STOPPED_AT)),
)
GENERATOR_REQUEST_SECONDS = Declared(
    name="ragmend_generator_request_seconds_total",
    kind="counter",
    doc="Generator seconds spent for requests, by whether their answer reached the client "
    "(answered) or not (wasted: cancelled or abandoned work).",
    labels=(Label("outcome", served.GENERATOR_OUTCOMES),),
)
GENERATOR_SECONDS = Declared(
    name="ragmend_generator_seconds_total",
    kind="counter",
    doc="Seconds answered requests spent in each generator role's calls: holding the in-process "
    "model (held; a remote call's whole time) or waiting for another request's generation to "
    "release it (waiting). Where the time goes under load.",
    labels=(Label("role", answered.GENERATOR_ROLES), Label("phase", answered.GENERATOR_PHASES)),
)
ADMISSION_PREDICTED = Declared(
    name="ragmend_admission_predicted_seconds",
    kind="gauge",
    doc="What admission predicts, measured online: first_pass_<n>, the 95th percentile of a "
    "request's answer and diagnosis once it holds a slot with n requests running (itself "
    "included; 8: 8 or more); slot_interval, the mean interval between two slots freeing "
    "while requests wait (repairs included).",
    labels=(Label("estimate", served.ESTIMATES, ()),),
)

CHECKED_ANSWERS = Declared(
    name="ragmend_checked_answers_total",
    kind="counter",
    doc="Answers checked by POST /v1/diagnose (each item of a batch), by verdict: supported, "
    "unsupported (the diagnosis found a failure), not_judged (not English).",
    labels=(Label("verdict", answered.CHECK_VERDICTS),),
)
CHECK_SECONDS = Declared(
    name="ragmend_check_duration_seconds",
    kind="histogram",
    doc="Seconds per checked answer (/v1/diagnose): retrieval, when it retrieved, and diagnosis.",
    buckets=STAGE_BUCKETS,
)

# Repairs
REPAIR_ACTIONS = Declared(
    name="ragmend_repair_actions_total",
    kind="counter",
    doc="Repair actions chosen by the policy, by the failure type they repaired.",
    labels=(
        Label("failure", FAILURE_TYPES, FAILURE_TYPES[1:]),
        ACTION,
    ),  # at zero: every failure but NoFailure
)
ACTION_SECONDS = Declared(
    name="ragmend_action_latency_seconds",
    kind="histogram",
    doc="Measured latency of the repair pass (the action and the pipeline pass it patched).",
    labels=(ACTION,),
    buckets=ACTION_LATENCY_BUCKETS,
)
ACTION_BYTES = Declared(
    name="ragmend_action_memory_bytes",
    kind="histogram",
    doc="Peak memory growth during the repair pass (NVML device memory, or process RSS where no "
    "NVIDIA GPU is readable: see ragmend_memory_source). Not observed when nothing was readable.",
    labels=(ACTION,),
    buckets=ACTION_MEMORY_BUCKETS,
)
BUDGET_VIOLATIONS = Declared(
    name="ragmend_budget_violations_total",
    kind="counter",
    doc="Budgets overrun: action_latency and action_memory by a repair pass, request by a whole "
    "request (with or without a repair) over the end-to-end latency budget.",
    labels=(Label("budget", answered.BUDGETS),),
)
REPAIR_REWARD = Declared(
    name="ragmend_repair_reward",
    kind="histogram",
    doc="Reward of each repair (Eq. 2: quality times the latency and memory factors).",
    labels=(ACTION,),
    buckets=REWARD_BUCKETS,
)
REPAIR_SUCCESS = Declared(
    name="ragmend_repair_success_total",
    kind="counter",
    doc="Repairs after which the failure was gone (the repaired answer diagnosed NoFailure).",
    labels=(ACTION,),
)
REPAIR_KEPT = Declared(
    name="ragmend_repair_kept_total",
    kind="counter",
    doc="Repairs by the answer the reply carries: repaired (better supported), original, "
    "abstained or conflict.",
    labels=(ACTION, Label("kept", answered.KEPT)),
)
REPAIRS_SKIPPED = Declared(
    name="ragmend_repairs_skipped_total",
    kind="counter",
    doc="Failed answers that got no repair, by reason class.",
    labels=(Label("reason", answered.SKIP_REASONS, (*answered.SKIP_REASONS, OTHER)),),
)
ARM_SCORE = Declared(
    name="ragmend_policy_arm_score",
    kind="gauge",
    doc="The score of each feasible arm in the latest decision that weighed it (part=score is "
    "exploit + explore; LinUCB: x'theta and alpha*sqrt(x'A^-1 x)).",
    labels=(Label("action", answered.ACTIONS, ()), SCORE_PART),
)
MEMORY_SOURCE = Declared(
    name="ragmend_memory_source",
    kind="gauge",
    doc="Where the latest repair pass's memory reading came from (1 for that source, 0 otherwise).",
    labels=(Label("source", answered.MEMORY_SOURCES),),
)

# The router
ROUTER_PLANS = Declared(
    name="ragmend_router_plans_total",
    kind="counter",
    doc="First passes by the plan they ran on (configured: the rag section's, when the router "
    "did not choose), the kind of question (claim, choice, yes_no, who, what, ...) and who "
    "chose (router, request: its config set a plan key, off, nothing_fits: no plan fitted "
    "the time left).",
    labels=(
        Label("plan", answered.PLANS),
        Label("kind", answered.KINDS),
        Label("chosen_by", answered.CHOSEN_BY),
    ),
    at_zero=_plans_at_zero,
)
ROUTER_FIRST_PASS_SECONDS = Declared(
    name="ragmend_router_first_pass_seconds",
    kind="histogram",
    doc="Measured seconds of each first pass (retrieval and generation) by its plan.",
    labels=(PLAN,),
    buckets=STAGE_BUCKETS,
)
ROUTER_REWARD = Declared(
    name="ragmend_router_reward",
    kind="histogram",
    doc="The router's reward of each routed first pass (Eq. 2 of its diagnosis at its cost).",
    labels=(Label("plan", answered.PLANS, _routed_plans),),
    buckets=REWARD_BUCKETS,
)
ROUTER_PLAN_SCORE = Declared(
    name="ragmend_router_plan_score",
    kind="gauge",
    doc="The score of each feasible plan in the router's latest decision that weighed it "
    "(part=score is exploit + explore).",
    labels=(Label("plan", answered.PLANS, ()), SCORE_PART),
)

# Errors and operations
ERRORS = Declared(
    name="ragmend_errors_total",
    kind="counter",
    doc="Requests answered with an error, by error kind and HTTP status class.",
    labels=(Label("kind", served.ERROR_KINDS), Label("code_class", ("4xx", "5xx"))),
    at_zero=_errors_at_zero,
)
MODEL_ERRORS = Declared(
    name="ragmend_model_errors_total",
    kind="counter",
    doc="Model load or inference errors by model role.",
    labels=(Label("role", served.MODEL_ROLES, ROLES),),
)
CONFIG_RELOADS = Declared(
    name="ragmend_config_reloads_total",
    kind="counter",
    doc="Reloads of the tunable configuration, by result.",
    labels=(Label("result", ("success", "failure")),),
)
CONFIG_CHANGES = Declared(
    name="ragmend_config_changes_total",
    kind="counter",
    doc="Runtime configuration changes by source (admin request, changed file, SIGHUP) and result.",
    labels=(Label("source", served.CHANGE_SOURCES), Label("result", ("ok", "error"))),
)

# Read from the policy, the router, the engine and the machine at every scrape (metrics/scraped.py):
# a value changed at run time (admin endpoint, hot reload) shows on the next scrape. The arms' and
# plans' counts are gauges, not counters: a reset or an import of the policy state lowers them.
READY = Declared(
    name="ragmend_ready", kind="scraped_gauge", doc="1 when the models are loaded and the index is open."
)
INDEX = Declared(
    name="ragmend_index", kind="scraped_info", doc="The index generation requests are served from."
)
ACTION_LATENCY_BUDGET = Declared(
    name="ragmend_action_latency_budget_seconds",
    kind="scraped_gauge",
    doc="Latency budget of one repair action (policy.latency_budget_s times budget_scale).",
)
ACTION_MEMORY_BUDGET = Declared(
    name="ragmend_action_memory_budget_bytes",
    kind="scraped_gauge",
    doc="Memory budget of one repair action (policy.memory_budget_bytes times budget_scale).",
)
REQUEST_LATENCY_BUDGET = Declared(
    name="ragmend_request_latency_budget_seconds",
    kind="scraped_gauge",
    doc="End-to-end latency budget of one request (policy.request_latency_budget_s).",
)
BUDGET_SCALE = Declared(name="ragmend_policy_budget_scale", kind="scraped_gauge", doc="policy.budget_scale.")
ALPHA = Declared(
    name="ragmend_policy_alpha", kind="scraped_gauge", doc="LinUCB's exploration weight alpha (linucb only)."
)
POLICY = Declared(
    name="ragmend_policy", kind="scraped_info", doc="The repair policy: kind, learn|frozen, reward variant."
)
LEARNING = Declared(
    name="ragmend_policy_learning", kind="scraped_gauge", doc="1 when the policy learns, 0 when frozen."
)
ARM_PULLS = Declared(
    name="ragmend_policy_arm_pulls",
    kind="scraped_gauge",
    doc="Updates learned per arm, from the policy's state store (all replicas sharing it).",
    labels=(ACTION,),
)
ARM_SUCCESSES = Declared(
    name="ragmend_policy_arm_successes",
    kind="scraped_gauge",
    doc="Updates per arm whose reward reached the success threshold (policy.beta_threshold).",
    labels=(ACTION,),
)
ARM_MEAN_REWARD = Declared(
    name="ragmend_policy_arm_mean_reward",
    kind="scraped_gauge",
    doc="Mean reward per arm over its learned updates (absent before the first).",
    labels=(ACTION,),
)
ROUTER_ENABLED = Declared(
    name="ragmend_router_enabled", kind="scraped_gauge", doc="1 when the router chooses first passes."
)
ROUTER_PLAN_PULLS = Declared(
    name="ragmend_router_plan_pulls",
    kind="scraped_gauge",
    doc="Updates the router learned per plan, from its state store (all replicas sharing it).",
    labels=(PLAN,),
)
ROUTER_PLAN_MEAN_REWARD = Declared(
    name="ragmend_router_plan_mean_reward",
    kind="scraped_gauge",
    doc="Mean reward per plan over the router's learned updates (absent before the first).",
    labels=(PLAN,),
)
NVML_STATUS = Declared(
    name="ragmend_nvml_status",
    kind="scraped_gauge",
    doc="1 on the NVML state of this machine: available (memory metered on the GPU) or "
    "unavailable (RSS fallback).",
    labels=(Label("status", ("available", "unavailable")),),
)

DECLARED: tuple[Declared, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Declared))
