"""The six repair actions (arms), each a patch P -> P' of the frozen RAGConfig.

An action declares the failure types it may serve (D2R-RAG Appendix B: insufficient evidence
favours retrieval-side escalation; an unsupported response with evidence present favours
higher-precision evidence or a rewrite) and a prior expected cost, refined online by the
measured costs (`CostModel`). `feasible` masks what cannot serve the failure, cannot change the
configuration, or would not fit the remaining budgets, before the policy chooses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragmend.budgets import MB, Budgets
from ragmend.diagnosis.types import FailureType
from ragmend.rag.types import RAGConfig

ALL_FAILURES: frozenset[FailureType] = frozenset({"WP", "IE", "WR", "LEM"})
DEPTH_LADDER = (5, 10, 20)


class RepairServices(Protocol):
    """What actions may call on: the generator (rewrites) and the index (refresh)."""

    def rewrite_query(self, query: str, variant: str) -> str: ...

    def refresh_index(self) -> str: ...  # returns the new index generation


@dataclass(frozen=True)
class Action:
    name: str
    serves: frozenset[FailureType]
    # Prior expected cost of the extra pass (seconds, bytes), before any measurement.
    prior_latency_s: float
    prior_memory_bytes: int
    patch: Callable[[RAGConfig, str, RepairServices], RAGConfig]
    applies: Callable[[RAGConfig], bool] = lambda c: True  # False: it would not change P

    def apply(self, config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
        return self.patch(config, query, services)


def _rewrite(variant: str) -> Callable[[RAGConfig, str, RepairServices], RAGConfig]:
    def patch(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
        return config.patch(query=services.rewrite_query(config.query or query, variant))

    return patch


def _rerank(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    # A deeper candidate list (20, or k if deeper), cut back to the original k by the reranker.
    return config.patch(rerank=True, k=max(20, config.k), rerank_top_n=min(config.k, config.rerank_top_n))


def _next_depth(k: int) -> int | None:
    return next((d for d in DEPTH_LADDER if d > k), None)


def _depth(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    k = _next_depth(config.k)
    assert k is not None
    # With reranking on, the deeper list feeds the reranker; what reaches the generator grows too.
    return config.patch(k=k, rerank_top_n=k if config.rerank else config.rerank_top_n)


def _mode_switch(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    return config.patch(mode="bm25" if config.mode in ("dense", "hybrid") else "dense")


def _refresh(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    services.refresh_index()  # builds aside and swaps; the pass that follows reads the new index
    return config


ACTIONS: tuple[Action, ...] = (
    # Priors: seconds and bytes beyond the first pass (a rewrite is one short generator call; a
    # rerank scores 20 pairs, ~0.4 s here; depth lengthens the prompt; a refresh re-reads sources).
    Action("rewrite_paraphrase", frozenset({"IE", "WR", "LEM"}), 1.5, 0, _rewrite("paraphrase")),
    Action("rewrite_simplify", frozenset({"IE", "WR", "LEM"}), 1.0, 0, _rewrite("simplify")),
    Action("rerank", frozenset({"WR", "WP", "LEM"}), 0.5, 2 * MB, _rerank, lambda c: not c.rerank),
    Action("depth", frozenset({"IE", "WR"}), 1.5, 1 * MB, _depth, lambda c: _next_depth(c.k) is not None),
    Action("mode_switch", frozenset({"IE", "WR", "WP", "LEM"}), 0.0, 0, _mode_switch),
    Action("index_refresh", frozenset({"IE", "WP"}), 5.0, 8 * MB, _refresh),
)
BY_NAME = {a.name: a for a in ACTIONS}
ACTION_NAMES: tuple[str, ...] = tuple(BY_NAME)  # the arms of every policy the engine builds


@dataclass
class CostModel:
    """Expected cost of an action's repair pass. Until measured: the request's own first pass
    (retrieval + generation, which the repair pass repeats) plus the action's prior overhead;
    then an exponential moving average of the measured pass costs (memory only from passes
    where it could be measured)."""

    weight: float = 0.3
    _latency: dict[str, float] = field(default_factory=dict)
    _memory: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expected(self, action: Action, base_pass_s: float = 0.0) -> tuple[float, float]:
        with self._lock:
            return (
                self._latency.get(action.name, base_pass_s + action.prior_latency_s),
                self._memory.get(action.name, float(action.prior_memory_bytes)),
            )

    def observe(self, name: str, latency_s: float, memory_bytes: int | None) -> None:
        with self._lock:
            self._latency[name] = self._mix(self._latency.get(name), latency_s)
            if memory_bytes is not None:
                self._memory[name] = self._mix(self._memory.get(name), float(memory_bytes))

    def _mix(self, prev: float | None, value: float) -> float:
        return value if prev is None else (1 - self.weight) * prev + self.weight * value


@dataclass(frozen=True)
class Masked:
    """An action left out of the choice, and why (reported in the repair trace)."""

    name: str
    reason: str


def feasible(
    failure: FailureType,
    config: RAGConfig,
    budgets: Budgets,
    costs: CostModel,
    enabled: Sequence[str],
    base_pass_s: float = 0.0,
    refresh_allowed: bool = True,
) -> tuple[list[Action], list[Masked]]:
    ok: list[Action] = []
    masked: list[Masked] = []
    for name in enabled:
        a = BY_NAME[name]
        latency, memory = costs.expected(a, base_pass_s)
        if failure not in a.serves:
            masked.append(Masked(name, f"does not serve {failure}"))
        elif not a.applies(config):
            masked.append(Masked(name, "would not change the configuration"))
        elif name == "index_refresh" and not refresh_allowed:
            masked.append(Masked(name, "refreshed recently (cool-down)"))
        elif latency > budgets.latency_s:
            masked.append(Masked(name, f"expected {latency:.2f} s > {budgets.latency_s:.2f} s left"))
        elif memory > budgets.memory_bytes:
            masked.append(Masked(name, f"expected {memory / MB:.1f} MB > {budgets.memory_bytes / MB:.1f} MB"))
        else:
            ok.append(a)
    return ok, masked


class Cooldown:
    """At most one index refresh per `seconds` (a refresh re-reads every source)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._last = float("-inf")
        self._lock = threading.Lock()

    def ready(self) -> bool:
        with self._lock:
            return time.monotonic() - self._last >= self.seconds

    def mark(self) -> None:
        with self._lock:
            self._last = time.monotonic()
