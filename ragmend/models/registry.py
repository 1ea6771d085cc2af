"""ModelRegistry: loads each role once, on first use, and reports on them (`ragmend models`)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ragmend import cancel
from ragmend.errors import ModelUnavailable, RagmendError
from ragmend.models.bundled import path_bytes
from ragmend.models.embeddings import embeddings_runtime, embeddings_source, load_embeddings
from ragmend.models.gate import GateTimeout
from ragmend.models.generator import Generator, InProcess, generator_source, load_generator
from ragmend.models.nli import NLIModel, load_nli, nli_source
from ragmend.models.reranker import Reranker, load_reranker, reranker_source
from ragmend.models.spacy_model import load_spacy, spacy_source
from ragmend.settings import Settings

ROLES = ("embeddings", "reranker", "generator", "escalation", "spacy", "nli")
# The roles a generator fills: the first pass's, and the stronger one (models.escalation).
GENERATOR_ROLES = ("generator", "escalation")


@dataclass(frozen=True, kw_only=True)
class RoleReport:
    role: str
    status: str  # "ok" | "error" | "off" (a role the configuration leaves out)
    source: str
    path: str
    bytes: int
    load_s: float
    smoke: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("role")
        return d


class ModelRegistry:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._loaded: dict[str, Any] = {}
        self._load_seconds: dict[str, float] = {}
        self._locks = {role: threading.Lock() for role in ROLES}
        # The in-process generators take turns on this process's cores.
        self._in_process = InProcess(fit_threads=not settings.models.take_turns)
        m = settings.models
        self._loaders: dict[str, Callable[[], Any]] = {
            "embeddings": lambda: load_embeddings(m, settings.cache_dir),
            "reranker": lambda: load_reranker(m),
            "generator": lambda: load_generator(m.generator, settings, self._in_process),
            "escalation": self._load_escalation,
            "spacy": lambda: load_spacy(m),
            "nli": lambda: load_nli(m),
        }

    @classmethod
    def sharing(cls, other: ModelRegistry, settings: Settings) -> ModelRegistry:
        """A registry for `settings` that reuses `other`'s loaded models where their configuration matches."""
        new = cls(settings)
        if settings.models == other.settings.models:
            new._loaded = other._loaded
            new._load_seconds = other._load_seconds
            new._locks = other._locks
            new._in_process = other._in_process
            return new
        new._in_process = other._in_process  # the same cores, whatever is shared
        # Otherwise role by role: an evaluation workspace changes only the generator's section
        # (its cache, its answer length); the encoders it shares are the expensive loads.
        if settings.models.allow_hub == other.settings.models.allow_hub:
            same_cache = settings.cache_dir == other.settings.cache_dir  # where bundled models unpack
            for role in ROLES:
                same = getattr(settings.models, role) == getattr(other.settings.models, role)
                if same and role in other._loaded and (role not in GENERATOR_ROLES or same_cache):
                    new._loaded[role] = other._loaded[role]
                    new._load_seconds[role] = other._load_seconds.get(role, 0.0)
        return new

    def cores_waited_s(self) -> float:
        """Seconds the calling thread has waited for the cores while other requests' work held
        them: for an in-process generation, or for a turn (`turn_on_the_cores`)."""
        return self._in_process.gate.waited_s()

    @contextmanager
    def turn_on_the_cores(self, stage: str) -> Iterator[None]:
        """The block runs while no in-process generation does, in the generators' order (the
        earliest request deadline first): on a CPU, a diagnosis beside a generation slows both
        (llama.cpp's threads wait for each other at every layer, and one that shares its core
        holds them all up), and taking turns gets more answers out per second than sharing
        (docs/limits.md). A no-op where no generator runs in this process, or with
        models.take_turns off. A request cancelled while it waits raises its
        Cancelled error for `stage`."""
        m = self.settings.models
        local = not m.generator.model or (m.escalation is not None and not m.escalation.model)
        if not (local and m.take_turns):
            yield
            return
        gate, request = self._in_process.gate, cancel.current()
        try:
            gate.acquire(request, math.inf)
        except GateTimeout:
            request.check(stage)  # raises: the wait ended only because the request was cancelled
            raise
        try:
            yield
        finally:
            gate.release()

    def get(self, role: str) -> Any:
        if role in self._loaded:
            return self._loaded[role]
        with self._locks[role]:
            if role not in self._loaded:
                t0 = time.perf_counter()
                self._loaded[role] = self._loaders[role]()
                self._load_seconds[role] = time.perf_counter() - t0
        return self._loaded[role]

    def is_loaded(self, role: str) -> bool:
        return role in self._loaded

    @property
    def embeddings(self) -> Any:
        return self.get("embeddings")

    @property
    def reranker(self) -> Reranker:
        return self.get("reranker")

    @property
    def generator(self) -> Generator:
        return self.get("generator")

    @property
    def escalation(self) -> Generator | None:
        """The stronger generator of models.escalation; None when none is configured."""
        if self.settings.models.escalation is None:
            return None
        return cast(Generator, self.get("escalation"))

    @property
    def has_escalation(self) -> bool:
        return self.settings.models.escalation is not None

    def _load_escalation(self) -> Generator:
        cfg = self.settings.models.escalation
        if cfg is None:
            raise ModelUnavailable("no stronger generator is configured (models.escalation is null)")
        return load_generator(cfg, self.settings, self._in_process)

    @property
    def spacy(self) -> Any:
        return self.get("spacy")

    @property
    def nli(self) -> NLIModel:
        return self.get("nli")

    # -- reporting ----------------------------------------------------------------------------

    def source(self, role: str) -> tuple[str, str]:
        m = self.settings.models
        return {
            "embeddings": lambda: embeddings_source(m),
            "reranker": lambda: reranker_source(m),
            "generator": lambda: generator_source(m.generator, self.settings.cache_dir),
            "escalation": lambda: self._escalation_source(),
            "spacy": lambda: spacy_source(m),
            "nli": lambda: nli_source(m),
        }[role]()

    def _escalation_source(self) -> tuple[str, str]:
        cfg = self.settings.models.escalation
        if cfg is None:
            raise ModelUnavailable("not configured (models.escalation is null)")
        return generator_source(cfg, self.settings.cache_dir)

    def report(self, role: str) -> RoleReport:
        if role == "escalation" and not self.has_escalation:
            return RoleReport(
                role=role,
                status="off",
                source="not configured",
                path="",
                bytes=0,
                load_s=0.0,
                smoke="models.escalation is null",
            )
        source, path, size = "?", "", 0
        try:
            source, path = self.source(role)
            size = path_bytes(Path(path)) if Path(path).exists() else 0
            t0 = time.perf_counter()
            model = self.get(role)
            load_s = self._load_seconds.get(role, time.perf_counter() - t0)
            smoke = _SMOKE[role](model)
            return RoleReport(
                role=role,
                status="ok",
                source=source,
                path=path,
                bytes=size,
                load_s=round(load_s, 3),
                smoke=smoke,
            )
        except RagmendError as e:
            return RoleReport(
                role=role, status="error", source=source, path=path, bytes=size, load_s=0.0, smoke=str(e)
            )


def _smoke_embeddings(embed: Any) -> str:
    a, b, c = (
        np.asarray(embed.get_text_embedding(t))
        for t in ("Paris is the capital of France.", "France's capital city is Paris.", "Bananas are yellow.")
    )
    return (
        f"dim={a.shape[0]} cos(paraphrase)={float(a @ b):.2f} cos(unrelated)={float(a @ c):.2f} "
        f"runtime={embeddings_runtime(embed)}"
    )


def _smoke_reranker(reranker: Reranker) -> str:
    rel, irr = reranker.score(
        "What is the capital of France?",
        ["Paris is the capital and largest city of France.", "The banana is an elongated, edible fruit."],
    )
    return f"relevant={rel:.2f} irrelevant={irr:.2f}"


def _smoke_generator(gen: Generator) -> str:
    out = gen.chat(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}], max_tokens=8
    )
    rate = out.completion_tokens / out.seconds if out.seconds > 0 else 0.0
    return f"{out.text[:40]!r} ({out.completion_tokens} tokens, {rate:.1f} tok/s)"


def _smoke_spacy(nlp: Any) -> str:
    doc = nlp("Marie Curie won the Nobel Prize in Physics in 1903.")
    ents = ", ".join(f"{e.text}/{e.label_}" for e in doc.ents)
    return f"entities: {ents}"


def _smoke_nli(nli: NLIModel) -> str:
    premise = "Marie Curie won the Nobel Prize in Physics in 1903."
    batch = nli.predict(
        [(premise, "Marie Curie won a Nobel Prize."), (premise, "Marie Curie never won a Nobel Prize.")]
    )
    ent, con = batch.probs[0][0], batch.probs[1][2]
    return f"P(entail | restated)={ent:.2f} P(contradict | negated)={con:.2f}"


_SMOKE: dict[str, Callable[[Any], str]] = {
    "embeddings": _smoke_embeddings,
    "reranker": _smoke_reranker,
    "generator": _smoke_generator,
    "escalation": _smoke_generator,
    "spacy": _smoke_spacy,
    "nli": _smoke_nli,
}
