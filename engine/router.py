"""The router: each request's first-pass plan, chosen before any answer exists, learned from what
the diagnosis then says of the answer, at what it cost (and from users' votes).

    form = question_form(query)                  # its kind, length, names (or a claim to check)
    with router.read_evidence: the retrieval the plans share, read once, and its P(answerable)
    x = context(embedding, form, follow-up, time left[, that P(answerable)])
    the enabled plans that fit the time left (engine/plans.py); the bandit picks ONE
    ... the first pass runs on that plan (on that retrieval where it was read), measured; it is
        diagnosed (the reading reused) ...
    reward = Eq. 2 of that diagnosis (its graded verdict), the pass's cost against the request's budgets
    update (persisted; replicas share it like the repair policy's)

The repair then acts on what the first pass left (engine/repair.py). A request whose `config`
pins a plan key (mode, k, rerank, rerank_top_n, generator), a router turned off, or a request
whose time left fits no plan gets the pass the rag section configures (`Route.chosen_by` says
which): the router neither chooses nor learns for it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragmend.actions.catalogue import CostModel, Masked
from ragmend.actions.meter import Cost
from ragmend.budgets import Budgets
from ragmend.diagnosis.question_form import question_form
from ragmend.diagnosis.types import Diagnosis
from ragmend.engine.plans import PLAN_NAMES, PLANS_BY_NAME, Plan, expected_s, feasible_plans, pinned
from ragmend.policy import Policy, PolicyStore
from ragmend.policy.facade import LIVE_POLICY_KEYS, action_budgets, check_enabled_actions
from ragmend.policy.plan_context import PlanContextBuilder
from ragmend.policy.reward import Reward, answer_quality, reward_from_signals
from ragmend.policy.store import SQLiteStore
from ragmend.policy.types import Decision
from ragmend.settings import PolicySettings, Settings

# Why the first pass ran on what it ran on.
ChosenBy = Literal["router", "request", "off", "nothing_fits"]


@dataclass(frozen=True, kw_only=True)
class Route:
    """The first pass's plan and who chose it; after the pass, what it cost and what was learned."""

    plan: str | None  # None: the pass the rag section configures (the router did not choose)
    chosen_by: ChosenBy
    kind: str  # the question's kind (diagnosis/question_form.py): the metrics' label
    decision: Decision | None = None  # the bandit's choice, with every offered plan's score
    masked: tuple[Masked, ...] = ()  # plans left out of the choice, and why
    context: tuple[float, ...] = ()  # x of the decision: what a vote on the answer credits
    expected_s: float | None = None  # what the chosen plan's pass was expected to take
    cost: Cost | None = None  # the pass as measured
    reward: Reward | None = None
    learned: bool = False

    @property
    def routed(self) -> bool:
        return self.chosen_by == "router"

    def overrides(self, request: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The request's overrides with the chosen plan's fields (the request's own otherwise)."""
        if self.plan is None:
            return dict(request) if request else None
        return {**(request or {}), **PLANS_BY_NAME[self.plan].overrides}


def plan_reward(cfg: PolicySettings, diagnosis: Diagnosis, cost: Cost) -> Reward:
    """The router's reward of a first pass: Eq. 2 with the answer's graded quality
    (policy/reward.py `answer_quality`: 1 - P(unsupported) under a verdict; a first answer that
    abstains is worth what the repair's abstention is worth) and its cost factors against the
    request's budgets (the first pass spends the request's time, not a repair's). The latency is
    the pass's own (`Cost.service_s`): the wait for a generator other requests held is the load,
    which every plan waits through alike, and counting it taught a loaded router that the larger
    model's plans were the slow ones. On DEV the graded quality routed better than Eq. 2's coarse
    one (docs/policy.md, "The router")."""
    return reward_from_signals(
        failure=diagnosis.failure,
        kappa=diagnosis.kappa,
        e_r=diagnosis.e_r.state,
        latency_s=cost.service_s,
        memory_bytes=cost.memory_bytes,
        budgets=plan_budgets(cfg, cost.memory_source),
        variant=cfg.reward_variant,
        quality=answer_quality(diagnosis),
    )


def plan_budgets(cfg: PolicySettings, memory_source: str = "nvml") -> Budgets:
    """What a first pass's cost is held to: the request's latency budget and one action's
    memory budget (of the source the meter reads), both times budget_scale."""
    memory = action_budgets(cfg, memory_source).memory_bytes
    return Budgets(cfg.request_latency_budget_s * cfg.budget_scale, memory)


def router_policy_settings(settings: Settings) -> PolicySettings:
    """The router's bandit as a policy over plan names: its own kind, alpha, learning and arms,
    with the repair's budgets (its reward's cost factors) and their scale."""
    r = settings.router
    return PolicySettings.model_validate(
        {
            **settings.policy.model_dump(),
            "kind": r.kind,
            "alpha": r.alpha,
            "learn": r.learn,
            "enabled_actions": r.plans,
            "context_dim": r.context_dim,
            "state_path": router_state_path(settings),
        }
    )


def router_state_path(settings: Settings) -> Path:
    """router.state_path, or <data_dir>/router.sqlite."""
    p = settings.router.state_path
    return p.expanduser() if p is not None else settings.data_dir / "router.sqlite"


def router_store(settings: Settings, namespace: str) -> PolicyStore:
    """The router's state where `store.kind` keeps the repair's: its own SQLite file, or the
    shared database under the namespace `<namespace>/router` (no collection is named so)."""
    if settings.store.kind == "postgres":
        from ragmend.policy.pgstore import PostgresStore

        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        dsn = settings.store.dsn.get_secret_value()
        return PostgresStore(dsn, f"{namespace}/router", timeout_s=settings.store.connect_timeout_s)
    return SQLiteStore(router_state_path(settings))


def check_plans(plans: Collection[str]) -> None:
    check_enabled_actions(list(plans), PLAN_NAMES, key="router.plans", what="plan")


class Router:
    def __init__(
        self,
        settings: Settings,
        embed: Callable[[list[str]], np.ndarray],
        namespace: str = "default",
        missing: frozenset[str] = frozenset(),
        store: PolicyStore | None = None,
    ):
        """`embed`: unit-length embeddings of questions; `missing`: parts of the deployment not
        configured ("escalation": the large plans are masked). The state store is opened when
        the router first chooses or learns: a router that is off touches no file."""
        check_plans(settings.router.plans)
        self._settings = settings
        self._namespace = namespace
        self._store = store
        cfg = router_policy_settings(settings)
        self._builder = PlanContextBuilder(
            cfg.context_dim, cfg.projection_seed, evidence=settings.router.read_evidence
        ).with_budgets(cfg)
        self._policy: Policy[PlanContextBuilder] | None = None
        self._embed = embed
        self.missing = missing
        self.costs = CostModel()  # each plan's measured first passes
        self._enabled = settings.router.enabled
        self._lock = threading.Lock()

    @property
    def policy(self) -> Policy[PlanContextBuilder]:
        """The bandit over plan names and its stored state (opened on first use)."""
        with self._lock:
            if self._policy is None:
                s = self._settings
                self._policy = Policy(
                    router_policy_settings(s),
                    self._store or router_store(s, self._namespace),
                    PLAN_NAMES,
                    builder=self._builder,
                    max_staleness_s=s.store.max_staleness_s,
                )
            return self._policy

    @property
    def enabled(self) -> bool:
        return self._enabled

    def shared_retrieval(self, overrides: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The overrides of the retrieval every plan it may offer shares, where it reads the
        evidence before choosing (router.read_evidence) and will choose for this request; None
        otherwise (the plans then retrieve each their own, after the choice)."""
        if not (self._enabled and self._builder.evidence) or pinned(overrides):
            return None
        plans = [PLANS_BY_NAME[p] for p in self.policy.config.enabled_actions]
        plans = [p for p in plans if p.requires not in self.missing]
        retrievals = {p.retrieval for p in plans}
        if len(retrievals) != 1:
            return None
        return {**(overrides or {}), **plans[0].overrides}

    def choose(
        self,
        query: str,
        overrides: Mapping[str, Any] | None,
        follow_up: bool,
        time_left_s: float,
        base_pass_s: float,
        p_answerable: float | None = None,
    ) -> Route:
        """The first pass of `query`. `time_left_s`: what the request's deadline and budget leave
        for the pass and its diagnosis; `base_pass_s`: what a pass of the configured kind is
        expected to take (the prior of a plan not measured yet); `p_answerable`: the shared
        retrieval's, where it was read (`shared_retrieval`)."""
        form = question_form(query, claim=self._checks_claim(overrides))
        if pinned(overrides):
            return Route(plan=None, chosen_by="request", kind=form.kind)
        if not self._enabled:
            return Route(plan=None, chosen_by="off", kind=form.kind)
        cfg = self.policy.config
        ok, masked = feasible_plans(
            cfg.enabled_actions,
            self.costs,
            time_left_s=time_left_s,
            base_pass_s=base_pass_s,
            missing=self.missing,
        )
        if not ok:
            return Route(plan=None, chosen_by="nothing_fits", kind=form.kind, masked=tuple(masked))
        builder = self.policy.builder
        assert isinstance(builder, PlanContextBuilder)
        x = builder.build(self._embedding(query), form, follow_up, time_left_s, p_answerable=p_answerable)
        # In the configured order, so a router that has learned nothing starts on the first plan.
        decision = self.policy.select(x, [p.name for p in ok], ties="first")
        plan = PLANS_BY_NAME[decision.arm]
        return Route(
            plan=plan.name,
            chosen_by="router",
            kind=form.kind,
            decision=decision,
            masked=tuple(masked),
            context=tuple(float(v) for v in x),
            expected_s=expected_s(plan, self.costs, base_pass_s),
        )

    def forced(
        self,
        query: str,
        overrides: Mapping[str, Any] | None,
        plan: str,
        time_left_s: float,
        p_answerable: float | None = None,
    ) -> Route:
        """`plan` as if the router had chosen it, with its context (a warm start that tries every
        plan on a labelled item, so each one learns from it: full information, not a bandit's)."""
        form = question_form(query, claim=self._checks_claim(overrides))
        builder = self.policy.builder
        assert isinstance(builder, PlanContextBuilder)
        x = builder.build(self._embedding(query), form, False, time_left_s, p_answerable=p_answerable)
        return Route(
            plan=PLANS_BY_NAME[plan].name,
            chosen_by="router",
            kind=form.kind,
            context=tuple(float(v) for v in x),
        )

    def _checks_claim(self, overrides: Mapping[str, Any] | None) -> bool:
        """Whether the request is a claim to check: the prompt it asks for, else the configured one
        (a deployment of claims sets `rag.prompt: claim` once, not on every request)."""
        prompt = (overrides or {}).get("prompt") or self._settings.rag.prompt
        return prompt == "claim"

    def _embedding(self, query: str) -> np.ndarray | None:
        """The question's embedding where the context holds its projection (none is computed
        otherwise)."""
        return self._embed([query])[0] if self._builder.context_dim else None

    def learn(self, route: Route, diagnosis: Diagnosis | None, cost: Cost) -> Route:
        """The routed pass's measured cost and, with a diagnosis, its reward learned (persisted):
        Eq. 2 of the first answer at the pass's latency and memory."""
        if not route.routed or route.plan is None:
            return dataclasses.replace(route, cost=cost)
        self.costs.observe(route.plan, cost.service_s, cost.memory_bytes)
        if diagnosis is None or not diagnosis.judged:
            return dataclasses.replace(route, cost=cost)  # nothing was judged: nothing to learn
        reward = plan_reward(self.policy.config, diagnosis, cost)
        learned = self.policy.update(route.plan, np.asarray(route.context), reward)
        return dataclasses.replace(route, cost=cost, reward=reward, learned=learned)

    def credit(self, plan: str, context: tuple[float, ...], reward: float) -> bool:
        """A user's vote on an answer the plan's pass gave, as one more observation."""
        return self.policy.update(plan, np.asarray(context), reward)

    def configure(self, settings: Settings) -> list[str]:
        """Apply the live part of `settings` (router.* and the budgets the reward reads); returns
        the router keys that changed. ConfigError for an unknown plan, nothing changed."""
        check_plans(settings.router.plans)
        new = router_policy_settings(settings)
        old = router_policy_settings(self._settings)
        changes = {k: getattr(new, k) for k in LIVE_POLICY_KEYS if getattr(new, k) != getattr(old, k)}
        with self._lock:
            policy = self._policy
        if policy is not None and changes:
            policy.configure(**changes)
        with self._lock:
            toggled = self._enabled != settings.router.enabled
            self._enabled = settings.router.enabled
            self._settings = settings  # a policy opened later is built from these
        return [*changes, *(["enabled"] if toggled else [])]

    def plan(self, name: str) -> Plan:
        return PLANS_BY_NAME[name]

    def close(self) -> None:
        with self._lock:
            if self._policy is not None:
                self._policy.close()
