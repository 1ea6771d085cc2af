"""A user's vote on a reply: what it would credit (`served`, recorded as the reply goes out) and
the learning it gives the repair policy and the router (`credit`, when the vote comes)."""

from __future__ import annotations

import logging
import time

import numpy as np

from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import RepairTrace
from ragmend.engine.router import Router
from ragmend.policy import Policy
from ragmend.policy.feedback import Served, Vote

log = logging.getLogger("ragmend.engine")


def served(response_id: str, outcome: Outcome, namespace: str) -> Served:
    """What a user's vote on this answer would credit (policy/feedback.py): the repair decision
    that settled the reply (the second repair's when one ran), and the router's plan when the
    reply is its first pass's own answer (no repair replaced it)."""
    route = outcome.route
    plan: str | None = None
    plan_context: tuple[float, ...] | None = None
    plan_factor = 1.0
    if route is not None and route.routed and outcome.answer is (outcome.first or outcome.answer):
        plan, plan_context = route.plan, route.context
        if route.reward is not None:
            plan_factor = max(0.0, route.reward.latency_factor * route.reward.memory_factor)
    last = outcome.second_repair or outcome.repair
    arm, context, factor = None, None, 1.0
    if isinstance(last, RepairTrace):
        arm, context = last.action, last.context
        factor = max(0.0, last.reward.latency_factor * last.reward.memory_factor)
    return Served(
        response_id=response_id,
        namespace=namespace,
        arm=arm,
        context=context,
        cost_factor=factor,
        created=time.time(),
        plan=plan,
        plan_context=plan_context,
        plan_cost_factor=plan_factor,
        learn=outcome.learn,
    )


def credit(vote: Vote, policy: Policy, router: Router) -> bool:
    """Learn a user's vote as one more observation of the arm that decided the answer and of the
    plan whose pass gave it; False when neither is there, the ledger withheld the vote
    (policy/feedback.py), or learning is off."""
    record, learned = vote.served, False
    if vote.withheld is not None or not record.learn:
        return False
    reward, plan_reward = vote.reward, vote.plan_reward
    if (
        reward is not None
        and record.arm
        and record.context
        and _in_layout(record.context, policy.dim, "repair")
    ):
        learned = policy.update(record.arm, np.asarray(record.context), reward)
    plan_context = record.plan_context
    if (
        plan_reward is not None
        and record.plan
        and plan_context
        and _in_layout(plan_context, router.policy.dim, "router")
    ):
        learned = router.credit(record.plan, plan_context, plan_reward) or learned
    return learned


def _in_layout(context: tuple[float, ...], dim: int, policy: str) -> bool:
    """Whether a remembered reply's context is of the policy's current layout: a reply served
    before a restart that changed it (context_dim, a pooled layout) teaches nothing."""
    if len(context) == dim:
        return True
    log.warning(
        "%s: a vote on a reply whose context has %d features, the policy now %d; not learned",
        policy,
        len(context),
        dim,
    )
    return False
