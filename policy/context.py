"""The context vector x of the repair policy (Appendix B), built the same way at every request.

Layout, in order (feature_names() spells it out):
  emb_0..emb_{k-1}      the query embedding, L2-normalised, times a FIXED Gaussian random
                        projection (k = context_dim; 0 leaves the embedding out)
  failure=<type>        one-hot over FAILURE_TYPES
  e_q=<state>           one-hot over NLI_STATES
  e_r=<state>           one-hot over NLI_STATES
  kappa=<status>        one-hot over KAPPAS
  latency_left          remaining end-to-end latency budget / the request budget, clipped to [0, 1]
  memory_left           remaining memory headroom / the memory budget, clipped to [0, 1]
  memory_unmeasured     1 when no memory figure exists (then memory_left is 1, not a guess)
  bias                  1
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

import numpy as np

from ragmend.budgets import MB
from ragmend.diagnosis.types import FAILURE_TYPES, KAPPAS, NLI_STATES, Diagnosis
from ragmend.errors import InputError
from ragmend.settings import PolicySettings


class NamedFeatures:
    """A context layout: its features' names, in order (a stored state records them)."""

    _names: tuple[str, ...]

    @property
    def dim(self) -> int:
        return len(self._names)

    def feature_names(self) -> tuple[str, ...]:
        return self._names


class ContextBuilder(NamedFeatures):
    """Builds x from a query embedding, a Diagnosis and the budgets left (the embedding's part:
    `Projection`)."""

    def __init__(
        self,
        context_dim: int = 16,
        projection_seed: int = 0,
        latency_budget_s: float = 30.0,
        memory_budget_bytes: float = 6 * MB,
    ):
        if context_dim < 0:
            raise ValueError("context_dim must be >= 0")
        if latency_budget_s <= 0 or memory_budget_bytes <= 0:
            raise ValueError("the budgets that normalise the context must be > 0")
        self.context_dim = context_dim
        self.projection_seed = projection_seed
        self.latency_budget_s = float(latency_budget_s)
        self.memory_budget_bytes = float(memory_budget_bytes)
        self._projection = Projection(context_dim, projection_seed)
        self._names = self._feature_names()

    def pooled_from(self) -> Mapping[str, tuple[str, ...]]:
        """No feature of this layout pools an older one's."""
        return {}

    def with_budgets(self, cfg: PolicySettings) -> ContextBuilder:
        """The same layout (projection), its budgets normalised by `cfg`'s."""
        return ContextBuilder(
            context_dim=self.context_dim,
            projection_seed=self.projection_seed,
            latency_budget_s=cfg.request_latency_budget_s,
            memory_budget_bytes=cfg.memory_budget_bytes * cfg.budget_scale,
        )

    def _feature_names(self) -> tuple[str, ...]:
        names = [f"emb_{i}" for i in range(self.context_dim)]
        names += [f"failure={f}" for f in FAILURE_TYPES]
        names += [f"e_q={s}" for s in NLI_STATES]
        names += [f"e_r={s}" for s in NLI_STATES]
        names += [f"kappa={k}" for k in KAPPAS]
        names += ["latency_left", "memory_left", "memory_unmeasured", "bias"]
        return tuple(names)

    def projection(self, embedding_size: int) -> np.ndarray:
        return self._projection.matrix(embedding_size)

    def build(
        self,
        embedding: np.ndarray | None,
        diagnosis: Diagnosis,
        latency_left_s: float,
        memory_left_bytes: float | None,
    ) -> np.ndarray:
        """x for a failed answer: its query embedding, its diagnosis and the budgets left.

        latency_left_s: what is left of the end-to-end request budget when the repair is chosen.
        memory_left_bytes: the memory headroom left for the repair pass (budget minus what is
        already in use); None when memory cannot be measured at all.
        """
        return self.build_from_signals(
            embedding,
            failure=diagnosis.failure,
            e_q=diagnosis.e_q.state,
            e_r=diagnosis.e_r.state,
            kappa=diagnosis.kappa,
            latency_left_s=latency_left_s,
            memory_left_bytes=memory_left_bytes,
        )

    def build_from_signals(
        self,
        embedding: np.ndarray | None,
        *,
        failure: str,
        e_q: str,
        e_r: str,
        kappa: str,
        latency_left_s: float,
        memory_left_bytes: float | None,
    ) -> np.ndarray:
        """The same x from the bare signals (offline training, benchmarks, tests)."""
        parts = [
            self._semantic(embedding),
            _one_hot(failure, FAILURE_TYPES, "failure type"),
            _one_hot(e_q, NLI_STATES, "e_q"),
            _one_hot(e_r, NLI_STATES, "e_r"),
            _one_hot(kappa, KAPPAS, "kappa"),
        ]
        if not math.isfinite(latency_left_s):
            raise InputError(f"latency_left_s must be a finite number, got {latency_left_s}")
        latency_left = _clip01(latency_left_s / self.latency_budget_s)
        if memory_left_bytes is None:
            # Unmeasured: the full headroom and a flag that says so, never an invented figure.
            memory_left, unmeasured = 1.0, 1.0
        else:
            if not math.isfinite(memory_left_bytes):
                raise InputError(f"memory_left_bytes must be finite or None, got {memory_left_bytes}")
            memory_left, unmeasured = _clip01(memory_left_bytes / self.memory_budget_bytes), 0.0
        parts.append(np.array([latency_left, memory_left, unmeasured, 1.0]))
        return np.concatenate(parts)

    def _semantic(self, embedding: np.ndarray | None) -> np.ndarray:
        return self._projection.project(embedding)


class Projection:
    """The query embedding, L2-normalised, times a FIXED Gaussian random matrix of `dim` rows.

    The matrix is a pure function of (seed, dim, embedding size): the same seed gives the same x
    in every process, which is what makes a persisted policy state meaningful after a restart.
    It is drawn lazily because the embedding size is only known when the first embedding arrives
    (384 for the bundled all-MiniLM-L6-v2).
    """

    def __init__(self, dim: int, seed: int = 0):
        if dim < 0:
            raise ValueError("context_dim must be >= 0")
        self.dim = dim
        self.seed = seed
        self._matrices: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def matrix(self, embedding_size: int) -> np.ndarray:
        """The (dim, embedding_size) matrix, entries N(0, 1/dim).

        The 1/dim variance keeps the projected vector's norm close to the input's
        (Johnson-Lindenstrauss), so a unit embedding gives entries of about 1/sqrt(dim), on the
        scale of the one-hot features.
        """
        with self._lock:
            p = self._matrices.get(embedding_size)
            if p is None:
                rng = np.random.default_rng([self.seed, embedding_size])
                p = rng.standard_normal((self.dim, embedding_size)) / math.sqrt(self.dim)
                p.setflags(write=False)
                self._matrices[embedding_size] = p
            return p

    def project(self, embedding: np.ndarray | None) -> np.ndarray:
        if self.dim == 0:
            return np.zeros(0)
        if embedding is None:
            raise InputError(f"a query embedding is required (context_dim = {self.dim})")
        e = np.asarray(embedding, dtype=np.float64).ravel()
        if e.size == 0 or not np.all(np.isfinite(e)):
            raise InputError("the query embedding must be a non-empty vector of finite numbers")
        norm = float(np.linalg.norm(e))
        # Unit length first: embedding models differ in scale, the projection should not care.
        if norm > 0:
            e = e / norm
        return self.matrix(e.size) @ e


def _one_hot(value: str, values: tuple[str, ...], what: str) -> np.ndarray:
    try:
        i = values.index(value)
    except ValueError:
        raise InputError(f"unknown {what} {value!r}; expected one of {', '.join(values)}") from None
    out = np.zeros(len(values))
    out[i] = 1.0
    return out


def _clip01(v: float) -> float:
    return min(1.0, max(0.0, float(v)))
