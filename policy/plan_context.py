"""The context vector of the router: what is known of a request before any answer exists.

Layout, in order (feature_names() spells it out):
  emb_0..emb_{k-1}   the question's embedding, L2-normalised, times a FIXED random projection
                     (k = router.context_dim; its own seed, apart from the repair's)
  kind=claim         1 for a statement to verify (the claim prompt)
  kind=question      1 for any question; the finer kinds (QUESTION_KINDS) are pooled here
  words              the question's length, words / 40, clipped to [0, 1]
  names              the names and numbers it asserts, / 6, clipped to [0, 1]
  follow_up          1 when it continues a conversation (earlier user turns)
  time_left          the request's time left / the request's latency budget, clipped to [0, 1]
  evidence_read      1 when the plans' shared retrieval was read before the choice
  answerable         that evidence's P(answerable) (the diagnosis's answerability model); 0 unread
  bias               1

(evidence_read and answerable only with `evidence=True`.)

Why the kinds are pooled: with a few warm-start items per fine kind (who, which, when, ...), a kind
on which the small model happened to do well kept its questions on it; pooled, every question
shares what is learned of questions (docs/policy.md, "What it learned"). `kinds="fine"` builds the
one-hot over every kind, for replaying that comparison (`ragmend bench router`).

A state learned under the fine layout is read under the pooled one exactly (POOLED_FROM): each
pooled feature is the sum of the fine ones it replaces, so x_pooled = M x_fine for every x, and
the stored sums map by M (policy/layout.py). A state learned without the evidence features is read
under a layout with them exactly too: nothing was read before them, so both were 0 in every
stored context (EVIDENCE_FEATURES pool nothing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import numpy as np

from ragmend.diagnosis.question_form import QUESTION_KINDS, QuestionForm
from ragmend.errors import InputError
from ragmend.policy.context import NamedFeatures, Projection
from ragmend.settings import PolicySettings

WORDS_SCALE = 40.0
NAMES_SCALE = 6.0
# The router's projection differs from the repair's: two policies, two independent draws.
PROJECTION_SEED_OFFSET = 7919

KindLayout = Literal["pooled", "fine"]
# Each pooled kind feature and the fine ones it sums.
POOLED_FROM: Mapping[str, tuple[str, ...]] = {
    "kind=claim": ("kind=claim",),
    "kind=question": tuple(f"kind={k}" for k in QUESTION_KINDS if k != "claim"),
}
EVIDENCE_FEATURES: tuple[str, ...] = ("evidence_read", "answerable")


class PlanContextBuilder(NamedFeatures):
    def __init__(
        self,
        context_dim: int = 16,
        projection_seed: int = 0,
        latency_budget_s: float = 30.0,
        kinds: KindLayout = "pooled",
        evidence: bool = False,
    ):
        if latency_budget_s <= 0:
            raise ValueError("the budget that normalises the context must be > 0")
        if kinds not in ("pooled", "fine"):
            raise InputError(f"kinds must be pooled or fine, got {kinds!r}")
        self.context_dim = context_dim
        self.projection_seed = projection_seed
        self.latency_budget_s = float(latency_budget_s)
        self.kinds: KindLayout = kinds
        self.evidence = evidence
        self._projection = Projection(context_dim, projection_seed + PROJECTION_SEED_OFFSET)
        self._kind_names = (
            tuple(POOLED_FROM) if kinds == "pooled" else tuple(f"kind={k}" for k in QUESTION_KINDS)
        )
        names = [f"emb_{i}" for i in range(context_dim)]
        names += self._kind_names
        names += ["words", "names", "follow_up", "time_left"]
        names += [*(EVIDENCE_FEATURES if evidence else ()), "bias"]
        self._names = tuple(names)

    def pooled_from(self) -> Mapping[str, tuple[str, ...]]:
        """The features of this layout that sum features of the fine one (a stored state of that
        layout is read under this one); the evidence features pool nothing (0 in such a state)."""
        kinds = POOLED_FROM if self.kinds == "pooled" else {}
        return {**kinds, **dict.fromkeys(EVIDENCE_FEATURES if self.evidence else (), ())}

    def with_budgets(self, cfg: PolicySettings) -> PlanContextBuilder:
        """The same layout, its time normalised by `cfg`'s request budget (as the repair's is)."""
        return PlanContextBuilder(
            self.context_dim,
            self.projection_seed,
            cfg.request_latency_budget_s,
            self.kinds,
            evidence=self.evidence,
        )

    def build(
        self,
        embedding: np.ndarray | None,
        form: QuestionForm,
        follow_up: bool,
        time_left_s: float,
        p_answerable: float | None = None,
    ) -> np.ndarray:
        """`p_answerable`: the shared retrieval's P(answerable), None where it was not read (a
        layout without the evidence features ignores it)."""
        if form.kind not in QUESTION_KINDS:
            raise InputError(
                f"unknown question kind {form.kind!r}; expected one of {', '.join(QUESTION_KINDS)}"
            )
        if math.isnan(time_left_s):
            raise InputError("time_left_s must be a number")
        fine = f"kind={form.kind}"
        kind = np.array([float(fine in POOLED_FROM.get(n, (n,))) for n in self._kind_names])
        tail = [
            _clip01(form.words / WORDS_SCALE),
            _clip01(form.names / NAMES_SCALE),
            float(follow_up),
            _clip01(time_left_s / self.latency_budget_s),
        ]
        if self.evidence:
            tail += [float(p_answerable is not None), _clip01(p_answerable or 0.0)]
        tail.append(1.0)
        return np.concatenate([self._projection.project(embedding), kind, np.array(tail)])


def _clip01(v: float) -> float:
    return min(1.0, max(0.0, float(v)))
