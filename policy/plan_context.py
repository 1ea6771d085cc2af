"""The context vector of the router: what is known of a request before any answer exists.

Layout, in order (feature_names() spells it out):
  emb_0..emb_{k-1}   the question's embedding, L2-normalised, times a FIXED random projection
                     (k = router.context_dim; its own seed, apart from the repair's)
  kind=<kind>        one-hot over QUESTION_KINDS (diagnosis/question_form.py)
  words              the question's length, words / 40, clipped to [0, 1]
  names              the names and numbers it asserts, / 6, clipped to [0, 1]
  follow_up          1 when it continues a conversation (earlier user turns)
  time_left          the request's time left / the request's latency budget, clipped to [0, 1]
  bias               1
"""

from __future__ import annotations

import math

import numpy as np

from ragmend.diagnosis.question_form import QUESTION_KINDS, QuestionForm
from ragmend.errors import InputError
from ragmend.policy.context import Projection
from ragmend.settings import PolicySettings

WORDS_SCALE = 40.0
NAMES_SCALE = 6.0
# The router's projection differs from the repair's: two policies, two independent draws.
PROJECTION_SEED_OFFSET = 7919


class PlanContextBuilder:
    def __init__(self, context_dim: int = 16, projection_seed: int = 0, latency_budget_s: float = 30.0):
        if latency_budget_s <= 0:
            raise ValueError("the budget that normalises the context must be > 0")
        self.context_dim = context_dim
        self.projection_seed = projection_seed
        self.latency_budget_s = float(latency_budget_s)
        self._projection = Projection(context_dim, projection_seed + PROJECTION_SEED_OFFSET)
        names = [f"emb_{i}" for i in range(context_dim)]
        names += [f"kind={k}" for k in QUESTION_KINDS]
        names += ["words", "names", "follow_up", "time_left", "bias"]
        self._names = tuple(names)

    @property
    def dim(self) -> int:
        return len(self._names)

    def feature_names(self) -> tuple[str, ...]:
        return self._names

    def with_budgets(self, cfg: PolicySettings) -> PlanContextBuilder:
        """The same layout, its time normalised by `cfg`'s request budget (as the repair's is)."""
        return PlanContextBuilder(self.context_dim, self.projection_seed, cfg.request_latency_budget_s)

    def build(
        self, embedding: np.ndarray | None, form: QuestionForm, follow_up: bool, time_left_s: float
    ) -> np.ndarray:
        if form.kind not in QUESTION_KINDS:
            raise InputError(
                f"unknown question kind {form.kind!r}; expected one of {', '.join(QUESTION_KINDS)}"
            )
        if math.isnan(time_left_s):
            raise InputError("time_left_s must be a number")
        kind = np.zeros(len(QUESTION_KINDS))
        kind[QUESTION_KINDS.index(form.kind)] = 1.0
        tail = [
            _clip01(form.words / WORDS_SCALE),
            _clip01(form.names / NAMES_SCALE),
            float(follow_up),
            _clip01(time_left_s / self.latency_budget_s),
            1.0,
        ]
        return np.concatenate([self._projection.project(embedding), kind, np.array(tail)])


def _clip01(v: float) -> float:
    return min(1.0, max(0.0, float(v)))
