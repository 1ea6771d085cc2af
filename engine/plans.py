"""The first-pass plans the router chooses among: which generator reads, over which retrieval.

A plan is a patch of the request's RAGConfig like a repair action, applied before the first pass
instead of after it. The router (engine/router.py) picks one per question from what is known
before an answer exists; the repair then acts on what that pass left. Plans differ in what they
cost: the stronger generator (models.escalation, the bundled 1.5B by default) is about twice the
default's time per prompt token on a CPU; reranking 20 hybrid candidates adds a cross-encoder
pass; hybrid retrieval adds BM25 to the dense search (milliseconds).

Every plan sets the same keys (PLAN_KEYS), so a request that pins any of them in its `config`
fixes its first pass itself and the router does not choose for it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmend.actions.catalogue import CostModel, Masked
from ragmend.rag.types import RETRIEVAL_FIELDS, GeneratorChoice, RAGConfig
from ragmend.settings import RetrievalMode

# The RAGConfig fields a plan decides.
PLAN_KEYS = ("mode", "k", "rerank", "rerank_top_n", "generator")
RERANK_CANDIDATES = 20  # hybrid candidates a reranking plan scores, cut back to the usual 5


@dataclass(frozen=True, kw_only=True)
class Plan:
    name: str
    generator: GeneratorChoice
    mode: RetrievalMode
    rerank: bool
    # Expected seconds of the pass beyond a default-generator dense pass, before any measurement.
    prior_extra_s: float = 0.0
    requires: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requires", "escalation" if self.generator == "escalation" else None)

    @property
    def overrides(self) -> dict[str, Any]:
        """The RAGConfig fields this plan sets (every key of PLAN_KEYS)."""
        k = RERANK_CANDIDATES if self.rerank else 5
        return {
            "mode": self.mode,
            "k": k,
            "rerank": self.rerank,
            "rerank_top_n": 5,
            "generator": self.generator,
        }

    @property
    def retrieval(self) -> tuple[Any, ...]:
        """The retrieval fields this plan sets (RETRIEVAL_FIELDS): two plans with equal values
        read the same passages."""
        return tuple(v for k, v in self.overrides.items() if k in RETRIEVAL_FIELDS)

    def config(self, base: RAGConfig) -> RAGConfig:
        return base.patch(**self.overrides)


PLANS: tuple[Plan, ...] = (
    # The paper's Naive RAG pass: the default generator over the five closest passages.
    Plan(name="default_dense", generator="default", mode="dense", rerank=False),
    Plan(name="default_hybrid", generator="default", mode="hybrid", rerank=False),
    Plan(name="default_hybrid_rerank", generator="default", mode="hybrid", rerank=True, prior_extra_s=0.3),
    Plan(name="large_dense", generator="escalation", mode="dense", rerank=False, prior_extra_s=1.5),
    Plan(name="large_hybrid", generator="escalation", mode="hybrid", rerank=False, prior_extra_s=1.5),
    Plan(name="large_hybrid_rerank", generator="escalation", mode="hybrid", rerank=True, prior_extra_s=1.8),
)
PLANS_BY_NAME: dict[str, Plan] = {p.name: p for p in PLANS}
PLAN_NAMES: tuple[str, ...] = tuple(PLANS_BY_NAME)


def pinned(overrides: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The plan keys a request's own overrides set: its first pass is the request's choice."""
    return tuple(k for k in PLAN_KEYS if overrides and k in overrides)


def feasible_plans(
    enabled: Sequence[str],
    costs: CostModel,
    time_left_s: float,
    base_pass_s: float,
    missing: Collection[str] = (),
) -> tuple[list[Plan], list[Masked]]:
    """The enabled plans that can run and are expected to end (the pass and its diagnosis, priced
    like an action: `base_pass_s` plus the plan's measured or prior extra) within `time_left_s`;
    the others with why."""
    ok: list[Plan] = []
    masked: list[Masked] = []
    for name in enabled:
        plan = PLANS_BY_NAME[name]
        expected = expected_s(plan, costs, base_pass_s)
        if plan.requires is not None and plan.requires in missing:
            masked.append(Masked(name, f"needs models.{plan.requires}, which is not configured"))
        elif expected > time_left_s:
            masked.append(Masked(name, f"expected {expected:.2f} s > {time_left_s:.2f} s left"))
            costs.masked_for_cost(name)
        else:
            ok.append(plan)
    return ok, masked


def expected_s(plan: Plan, costs: CostModel, base_pass_s: float) -> float:
    """What `plan`'s pass is expected to take: its measured passes' median once it has some (the
    cost model keeps a plan's whole pass as its overhead over 0), else `base_pass_s` plus its prior."""
    measured, _ = costs.expected_named(plan.name)
    return measured if measured is not None else base_pass_s + plan.prior_extra_s
