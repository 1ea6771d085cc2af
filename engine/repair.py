"""The online repair loop of one request (D2R-RAG's Algorithm 2 run live):

diagnosis fails and budget is left
  -> x = context(query, diagnosis, remaining budgets)
  -> mask actions that cannot serve the failure or fit the budgets; the policy picks ONE
  -> P' = action(P); one more pass, measured (latency, memory); diagnose it
  -> reward (Eq. 2) and update the policy (persisted); return the better-supported answer
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np

from ragmend import cancel, clock
from ragmend.actions.catalogue import (
    ACTION_NAMES,
    ACTIONS_BY_NAME,
    Action,
    Cooldown,
    CostModel,
    Masked,
    RepairServices,
    feasible,
)
from ragmend.actions.meter import Cost, CostMeter
from ragmend.budgets import Budgets
from ragmend.diagnosis.types import ABSTAIN_LABEL, Diagnosis
from ragmend.engine.presentation import ABSTENTION_TEXT
from ragmend.errors import Cancelled, GeneratorTimeout
from ragmend.policy import Policy
from ragmend.policy.facade import ArmsDisabled, action_budgets, check_enabled_actions
from ragmend.policy.reward import Reward
from ragmend.policy.types import Decision
from ragmend.rag.types import Answer, RAGConfig
from ragmend.settings import PolicySettings


class Kept(StrEnum):
    """Which answer a repaired reply carries."""

    REPAIRED = "repaired"  # the second pass's
    ORIGINAL = "original"  # the first: better supported, or kept by no_repair
    ABSTAINED = "abstained"  # the abstain action's statement that the sources do not answer
    CONFLICT = "conflict"  # present_conflict: both sides of the evidence's conflict, quoted from it


@dataclass(frozen=True, kw_only=True)
class RepairTrace:
    """Everything one repair did, for the reply, the metrics and the logs."""

    action: str
    failure: str  # the failure type that was repaired
    decision: Decision
    masked: tuple[Masked, ...]
    config: RAGConfig  # P'
    answer: Answer  # the second pass
    diagnosis: Diagnosis  # of the second pass
    cost: Cost
    reward: Reward
    learned: bool  # the policy was updated (learn mode)
    kept: Kept  # which answer the reply carries
    success: bool  # the failure is gone after the repair (an abstention: it was chosen)
    latency_budget_s: float  # what the action was allowed (per-action budget capped by the request's)
    over_budget: tuple[str, ...]  # budgets the pass overran: "action_latency", "action_memory", "request"
    context: tuple[float, ...] = ()  # x of the decision: what a user's vote on the answer credits


# Why no repair ran: the request's budget was spent before it could; no enabled action serves the
# failure and fits the budgets; the request's deadline leaves no action time to finish (the
# server's, or the client's: ragmend/cancel.py); or the repair pass was abandoned because a
# generator call timed out.
SkipCode = Literal["request_budget_spent", "no_feasible_action", "deadline", "timed_out"]
SKIP_CODES: tuple[SkipCode, ...] = ("request_budget_spent", "no_feasible_action", "deadline", "timed_out")


@dataclass(frozen=True)
class RepairSkip:
    """Why no repair ran for a failed answer, or why the one that started was abandoned: a code
    for metrics and logic, and a sentence (with the numbers) for the person reading the reply."""

    code: SkipCode
    reason: str
    masked: tuple[Masked, ...] = ()
    # timed_out: the reply carries the unrepaired first answer; `action` names the chosen action.
    action: str | None = None

    @property
    def timed_out(self) -> bool:
        return self.code == "timed_out"


def support_rank(d: Diagnosis) -> tuple[int, int, int, int, float]:
    """Orders answers by how well the evidence supports them (higher is better)."""
    e_r = {"entail": 2, "neutral": 1, "contradict": 0}[d.e_r.state]
    return (
        int(d.failure == "NoFailure"),
        int(d.kappa != "conflict"),
        e_r,
        int(d.e_q.state != "neutral"),
        d.egc.score,
    )


def check_policy_actions(cfg: PolicySettings) -> None:
    """Refuse action names in the policy's settings that are not actions (ConfigError naming the key)."""
    check_enabled_actions(cfg.enabled_actions, ACTION_NAMES)
    if cfg.after_escalation_actions is not None:
        key = "policy.after_escalation_actions"
        check_enabled_actions(cfg.after_escalation_actions, ACTION_NAMES, key=key)


def offered_actions(
    cfg: PolicySettings, config: RAGConfig, diagnosis: Diagnosis, exclude: Collection[str] = ()
) -> tuple[list[str], list[Masked]]:
    """The enabled actions offered for an answer of `config` diagnosed as `diagnosis` (not
    `exclude`), and those left out: present_conflict where the diagnosis found no conflict on the
    asked fact; abstain where the failure is uncertain (its answer stays unless a repair finds one
    the check supports); after the stronger generator, all but policy.after_escalation_actions."""
    names = [a for a in cfg.enabled_actions if a not in exclude]
    masked: list[Masked] = []
    left_out = (
        (
            "abstain",
            diagnosis.grade == "uncertain",
            "the failure is uncertain: an abstention would replace the answer",
        ),
        # nothing for an action that presents the conflict to say
        ("conflict", diagnosis.conflict is None, "the evidence holds no conflict on the asked fact"),
    )
    for effect, applies, why in left_out:
        if applies:
            masked += [Masked(a, why) for a in names if ACTIONS_BY_NAME[a].effect == effect]
            names = [a for a in names if ACTIONS_BY_NAME[a].effect != effect]
    narrowed = cfg.after_escalation_actions
    if config.generator != "escalation" or narrowed is None:
        return names, masked
    why = "the answer is the stronger generator's (policy.after_escalation_actions)"
    return [a for a in names if a in narrowed], masked + [Masked(a, why) for a in names if a not in narrowed]


class Repairer:
    def __init__(
        self,
        policy: Policy,
        services: RepairServices,
        answer: Callable[[str, RAGConfig], Answer],
        diagnose: Callable[[Answer], Diagnosis],
        embed: Callable[[list[str]], np.ndarray],
        meter: CostMeter,
        refresh_cooldown_s: float = 300.0,
        missing: frozenset[str] = frozenset(),
    ):
        self.policy = policy
        self.services = services
        self._answer = answer
        self._diagnose = diagnose
        self._embed = embed
        self.meter = meter
        self.costs = CostModel()
        self.cooldown = Cooldown(refresh_cooldown_s)
        self.missing = missing  # parts of the deployment not configured (actions.catalogue.feasible)

    def repair(
        self,
        answer: Answer,
        diagnosis: Diagnosis,
        started: float,
        exclude: Collection[str] = (),
        learn: bool = True,
    ) -> tuple[Answer, Diagnosis, RepairTrace | RepairSkip]:
        """One repair attempt for a failed answer; `started` is the request's monotonic start;
        `exclude`: actions not to offer (a second repair's: the first one's); `learn`: false
        repairs as usual but updates neither the policy nor the actions' cost model."""
        # One snapshot of the policy's settings for the whole decision: an admin change or a hot
        # reload lands between requests (or between two of them), never inside one decision.
        cfg = self.policy.config
        elapsed = clock.now() - started
        request_left = cfg.request_latency_budget_s - elapsed
        # The repaired pass is diagnosed too: keep room for a diagnosis like the first one.
        diagnose_s = diagnosis.timings.get("total_s", 0.0)
        action_budget = action_budgets(cfg).latency_s
        # The request's deadline is one more budget: a repair that cannot end before it would be
        # cancelled half-way, its work wasted.
        deadline_left = cancel.current().remaining() - diagnose_s
        allowed = min(action_budget, request_left - diagnose_s, deadline_left)
        if allowed <= 0:
            if deadline_left <= request_left - diagnose_s:
                why = f"the request's deadline leaves {max(0.0, deadline_left):.1f} s for a repair"
                return answer, diagnosis, RepairSkip("deadline", why)
            return (
                answer,
                diagnosis,
                RepairSkip("request_budget_spent", f"request budget spent ({elapsed:.1f} s elapsed)"),
            )
        # Memory is judged against the budget of what the meter will read (GPU memory, or the
        # host RSS fallback with its own budget).
        source = self.meter.memory_source
        memory_left = float(action_budgets(cfg, source).memory_bytes)
        offered, narrowed = offered_actions(cfg, answer.config, diagnosis, exclude)
        ok, masked = feasible(
            answer.config,
            Budgets(allowed, memory_left),
            self.costs,
            offered,
            base_pass_s=answer.timings.total_s,
            refresh_allowed=self.cooldown.ready(),
            missing=self.missing,
        )
        masked = narrowed + masked
        if not ok:
            if allowed == deadline_left and any(m.reason.endswith(" s left") for m in masked):
                why = f"no action is expected to finish in the {allowed:.1f} s the request's deadline leaves"
                return answer, diagnosis, RepairSkip("deadline", why, tuple(masked))
            return (
                answer,
                diagnosis,
                RepairSkip("no_feasible_action", "no action fits the failure and the budgets", tuple(masked)),
            )
        x = self.policy.context(
            self._embed([answer.query])[0],
            diagnosis,
            latency_left_s=request_left,
            memory_left_bytes=memory_left if source != "unavailable" else None,
        )
        try:
            decision = self.policy.select(x, [a.name for a in ok])
        except ArmsDisabled:  # an admin disabled them since `cfg` was read
            why = "no action fits the failure and the budgets (the feasible ones were just disabled)"
            return answer, diagnosis, RepairSkip("no_feasible_action", why, tuple(masked))
        action = ACTIONS_BY_NAME[decision.arm]
        if not action.runs_a_pass:
            return self._decide_without_pass(
                answer,
                diagnosis,
                action=action,
                decision=decision,
                x=x,
                masked=masked,
                allowed=allowed,
                learn=learn,
            )
        if action.name == "index_refresh":
            self.cooldown.mark()
        request = cancel.current()
        # The pass must leave time to diagnose its answer before the request's deadline; past
        # that it is abandoned and the first answer is sent (not a 504 with nothing).
        within = request.child(request.deadline - diagnose_s, "the request's deadline, less a diagnosis")
        try:
            with self.meter.measure() as m, cancel.scope(within):
                patched = action.apply(answer.config, answer.query, self.services)
                second = self._answer(answer.query, patched)
        except Cancelled:
            if request.cancelled:
                raise  # the request itself is cancelled: nothing is sent
            spent = clock.now() - started - elapsed
            why = f"repair pass abandoned after {spent:.1f} s: it would have ended past the deadline"
            return answer, diagnosis, RepairSkip("deadline", why, tuple(masked), action=action.name)
        except GeneratorTimeout as e:
            # The first answer stands: abandon the repair pass, never the request. No update: a
            # timeout says the generator is slow or overloaded, not that the action was a bad choice.
            spent = clock.now() - started - elapsed
            why = f"repair pass abandoned after {spent:.1f} s: {e}"
            return answer, diagnosis, RepairSkip("timed_out", why, tuple(masked), action=action.name)
        cost = m.cost
        assert cost is not None
        if learn:
            self.costs.observe(
                action.name, cost.service_s, cost.memory_bytes, base_pass_s=answer.timings.total_s
            )
        after = self._diagnose(second)
        # The pass's own seconds: its waits for the cores other requests held are the load.
        reward = self.policy.reward(after, cost.service_s, cost.memory_bytes, cost.memory_source)
        learned = learn and self.policy.update(action.name, x, reward)
        over = [f"action_{v}" for v in reward.violated]
        if clock.now() - started > cfg.request_latency_budget_s:
            over.append("request")
        # An uncertain failure's answer is replaced only by one the check supports.
        keep_repaired = support_rank(after) > support_rank(diagnosis) and (
            diagnosis.grade != "uncertain" or not after.failed
        )
        trace = RepairTrace(
            action=action.name,
            failure=diagnosis.failure,
            decision=decision,
            masked=tuple(masked),
            config=patched,
            answer=second,
            diagnosis=after,
            cost=cost,
            reward=reward,
            learned=learned,
            kept=Kept.REPAIRED if keep_repaired else Kept.ORIGINAL,
            success=after.failure == "NoFailure",
            latency_budget_s=allowed,
            over_budget=tuple(over),
            context=tuple(float(v) for v in x),
        )
        if keep_repaired:
            return second, after, trace
        return answer, diagnosis, trace

    def _decide_without_pass(
        self,
        answer: Answer,
        diagnosis: Diagnosis,
        action: Action,
        decision: Decision,
        x: np.ndarray,
        masked: list[Masked],
        allowed: float,
        learn: bool = True,
    ) -> tuple[Answer, Diagnosis, RepairTrace]:
        """no_repair keeps the first answer; abstain replaces it with the statement that the
        sources do not answer; present_conflict keeps it to be read as both sides of the
        evidence's conflict (engine/presentation.py writes them). No pass runs: the cost is the
        decision's own time, and the reward is the first diagnosis's (no_repair: Eq. 2 of the
        answer kept; abstain: the probability that the sources do not answer; present_conflict:
        the conflict's strength)."""
        with self.meter.measure() as m:
            final, final_diagnosis = (
                abstention(answer, diagnosis) if action.effect == "abstain" else (answer, diagnosis)
            )
        cost = m.cost
        assert cost is not None
        if learn:
            self.costs.observe(action.name, cost.service_s, cost.memory_bytes)
        abstained, presented = action.effect == "abstain", action.effect == "conflict"
        reward = self.policy.reward(
            diagnosis,
            cost.service_s,
            cost.memory_bytes,
            cost.memory_source,
            abstained=abstained,
            presented_conflict=presented,
        )
        learned = learn and self.policy.update(action.name, x, reward)
        trace = RepairTrace(
            action=action.name,
            failure=diagnosis.failure,
            decision=decision,
            masked=tuple(masked),
            config=answer.config,
            answer=final,
            diagnosis=final_diagnosis,
            cost=cost,
            reward=reward,
            learned=learned,
            kept=Kept.ABSTAINED if abstained else Kept.CONFLICT if presented else Kept.ORIGINAL,
            success=abstained or presented,
            latency_budget_s=allowed,
            over_budget=tuple(f"action_{v}" for v in reward.violated),
            context=tuple(float(v) for v in x),
        )
        return final, final_diagnosis, trace


def abstention(answer: Answer, diagnosis: Diagnosis) -> tuple[Answer, Diagnosis]:
    """The abstain action's final answer over the first pass's evidence: the statement that the
    sources do not answer (claim mode: the abstention label), with that pass's diagnosis, which
    says why; no generator call."""
    if diagnosis.mode == "claim":
        return (
            answer.model_copy(update={"response": ABSTAIN_LABEL, "completion_tokens": 0}),
            dataclasses.replace(diagnosis, final_label=ABSTAIN_LABEL),
        )
    return answer.model_copy(update={"response": ABSTENTION_TEXT, "completion_tokens": 0}), diagnosis
