"""The engine's events (ragmend/instrumentation.py): what one answered request did, told once it
is answered, so a request that fails or is cancelled is told by the server's events instead.

    PlanChosen        the first pass's plan, who chose it, its measured cost and reward
    AnswerDiagnosed   the first answer's diagnosis, then the one of the answer the reply carries
    RepairRan         a repair pass: its action, cost, reward, what it left (one or two per request)
    RepairSkipped     a failed answer that got no repair, and why
    RequestAnswered   the request's stage times, its generator tokens, its budget
    AnswerChecked     an answer ragmend did not write, diagnosed (/v1/diagnose, engine/checking.py)

Each field that a metric uses as a label takes its values from the closed set named beside it
here; those sets are what the metrics declare their labels with (server/metrics/).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import get_args

from ragmend.actions.catalogue import ACTIONS_BY_NAME
from ragmend.actions.meter import MemorySource
from ragmend.diagnosis.question_form import QUESTION_KINDS
from ragmend.diagnosis.types import FAILURE_TYPES, OFF_QUESTION, STAGES, Diagnosis
from ragmend.engine.outcome import Outcome
from ragmend.engine.plans import PLAN_NAMES
from ragmend.engine.repair import SKIP_CODES, Kept, RepairSkip, RepairTrace
from ragmend.engine.router import ChosenBy, Route
from ragmend.instrumentation import Event, Events
from ragmend.models.generation import PURPOSES
from ragmend.policy.types import Decision

log = logging.getLogger("ragmend.engine")

# --- the closed sets of the events' fields ----------------------------------------------------------

PASSES = ("first", "final")  # the first pass's diagnosis, and the one of the answer the reply carries
UNDIAGNOSED = "undiagnosed"  # diagnosis.enabled is off: the answer has no failure type or stage
NOT_JUDGED = "not_judged"  # the diagnosis could not read the answer (not English): no type or stage
FAILURES = (*FAILURE_TYPES, UNDIAGNOSED, NOT_JUDGED)
FAILURE_STAGES = (*STAGES, UNDIAGNOSED, NOT_JUDGED)
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
REQUEST_STAGES = ("retrieve", "rerank", "generate", "diagnose", "repair", "total")
ACTIONS = tuple(sorted(ACTIONS_BY_NAME))
KEPT = tuple(k.value for k in Kept)
BUDGETS = ("action_latency", "action_memory", "request")
GENERATOR_ROLES = ("generator", "escalation")
GENERATOR_PHASES = ("held", "waiting")
MEMORY_SOURCES: tuple[MemorySource, ...] = get_args(MemorySource)
# Why no repair ran: the skip's code (engine/repair.py SkipCode), or "disabled" (policy.repair is off).
SKIP_REASONS = (*SKIP_CODES, "disabled")
CONFIGURED = "configured"  # a first pass the router did not choose ran on the rag section's plan
PLANS = (*PLAN_NAMES, CONFIGURED)
KINDS = QUESTION_KINDS
CHOSEN_BY: tuple[ChosenBy, ...] = get_args(ChosenBy)
TOKEN_PURPOSES = PURPOSES
TOKEN_KINDS = ("prompt", "completion")
CHECK_VERDICTS = ("supported", "unsupported", "not_judged")


# --- the events -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """One option's score in a bandit's decision (score = exploit + explore)."""

    name: str
    score: float
    exploit: float
    explore: float


@dataclass(frozen=True, kw_only=True)
class PlanChosen(Event):
    plan: str  # PLANS
    kind: str  # KINDS: the question's kind
    chosen_by: str  # CHOSEN_BY
    seconds: float | None  # the first pass as measured (retrieval and generation)
    reward: float | None  # the router's reward of it (Eq. 2); None when nothing was judged
    scores: tuple[Scored, ...]  # every feasible plan of the router's decision; () when it made none


@dataclass(frozen=True, kw_only=True)
class AnswerDiagnosed(Event):
    pass_name: str  # PASSES
    failure: str  # FAILURES
    stage: str  # FAILURE_STAGES: the stage the diagnosis blames (none: no failure)
    support: float | None  # e_r.support: the mean best P(entail) of the answer's claims
    p_unsupported: float | None  # the verdict's calibrated P(unsupported)
    checks: tuple[str, ...]  # CHECKS that found against the answer


@dataclass(frozen=True, kw_only=True)
class RepairRan(Event):
    action: str  # ACTIONS
    failure: str  # FAILURE_TYPES: the failure it repaired
    seconds: float  # the repair pass as measured (the action and the pass it patched)
    memory_bytes: int | None  # peak memory growth; None when nothing was readable
    memory_source: str  # MEMORY_SOURCES
    reward: float
    success: bool  # the failure is gone after it
    kept: Kept  # which answer the reply carries
    over_budget: tuple[str, ...]  # BUDGETS the pass overran
    scores: tuple[Scored, ...]  # every feasible action of the policy's decision


@dataclass(frozen=True)
class RepairSkipped(Event):
    reason: str  # SKIP_REASONS
    timed_out: bool  # the repair that started was abandoned: the generator's error, not a budget's


@dataclass(frozen=True)
class RequestAnswered(Event):
    collection: str  # "default", or the collection that answered
    stage_seconds: tuple[tuple[str, float], ...]  # (REQUEST_STAGES, seconds) of the stages measured
    tokens: tuple[tuple[str, int, int], ...]  # (TOKEN_PURPOSES, prompt, completion) per purpose
    over_request_budget: bool  # the whole request outran policy.request_latency_budget_s
    # (GENERATOR_ROLES, seconds holding the model, seconds waiting for it) per role it called
    generator_seconds: tuple[tuple[str, float, float], ...] = ()


@dataclass(frozen=True)
class AnswerChecked(Event):
    verdict: str  # CHECK_VERDICTS: unsupported when the diagnosis finds a failure
    seconds: float  # the check: retrieval (when it retrieved) and diagnosis


def checked_event(d: Diagnosis, seconds: float) -> AnswerChecked:
    verdict = "not_judged" if not d.judged else "unsupported" if d.failed else "supported"
    return AnswerChecked(verdict, seconds)


# --- an Outcome as events -----------------------------------------------------------------------------


def emit_answer(events: Events, outcome: Outcome, request_budget_s: float) -> None:
    """Tell `events` what the answered request did (a fault here is logged: never the answer's)."""
    if not events.handlers:
        return
    try:
        told = tuple(answer_events(outcome, request_budget_s))
    except Exception:
        log.exception("events: an outcome could not be told")
        return
    events.emit_all(told)


def answer_events(outcome: Outcome, request_budget_s: float) -> Iterator[Event]:
    """The events of one answered request, in the order they happened."""
    if outcome.route is not None:
        yield plan_chosen(outcome.route)
    first_diagnosis = outcome.first_diagnosis or outcome.diagnosis
    yield answer_diagnosed("first", first_diagnosis)
    yield answer_diagnosed("final", outcome.diagnosis)
    trace = outcome.repair
    if isinstance(trace, RepairTrace):
        yield repair_ran(trace)
    elif isinstance(trace, RepairSkip):
        yield RepairSkipped(trace.code, trace.timed_out)
    elif first_diagnosis is not None and first_diagnosis.failed:
        yield RepairSkipped("disabled", False)  # policy.repair is off
    if isinstance(outcome.second_repair, RepairTrace):
        yield repair_ran(outcome.second_repair)
    over = trace.over_budget if isinstance(trace, RepairTrace) else ()
    yield RequestAnswered(
        collection=outcome.collection,
        stage_seconds=tuple(_stage_seconds(outcome)),
        tokens=tuple((p, t.prompt_tokens, t.completion_tokens) for p, t in outcome.usage.items()),
        over_request_budget="request" not in over and outcome.seconds > request_budget_s,
        generator_seconds=outcome.generator_roles,
    )


def plan_chosen(route: Route) -> PlanChosen:
    return PlanChosen(
        plan=route.plan if route.plan is not None else CONFIGURED,
        kind=route.kind,
        chosen_by=route.chosen_by,
        seconds=route.cost.latency_s if route.cost is not None else None,
        reward=route.reward.total if route.reward is not None else None,
        scores=scored(route.decision),
    )


def answer_diagnosed(pass_name: str, d: Diagnosis | None) -> AnswerDiagnosed:
    if d is None or not d.judged:
        label = UNDIAGNOSED if d is None else NOT_JUDGED
        return AnswerDiagnosed(
            pass_name=pass_name, failure=label, stage=label, support=None, p_unsupported=None, checks=()
        )
    return AnswerDiagnosed(
        pass_name=pass_name,
        failure=d.failure,
        stage=d.stage,
        support=d.e_r.support,
        p_unsupported=d.verdict.p_unsupported if d.verdict is not None else None,
        checks=tuple(checks_against(d)),
    )


def repair_ran(trace: RepairTrace) -> RepairRan:
    return RepairRan(
        action=trace.action,
        failure=trace.failure,
        seconds=trace.cost.latency_s,
        memory_bytes=trace.cost.memory_bytes,
        memory_source=trace.cost.memory_source,
        reward=trace.reward.total,
        success=trace.success,
        kept=trace.kept,
        over_budget=tuple(trace.over_budget),
        scores=scored(trace.decision),
    )


def scored(d: Decision | None) -> tuple[Scored, ...]:
    if d is None:
        return ()
    return tuple(
        Scored(name, score, d.exploit.get(name, 0.0), d.explore.get(name, 0.0))
        for name, score in d.scores.items()
    )


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
    return found


def _stage_seconds(outcome: Outcome) -> Iterator[tuple[str, float]]:
    """The first pass's stages, every diagnosis of the request together, and the whole request;
    the repair pass's time is its RepairRan's."""
    first = outcome.first or outcome.answer
    t = first.timings
    yield "retrieve", t.retrieve_s
    if first.config.rerank:  # 0 s when the pass did not rerank: not a measurement
        yield "rerank", t.rerank_s
    yield "generate", t.generate_s
    yield "total", outcome.seconds
    seconds = _diagnosis_seconds(outcome.first_diagnosis or outcome.diagnosis)
    for repair in (outcome.repair, outcome.second_repair):
        if isinstance(repair, RepairTrace):
            seconds = (seconds or 0.0) + (_diagnosis_seconds(repair.diagnosis) or 0.0)
    if seconds is not None:
        yield "diagnose", seconds


def _diagnosis_seconds(d: Diagnosis | None) -> float | None:
    return None if d is None else d.timings.get("total_s")
