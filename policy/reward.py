"""The reward of one repair (Eq. 2) with the paper's ablation variants and budget presets.

    r(a) = 1/4 (1[NoFailure] + 1[kappa consistent] + 2 * 1[e_r entail])
           * prod over x in {latency, memory} of 1[x_a <= B_x] * (1 - x_a / B_x)

The quality part is read from the diagnosis AFTER the repair: where the diagnosis has a verdict,
its graded form, 1 - P(unsupported) (`answer_quality`; the router's reward reads the same), since
the indicator form scores a right answer the check doubts as low as a wrong one it is sure of;
Eq. 2's indicators otherwise. x_a is the measured cost of the repair pass (latency, additional
peak memory) and B_x the per-action budgets times the budget scale. Variants (Table 2 of the paper):
  paper          both factors as above;
  unweighted     the hard gates only: a feasible action gets factor 1, however close to budget;
  unconstrained  the soft factors only, NOT gated and not clipped: an overrun is a penalty that
                 grows with the overrun (1 - x/B < 0) instead of a flat zero. Clipping at 0
                 would make it identical to "paper" (1[x <= B](1 - x/B) == max(0, 1 - x/B));
                 the reference code left the factors unclipped, but two overruns then multiply
                 back to a positive reward, so here any overrun makes the total
                 -quality * |f_latency * f_memory| (never a reward); see docs/policy.md.
An unmeasured memory cost (None: no GPU and no RSS reading) neither gates nor discounts: the
memory factor is 1 and Reward.memory_measured is False, so reports can tell such rewards apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ragmend.budgets import Budgets
from ragmend.diagnosis.types import ABSTAINED, Diagnosis
from ragmend.errors import InputError

RewardVariant = Literal["paper", "unweighted", "unconstrained"]
REWARD_VARIANTS: tuple[RewardVariant, ...] = ("paper", "unweighted", "unconstrained")
# The paper's budget variants (Table 3): every per-action budget times this factor.
BUDGET_SCALES: dict[str, float] = {"stringent": 0.7, "default": 1.0, "relaxed": 1.5}


@dataclass(frozen=True, kw_only=True)
class Reward:
    total: float  # quality * latency_factor * memory_factor, in [0, 1] (< 0: unconstrained overrun)
    quality: float  # in [0, 1]: answer_quality, or an abstention's or a presented conflict's
    no_failure: bool
    kg_consistent: bool
    response_entailed: bool
    latency_factor: float
    memory_factor: float  # 1.0 when the memory cost was not measured
    memory_measured: bool
    violated: tuple[str, ...]  # "latency" and/or "memory": costs over their budget
    variant: RewardVariant
    latency_s: float
    memory_bytes: float | None
    budgets: Budgets


def eq2_quality(failure: str, kappa: str, e_r: str) -> float:
    """Eq. 2's quality part: 1/4 (1[NoFailure] + 1[kappa consistent] + 2 * 1[e_r entail])."""
    return (int(failure == "NoFailure") + int(kappa == "consistent") + 2 * int(e_r == "entail")) / 4


def resource_factor(cost: float, budget: float, variant: RewardVariant) -> float:
    """One factor of Eq. 2's product for one resource under a variant."""
    gate = 1.0 if cost <= budget else 0.0
    soft = 1.0 - cost / budget
    if variant == "paper":
        return gate * soft
    if variant == "unweighted":
        return gate
    if variant == "unconstrained":
        return soft
    raise InputError(f"unknown reward variant {variant!r}; expected one of {', '.join(REWARD_VARIANTS)}")


def compute_reward(
    diagnosis: Diagnosis,
    latency_s: float,
    memory_bytes: float | None,
    budgets: Budgets,
    variant: RewardVariant = "paper",
    abstained: bool = False,
    presented_conflict: bool = False,
) -> Reward:
    """Eq. 2 for a repair whose second pass was diagnosed as `diagnosis` and cost what it cost.

    `abstained`: the repair answered that the sources do not answer the question; its quality is
    `abstention_quality`. `presented_conflict`: the repair answered with both sides of the
    conflict `diagnosis` found; its quality is `conflict_quality`. The cost factors are Eq. 2's."""
    if abstained and presented_conflict:
        raise InputError("a repair either abstains or presents the conflict, not both")
    said_instead = abstained or presented_conflict  # the user reads no answer the signals judged
    quality = (
        abstention_quality(diagnosis)
        if abstained
        else conflict_quality(diagnosis)
        if presented_conflict
        else answer_quality(diagnosis)
    )
    return reward_from_signals(
        failure=diagnosis.failure,
        kappa=diagnosis.kappa,
        e_r="neutral" if said_instead else diagnosis.e_r.state,
        latency_s=latency_s,
        memory_bytes=memory_bytes,
        budgets=budgets,
        variant=variant,
        quality=quality,
    )


def answer_quality(diagnosis: Diagnosis) -> float:
    """The quality of the answer `diagnosis` judged: 1 - the verdict's P(unsupported) where it has
    a verdict, Eq. 2's indicator form otherwise; an answer that itself abstains ("I don't know.")
    is worth an abstention (`abstention_quality`)."""
    if diagnosis.e_r.construction == ABSTAINED:
        return abstention_quality(diagnosis)
    if diagnosis.verdict is not None:
        return min(1.0, max(0.0, 1.0 - diagnosis.verdict.p_unsupported))
    return eq2_quality(diagnosis.failure, diagnosis.kappa, diagnosis.e_r.state)


def abstention_quality(diagnosis: Diagnosis) -> float:
    """The quality of answering that the sources do not answer, over the evidence `diagnosis`
    judged: right exactly when they do not, so the probability that they do not (1 minus the
    graded e_q: the answerability model's P(answerable) under a verdict, else the question's
    best entailment)."""
    support = diagnosis.e_q.support
    quality = 1.0 - (support if support is not None else float(diagnosis.e_q.state == "entail"))
    return min(1.0, max(0.0, quality))


def conflict_quality(diagnosis: Diagnosis) -> float:
    """The quality of answering with both sides of the conflict `diagnosis` found: right exactly
    when its passages do take both sides, so the conflict's strength (the lesser of the NLI's
    best entailment and best contradiction of the claim); 0 where no conflict was found."""
    conflict = diagnosis.conflict
    return 0.0 if conflict is None else min(1.0, max(0.0, conflict.strength))


def reward_from_signals(
    *,
    failure: str,
    kappa: str,
    e_r: str,
    latency_s: float,
    memory_bytes: float | None,
    budgets: Budgets,
    variant: RewardVariant = "paper",
    quality: float | None = None,
) -> Reward:
    """Eq. 2 from the signals; `quality` replaces its quality part where the answer is not one
    the signals judge (an abstention)."""
    if not (math.isfinite(latency_s) and latency_s >= 0):
        raise InputError(f"the action's latency must be a finite number >= 0 s, got {latency_s}")
    if variant not in REWARD_VARIANTS:
        raise InputError(f"unknown reward variant {variant!r}; expected one of {', '.join(REWARD_VARIANTS)}")
    nf, kg, nli = failure == "NoFailure", kappa == "consistent", e_r == "entail"
    if quality is None:
        quality = eq2_quality(failure, kappa, e_r)
    violated = []
    latency_factor = resource_factor(latency_s, budgets.latency_s, variant)
    if latency_s > budgets.latency_s:
        violated.append("latency")
    if memory_bytes is None:
        memory_factor, measured = 1.0, False
    else:
        if not math.isfinite(memory_bytes):
            raise InputError(f"the action's memory cost must be finite or None, got {memory_bytes}")
        # Peak growth can read negative (memory freed during the pass): no additional memory.
        cost = max(0.0, float(memory_bytes))
        memory_factor, measured = resource_factor(cost, budgets.memory_bytes, variant), True
        if cost > budgets.memory_bytes:
            violated.append("memory")
    total = quality * latency_factor * memory_factor
    if latency_factor < 0 or memory_factor < 0:  # unconstrained overrun: a penalty, whatever the count
        total = -quality * abs(latency_factor * memory_factor)
    return Reward(
        total=total,
        quality=quality,
        no_failure=nf,
        kg_consistent=kg,
        response_entailed=nli,
        latency_factor=latency_factor,
        memory_factor=memory_factor,
        memory_measured=measured,
        violated=tuple(violated),
        variant=variant,
        latency_s=float(latency_s),
        memory_bytes=None if memory_bytes is None else float(memory_bytes),
        budgets=budgets,
    )
