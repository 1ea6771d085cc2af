"""The repair actions (arms). Most are a patch P -> P' of the frozen RAGConfig followed by one
more pipeline pass; three run no pass: `abstain` answers that the sources do not answer the
question, `present_conflict` answers with both sides of a conflict the diagnosis found in the
evidence (what each side's passages say, quoted from them), and `no_repair` keeps the first answer
(so the policy can learn that a repair will not help a kind of request, and save its latency).

Every action may be offered for every failure type: which action helps which failure is what the
policy learns (its context holds the failure type and the signals behind it), not a table written
here. An action is masked only where it cannot run or cannot fit: it would not change the
configuration, the index was refreshed too recently, or its expected cost (a prior, then the
measured costs: `CostModel`) exceeds the budgets left.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ragmend.budgets import MB, Budgets
from ragmend.rag.types import RAGConfig

DEPTH_LADDER = (5, 10, 20)
# What an action does after its choice: run one more pipeline pass with its patched
# configuration, keep the first answer, abstain (say the sources do not answer), or present the
# conflict in the evidence (say what each side says).
Effect = Literal["pass", "keep", "abstain", "conflict"]


class RepairServices(Protocol):
    """What actions may call on: the generator (rewrites) and the index (refresh)."""

    def rewrite_query(self, query: str, variant: str) -> str: ...

    def refresh_index(self) -> str: ...  # returns the new index generation


Patch = Callable[[RAGConfig, str, RepairServices], RAGConfig]


@dataclass(frozen=True, kw_only=True)
class Action:
    name: str
    does: str  # what it does, in a sentence or two (docs/repair.md's table is written from it)
    # Prior expected cost beyond the first pass (seconds, bytes), before any measurement.
    prior_latency_s: float
    prior_memory_bytes: int
    patch: Patch | None = None  # the configuration of the pass to run (effect "pass")
    applies: Callable[[RAGConfig], bool] = lambda c: True  # False: it would not change P
    effect: Effect = "pass"
    # A part of the deployment the action needs ("escalation": models.escalation); masked without.
    requires: str | None = None

    def __post_init__(self) -> None:
        if (self.patch is None) == (self.effect == "pass"):
            raise ValueError(f"{self.name}: a pass needs a patch, and only a pass has one")

    @property
    def runs_a_pass(self) -> bool:
        return self.effect == "pass"

    def apply(self, config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
        assert self.patch is not None, f"{self.name} runs no pass"
        return self.patch(config, query, services)


def _rewrite(variant: str) -> Patch:
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


def _focus(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    return config.patch(evidence="focus")


def _decompose(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    # The second hop's passages read like the first's: the best sentences first.
    return config.patch(hops=2, evidence="focus")


def _escalate(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    return config.patch(generator="escalation")


def _refresh(config: RAGConfig, query: str, services: RepairServices) -> RAGConfig:
    services.refresh_index()  # builds aside and swaps; the pass that follows reads the new index
    return config


ACTIONS: tuple[Action, ...] = (
    # Priors: seconds and bytes beyond the first pass (a rewrite is one short generator call; a
    # rerank scores 20 pairs with a cross-encoder; depth lengthens the prompt; a refresh re-reads
    # sources).
    Action(
        name="rewrite_paraphrase",
        does=(
            "`query` = the generator's paraphrase (one short litellm call, prompt "
            "`rewrite_paraphrase`), one more pass"
        ),
        prior_latency_s=1.5,
        prior_memory_bytes=0,
        patch=_rewrite("paraphrase"),
    ),
    Action(
        name="rewrite_simplify",
        does="`query` = the key terms (prompt `rewrite_simplify`), one more pass",
        prior_latency_s=1.0,
        prior_memory_bytes=0,
        patch=_rewrite("simplify"),
    ),
    Action(
        name="rerank",
        does="`rerank` on over a deeper list: k = max(20, k), top-n = the old k",
        prior_latency_s=0.5,
        prior_memory_bytes=2 * MB,
        patch=_rerank,
        applies=lambda c: not c.rerank,
    ),
    Action(
        name="depth",
        does="k 5 -> 10 -> 20",
        prior_latency_s=1.5,
        prior_memory_bytes=1 * MB,
        patch=_depth,
        applies=lambda c: _next_depth(c.k) is not None,
    ),
    Action(
        name="mode_switch",
        does="dense (or hybrid) -> BM25, BM25 -> dense",
        prior_latency_s=0.0,
        prior_memory_bytes=0,
        patch=_mode_switch,
    ),
    Action(
        name="index_refresh",
        does=(
            "re-ingest the configured sources (incremental, built aside, swapped atomically; "
            "requests in flight keep their snapshot), P unchanged"
        ),
        prior_latency_s=5.0,
        prior_memory_bytes=8 * MB,
        patch=_refresh,
    ),
    # A cross-encoder over the passages' sentences and a prompt no longer than the
    # first; decompose adds a second retrieval from the bridge sentence.
    Action(
        name="focus",
        does=(
            "`evidence: focus`: the prompt holds the passages' sentences the cross-encoder (the "
            "reranker model) ranks best against the question, best first, one numbered line each "
            "(the passage's number, so citations still point at it), within `context_tokens`; a "
            "line before the question says the answer is among the first ones and asks for it as "
            "briefly as the format allows (yes or no to a yes/no question). Prompt `focus` in "
            "rag/prompts.yaml"
        ),
        prior_latency_s=0.3,
        prior_memory_bytes=1 * MB,
        patch=_focus,
        applies=lambda c: c.evidence != "focus",
    ),
    Action(
        name="decompose",
        does=(
            "`hops: 2, evidence: focus`: the first hop's best sentence (cross-encoder) is the "
            "bridge; a second retrieval with the question and that sentence adds up to 2 "
            "documents the first hop did not have, after the bridge sentence's passage (k in "
            "all); then the focus prompt. One generator call"
        ),
        prior_latency_s=0.6,
        prior_memory_bytes=1 * MB,
        patch=_decompose,
        applies=lambda c: c.hops == 1,
    ),
    # The same evidence to the stronger generator of models.escalation: a remote call, priced by
    # its measured latency once it has run (and its tokens in the request's usage).
    Action(
        name="escalate",
        does=(
            "`generator: escalation`: the same evidence to the stronger generator of "
            "`models.escalation`: by default the bundled Qwen2.5-Coder-1.5B (profile `large`), "
            "in-process beside the default generator; or a GGUF of your own, or any litellm model "
            "(a larger model on vLLM, an API; `model`, `api_base`, `api_key`, `max_tokens`...). "
            'Masked ("needs models.escalation, which is not configured") with `models.escalation: '
            "null`, and where the first pass already ran on it (a large plan of the router). Its "
            "calls are metered like every pass and their tokens are in the request's `usage`"
        ),
        prior_latency_s=2.0,
        prior_memory_bytes=0,
        patch=_escalate,
        applies=lambda c: c.generator == "default",
        requires="escalation",
    ),
    # No pass: what they cost is the decision itself. present_conflict is offered only where the
    # diagnosis found a conflict on the asked fact (engine/repair.py).
    Action(
        name="present_conflict",
        does=(
            "no pass: the answer reads as both sides of the conflict the diagnosis found on the "
            'asked fact, each quoted from its own passages with their citations ("The sources '
            'disagree: [1] says ...; [2] says ..."); offered only where the diagnosis found one'
        ),
        prior_latency_s=0.0,
        prior_memory_bytes=0,
        effect="conflict",
    ),
    Action(
        name="abstain",
        does=(
            'no pass: the answer becomes "The sources do not answer this question. What was '
            'found: [1] Title, ..." (claim mode: NOT ENOUGH INFO)'
        ),
        prior_latency_s=0.0,
        prior_memory_bytes=0,
        effect="abstain",
    ),
    Action(
        name="no_repair",
        does="no pass: the first answer stands",
        prior_latency_s=0.0,
        prior_memory_bytes=0,
        effect="keep",
    ),
)
ACTIONS_BY_NAME = {a.name: a for a in ACTIONS}
ACTION_NAMES: tuple[str, ...] = tuple(ACTIONS_BY_NAME)  # the arms of every policy the engine builds


@dataclass(kw_only=True)
class CostModel:
    """Expected cost of an action, beyond the request's first pass for one that runs a pass.

    Until measured: the request's own first pass (retrieval + generation, which a repair pass
    repeats) plus the action's prior overhead. Then: the request's first pass plus the MEDIAN of
    the action's last `window` measured overheads (its pass's latency minus the first pass it
    repeated), and the median of its measured memory. A median, not a running mean: one pass
    slowed by something else (a busy machine, a cold cache) must not price an action out. And an
    action masked for its cost `forget_after` times in a row forgets its measurements and is
    priced by its prior again: an estimate that masks an action is never corrected by the action
    itself, since it no longer runs.
    """

    window: int = 9
    forget_after: int = 25
    _latency: dict[str, deque[float]] = field(default_factory=dict)
    _memory: dict[str, deque[float]] = field(default_factory=dict)
    _masked_in_a_row: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expected(self, action: Action, base_pass_s: float = 0.0) -> tuple[float, float]:
        with self._lock:
            overheads = self._latency.get(action.name)
            memories = self._memory.get(action.name)
            overhead = statistics.median(overheads) if overheads else action.prior_latency_s
            memory = statistics.median(memories) if memories else float(action.prior_memory_bytes)
        return base_pass_s + max(0.0, overhead), memory

    def expected_named(self, name: str) -> tuple[float | None, float | None]:
        """The medians of `name`'s measurements (None: none yet): a first-pass plan's whole pass."""
        with self._lock:
            overheads = self._latency.get(name)
            memories = self._memory.get(name)
            return (
                statistics.median(overheads) if overheads else None,
                statistics.median(memories) if memories else None,
            )

    def observe(
        self, name: str, latency_s: float, memory_bytes: int | None, base_pass_s: float = 0.0
    ) -> None:
        """One measured cost of `name`; `base_pass_s`: the first pass it was expected on top of."""
        with self._lock:
            self._masked_in_a_row[name] = 0
            self._latency.setdefault(name, deque(maxlen=self.window)).append(latency_s - base_pass_s)
            if memory_bytes is not None:
                self._memory.setdefault(name, deque(maxlen=self.window)).append(float(memory_bytes))

    def masked_for_cost(self, name: str) -> None:
        with self._lock:
            n = self._masked_in_a_row.get(name, 0) + 1
            if n >= self.forget_after:
                self._latency.pop(name, None)
                self._memory.pop(name, None)
                n = 0
            self._masked_in_a_row[name] = n


@dataclass(frozen=True)
class Masked:
    """An action left out of the choice, and why (reported in the repair trace)."""

    name: str
    reason: str


def feasible(
    config: RAGConfig,
    budgets: Budgets,
    costs: CostModel,
    enabled: Sequence[str],
    base_pass_s: float = 0.0,
    refresh_allowed: bool = True,
    missing: Collection[str] = (),
) -> tuple[list[Action], list[Masked]]:
    """The enabled actions that can run and fit, and the others with why; `missing`: parts of
    the deployment that are not configured ("escalation")."""
    ok: list[Action] = []
    masked: list[Masked] = []
    for name in enabled:
        a = ACTIONS_BY_NAME[name]
        # An action without a pass costs its own overhead only, not a pass like the first.
        latency, memory = costs.expected(a, base_pass_s if a.runs_a_pass else 0.0)
        if a.requires is not None and a.requires in missing:
            masked.append(Masked(name, f"needs models.{a.requires}, which is not configured"))
        elif not a.applies(config):
            masked.append(Masked(name, "would not change the configuration"))
        elif name == "index_refresh" and not refresh_allowed:
            masked.append(Masked(name, "refreshed recently (cool-down)"))
        elif latency > budgets.latency_s:
            masked.append(Masked(name, f"expected {latency:.2f} s > {budgets.latency_s:.2f} s left"))
            costs.masked_for_cost(name)
        elif memory > budgets.memory_bytes:
            masked.append(Masked(name, f"expected {memory / MB:.1f} MB > {budgets.memory_bytes / MB:.1f} MB"))
            costs.masked_for_cost(name)
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
