"""The router: each request's first-pass plan, chosen before any answer exists (question form,
embedding, time left), learned from the first answer's diagnosis and from users' votes, persisted,
switched off or pinned by configuration and requests; with the real models (tiny generator in
both roles), real HTTP, and the router's state in SQLite."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from ragmend.actions.catalogue import CostModel
from ragmend.actions.meter import Cost
from ragmend.diagnosis.question_form import question_form
from ragmend.diagnosis.types import ABSTAINED, Diagnosis, NLISignal, Verdict
from ragmend.engine import Engine
from ragmend.engine.plans import PLAN_KEYS, PLANS, PLANS_BY_NAME, feasible_plans, pinned
from ragmend.engine.router import Router, plan_reward, router_state_path
from ragmend.errors import ConfigError
from ragmend.models.registry import ModelRegistry
from ragmend.policy.plan_context import PlanContextBuilder
from ragmend.policy.store import MemoryStore
from ragmend.settings import Settings, settings_with
from tests.conftest import LiveServer, sample_questions
from tests.test_cancel import held_by_another_thread
from tests.test_policy import diagnosis
from tests.test_repair import UNANSWERABLE


def test_every_plan_sets_every_plan_key_and_a_request_that_sets_one_pins_its_pass() -> None:
    for plan in PLANS:
        assert set(plan.overrides) == set(PLAN_KEYS)
        assert (plan.requires == "escalation") == (plan.generator == "escalation")
    assert PLANS_BY_NAME["default_hybrid_rerank"].overrides["k"] == 20  # candidates, cut back to 5
    assert pinned({"k": 10, "temperature": 0.2}) == ("k",)
    assert pinned({"temperature": 0.2, "prompt": "claim"}) == () and pinned(None) == ()


def test_plans_are_masked_without_the_stronger_generator_or_the_time_to_run() -> None:
    costs = CostModel()
    names = [p.name for p in PLANS]
    ok, masked = feasible_plans(names, costs, time_left_s=60.0, base_pass_s=2.0, missing={"escalation"})
    assert {p.generator for p in ok} == {"default"}
    assert all("models.escalation" in m.reason for m in masked)
    # Measured passes price a plan: a slow one is masked when the time left is short.
    for _ in range(3):
        costs.observe("large_hybrid", 9.0, None)
    ok, masked = feasible_plans(["default_hybrid", "large_hybrid"], costs, time_left_s=5.0, base_pass_s=2.0)
    assert [p.name for p in ok] == ["default_hybrid"]
    assert masked[0].name == "large_hybrid" and "9.00 s > 5.00 s left" in masked[0].reason


def first_pass(e_r: NLISignal, answerable: float, p_unsupported: float) -> Diagnosis:
    """A first answer's diagnosis: its e_r, the evidence's P(answerable) (e_q's support) and the
    verdict's P(unsupported)."""
    verdict = Verdict(
        p_unsupported=p_unsupported,
        threshold=0.5,
        unsupported=p_unsupported >= 0.5,
        rule_failure="NoFailure",
        features={},
    )
    failure = "IE" if e_r.construction == ABSTAINED else "NoFailure"
    e_q = NLISignal("entail", (), "answerability", support=answerable)
    return dataclasses.replace(diagnosis(failure), e_q=e_q, e_r=e_r, verdict=verdict)


def test_a_first_answer_that_abstains_is_rewarded_as_an_abstention() -> None:
    cfg = Settings().policy
    cost = Cost(latency_s=3.0, memory_bytes=None, memory_source="unavailable", nvml="unavailable: test")
    abstains = NLISignal("neutral", (), ABSTAINED)
    answers = NLISignal("entail", (), "claims")
    time_factor = 1 - 3.0 / cfg.request_latency_budget_s
    # "I don't know." over evidence that answers the question earns little; over evidence that
    # does not, nearly what a supported answer earns, whatever the verdict's P(unsupported).
    missed = plan_reward(cfg, first_pass(abstains, answerable=0.9, p_unsupported=0.5), cost)
    honest = plan_reward(cfg, first_pass(abstains, answerable=0.1, p_unsupported=0.5), cost)
    supported = plan_reward(cfg, first_pass(answers, answerable=0.9, p_unsupported=0.1), cost)
    assert missed.total == pytest.approx(0.1 * time_factor, abs=1e-6)
    assert honest.total == pytest.approx(0.9 * time_factor, abs=1e-6)
    assert supported.total == pytest.approx(0.9 * time_factor, abs=1e-6)


def test_a_plan_is_rewarded_for_its_own_seconds_not_for_the_queue_it_waited_in() -> None:
    cfg = Settings().policy
    answers = first_pass(NLISignal("entail", (), "claims"), answerable=0.9, p_unsupported=0.1)
    alone = Cost(latency_s=2.0, memory_bytes=None, memory_source="unavailable", nvml="unavailable: test")
    queued = dataclasses.replace(alone, latency_s=9.0, waited_s=7.0)  # the same pass behind others
    assert queued.service_s == pytest.approx(2.0)
    assert plan_reward(cfg, answers, queued).total == pytest.approx(plan_reward(cfg, answers, alone).total)
    assert dataclasses.replace(alone, waited_s=5.0).service_s == 0.0  # never below nothing


def test_a_pass_whose_retrieval_waited_for_another_requests_turn_learns_only_its_own_seconds(
    tmp_path: Path, engine: Engine
) -> None:
    """Under load a request's retrieval waits for the cores while other generations hold them
    (models.take_turns): that wait is the load, counted in `waited_s`, not the plan's seconds."""
    eng = router_engine(tmp_path, engine)
    question = sample_questions(2)[1]["question"]
    try:
        with held_by_another_thread(lambda: eng.models.turn_on_the_cores("generation")) as release:
            threading.Timer(1.5, release.set).start()
            route = eng.respond(question).route
    finally:
        eng.close()
    assert route is not None and route.cost is not None and route.reward is not None
    assert route.cost.waited_s >= 1.4  # the turn it waited for, from the first to the last moment
    assert route.cost.service_s == pytest.approx(route.cost.latency_s - route.cost.waited_s)
    factor = 1 - route.cost.service_s / eng.settings.policy.request_latency_budget_s
    assert route.reward.latency_factor == pytest.approx(factor)


def test_the_question_form_names_its_kind_before_any_answer() -> None:
    kinds = {
        "Who is older, Steven Tyler or Elizabeth Fraser?": "choice",
        "Were Scott Derrickson and Ed Wood of the same nationality?": "yes_no",
        "Whose album was released first?": "who",
        "When did the Eiffel Tower open?": "when",
        "Tell me about the Eiffel Tower.": "other",
    }
    for q, kind in kinds.items():
        assert question_form(q).kind == kind, q
    assert question_form("Nikolaj Coster-Waldau worked with Fox.", claim=True).kind == "claim"
    long = question_form("What government position was held by the woman who portrayed Corliss Archer?")
    assert long.words == 12 and long.names == 1


def test_a_deployment_of_claims_routes_them_as_claims_without_a_per_request_prompt() -> None:
    def no_embedding(texts: list[str]) -> np.ndarray:
        raise AssertionError("a router without an embedding projection embeds nothing")

    claims = Router(settings_with(Settings(), rag={"prompt": "claim"}), no_embedding, store=MemoryStore())
    route = claims.choose("Paris is in France.", None, follow_up=False, time_left_s=30.0, base_pass_s=1.0)
    assert route.kind == "claim" and route.chosen_by == "router"
    # A request asking for the default prompt in that deployment is a question again.
    asked = claims.choose("Is Paris in France?", {"prompt": "default"}, False, 30.0, 1.0)
    assert asked.kind == "yes_no"
    questions = Router(Settings(), no_embedding, store=MemoryStore())
    assert questions.choose("Paris is in France.", None, False, 30.0, 1.0).kind != "claim"


def test_the_router_context_is_the_same_in_every_process_and_differs_by_question() -> None:
    emb = np.random.default_rng(0).standard_normal(384)
    a = PlanContextBuilder(8, projection_seed=3)
    b = PlanContextBuilder(8, projection_seed=3)
    form = question_form("Who is older, Steven Tyler or Elizabeth Fraser?")
    x = a.build(emb, form, follow_up=False, time_left_s=15.0)
    assert np.array_equal(x, b.build(emb, form, follow_up=False, time_left_s=15.0))
    names = a.feature_names()
    assert len(x) == a.dim == 8 + 2 + 5
    assert x[names.index("kind=question")] == 1.0 and x[names.index("kind=claim")] == 0.0
    assert x[names.index("time_left")] == pytest.approx(0.5)
    claim = a.build(emb, question_form("Paris is in France.", claim=True), follow_up=True, time_left_s=60)
    assert claim[names.index("kind=claim")] == 1.0 and claim[names.index("kind=question")] == 0.0
    assert claim[names.index("follow_up")] == 1.0
    assert claim[names.index("time_left")] == 1.0  # clipped


def router_engine(tmp: Path, base: Engine, **router: object) -> Engine:
    """The session engine's index and models with their own router and repair states."""
    settings = settings_with(
        base.settings,
        policy={"state_path": str(tmp / "policy.sqlite"), "repair": False},
        router={"state_path": str(tmp / "router.sqlite"), **router},
    )
    eng = Engine(settings, models=ModelRegistry.sharing(base.models, settings))
    eng.load(build_index=False)
    return eng


def test_a_request_is_answered_on_the_plan_the_router_chose_and_the_router_learns(
    tmp_path: Path, engine: Engine
) -> None:
    eng = router_engine(tmp_path, engine)
    question = sample_questions(1)[0]["question"]
    try:
        outcome = eng.respond(question)
        route = outcome.route
        # A router that has learned nothing scores every plan alike and starts on the first one
        # configured (the default 0.5B's), not on a random one, such as the slowest.
        assert route is not None and route.chosen_by == "router"
        assert route.plan == eng.settings.router.plans[0]
        assert route.decision is not None and set(route.decision.scores) == set(eng.settings.router.plans)
        plan = PLANS_BY_NAME[route.plan]
        # The first pass ran on that plan: its retrieval, and its generator's config.
        config = outcome.answer.config
        assert (config.mode, config.rerank, config.generator) == (plan.mode, plan.rerank, plan.generator)
        # Eq. 2 of the first answer's diagnosis (the verdict's graded quality) at the pass's
        # measured cost against the request's budget, learned and stored.
        d = outcome.diagnosis
        assert route.cost is not None and route.cost.latency_s > 0
        assert d is not None and d.verdict is not None and route.reward is not None
        assert route.reward.quality == pytest.approx(1 - d.verdict.p_unsupported)
        assert route.reward.budgets.latency_s == eng.settings.policy.request_latency_budget_s
        factor = 1 - route.cost.service_s / eng.settings.policy.request_latency_budget_s
        assert route.reward.latency_factor == pytest.approx(factor) and route.learned
        assert eng.router.policy.stats()[route.plan].pulls == 1
    finally:
        eng.close()
    # The state survives a restart: a new engine over the same file reads the update.
    again_engine = router_engine(tmp_path, engine)
    try:
        assert sum(s.pulls for s in again_engine.router.policy.stats().values()) == 1
        assert router_state_path(again_engine.settings) == tmp_path / "router.sqlite"
    finally:
        again_engine.close()


def test_the_router_reads_the_shared_retrieval_first_and_the_pass_and_diagnosis_reuse_it(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With router.read_evidence, the retrieval both default plans share is read before the
    choice: its P(answerable) is in the context the router decides and learns on, the chosen
    pass answers from those passages without retrieving again, and the diagnosis's answerability
    is the same reading (no second cross-encoder pass)."""
    eng = router_engine(tmp_path, engine, read_evidence=True)
    retrievals: list[str] = []
    relevance_reads: list[str] = []
    retrieve, timed_relevance = eng.pipeline.retrieve, eng.diagnoser._timed_relevance

    def counted_retrieve(query: str, *args: Any, **kwargs: Any) -> Any:
        retrievals.append(query)
        return retrieve(query, *args, **kwargs)

    def counted_relevance(query: str, *args: Any, **kwargs: Any) -> Any:
        relevance_reads.append(query)
        return timed_relevance(query, *args, **kwargs)

    monkeypatch.setattr(eng.pipeline, "retrieve", counted_retrieve)
    monkeypatch.setattr(eng.diagnoser, "_timed_relevance", counted_relevance)
    try:
        outcome = eng.respond(sample_questions(1)[0]["question"])
        route, d = outcome.route, outcome.diagnosis
        assert route is not None and route.chosen_by == "router" and route.learned
        assert d is not None and d.e_q.construction == "answerability" and d.e_q.support is not None
        names = eng.router.policy.builder.feature_names()
        assert route.context[names.index("evidence_read")] == 1.0
        assert route.context[names.index("answerable")] == pytest.approx(d.e_q.support, abs=1e-3)
        assert len(retrievals) == 1 and len(relevance_reads) == 1
        # A request that pins its own retrieval is not the router's to choose: nothing read first.
        pinned_outcome = eng.respond(sample_questions(2)[1]["question"], {"mode": "bm25"})
        assert pinned_outcome.route is not None and pinned_outcome.route.chosen_by == "request"
        assert len(retrievals) == 2 and len(relevance_reads) == 2
    finally:
        eng.close()


def test_a_pinned_request_or_a_router_turned_off_gets_the_configured_pass(
    tmp_path: Path, engine: Engine
) -> None:
    eng = router_engine(tmp_path, engine)
    question = sample_questions(2)[1]["question"]
    try:
        pinned_outcome = eng.respond(question, {"mode": "bm25"})
        assert pinned_outcome.route is not None and pinned_outcome.route.chosen_by == "request"
        assert pinned_outcome.route.plan is None and pinned_outcome.answer.config.mode == "bm25"
        # Turned off at run time (the hot reload's path): the rag section's pass, nothing learned.
        off = settings_with(eng.settings, router={"enabled": False})
        assert "router.enabled" in eng.apply_tunables(off)
        outcome = eng.respond(question)
        assert outcome.route is not None and outcome.route.chosen_by == "off" and not outcome.route.learned
        assert outcome.answer.config.mode == eng.settings.rag.mode
        assert outcome.answer.config.generator == "default"
        assert sum(s.pulls for s in eng.router.policy.stats().values()) == 0
        # An unknown plan is refused, naming the key, and nothing changes.
        with pytest.raises(ConfigError, match=r"router\.plans: unknown plan"):
            eng.apply_tunables(settings_with(eng.settings, router={"plans": ["no_such_plan"]}))
        assert eng.settings.router.plans == off.router.plans
    finally:
        eng.close()


def test_without_the_stronger_generator_only_the_default_plans_are_offered(
    tmp_path: Path, engine: Engine
) -> None:
    settings = settings_with(
        engine.settings,
        models={"escalation": None},
        policy={"state_path": str(tmp_path / "policy.sqlite"), "repair": False},
        router={"state_path": str(tmp_path / "router.sqlite")},
    )
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    eng.load(build_index=False)
    try:
        route = eng.respond(sample_questions(1)[0]["question"]).route
        assert route is not None and route.plan is not None and route.plan.startswith("default_")
        assert {m.name for m in route.masked} == {"large_hybrid"}
    finally:
        eng.close()


def test_the_router_state_layout_is_its_own(tmp_path: Path, engine: Engine) -> None:
    """A router state stored with another context layout is refused with a message naming it."""
    s: Settings = settings_with(engine.settings, router={"state_path": str(tmp_path / "router.sqlite")})
    first = Router(s, lambda texts: np.ones((len(texts), 384)))
    assert not (tmp_path / "router.sqlite").exists()  # opened on first use, not before
    assert first.policy.dim == first.policy.builder.dim
    first.close()
    other = Router(settings_with(s, router={"context_dim": 2}), lambda texts: np.ones((len(texts), 384)))
    with pytest.raises(ConfigError):
        _ = other.policy


def test_a_vote_on_a_routed_answer_over_http_credits_its_plan(tmp_path: Path, engine: Engine) -> None:
    from ragmend.server.app import create_app

    eng = router_engine(tmp_path, engine)
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        r = httpx.post(server.url + "/v1/answer", json={"query": UNANSWERABLE}, timeout=600)
        assert r.status_code == 200, r.text
        body = r.json()
        route = body["route"]
        assert route["chosen_by"] == "router" and route["plan"] in eng.settings.router.plans
        assert set(route["decision"]["scores"]) == set(eng.settings.router.plans) and route["learned"]
        plan = route["plan"]
        pulls = eng.router.policy.stats()[plan].pulls
        vote = httpx.post(
            server.url + "/v1/feedback", json={"response_id": body["id"], "rating": "up"}, timeout=60
        ).json()
        # Repair is off: no arm decided the answer; the plan's pass gave it.
        assert vote["credited"] is None and vote["credited_plan"] == plan and vote["learned"]
        assert eng.router.policy.stats()[plan].pulls == pulls + 1
        metrics = httpx.get(server.url + "/metrics", timeout=30).text
        assert f'ragmend_router_plans_total{{chosen_by="router",kind="what",plan="{plan}"}} 1.0' in metrics
        assert f'ragmend_router_plan_pulls{{plan="{plan}"}} {pulls + 1}.0' in metrics
    eng.close()


def test_a_live_stream_runs_on_the_plan_the_router_chose(tmp_path: Path, engine: Engine) -> None:
    """The first pass streams as it is generated, on the chosen plan; the last chunk's extension
    names the plan (a repair would follow as the marked correction it is without a router)."""
    import json

    from ragmend.server.app import create_app

    eng = router_engine(tmp_path, engine)
    body = {"messages": [{"role": "user", "content": sample_questions(3)[2]["question"]}], "stream": True}
    with LiveServer(create_app(eng.settings, engine=eng)) as server:
        text: list[str] = []
        ext: dict = {}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=600) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    event = json.loads(line[6:])
                    text += [c["delta"].get("content") or "" for c in event.get("choices", ())]
                    ext = event.get("ragmend") or ext
    eng.close()
    route = ext["route"]
    assert route["chosen_by"] == "router" and route["plan"] in eng.settings.router.plans
    plan = PLANS_BY_NAME[route["plan"]]
    assert (ext["config"]["mode"], ext["config"]["generator"]) == (plan.mode, plan.generator)
    assert "".join(text).strip()  # the answer arrived as tokens, before the extension
