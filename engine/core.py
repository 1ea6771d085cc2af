"""Engine: one object the server and the CLI talk to."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from actions.catalogue import BY_NAME as ACTIONS_BY_NAME
from actions.meter import CostMeter
from diagnosis.diagnoser import Diagnoser, DiagnosisOptions
from diagnosis.types import Diagnosis, Thresholds
from engine.knowledge import KnowledgeGraph
from engine.outcome import Outcome
from engine.repair import Repairer
from engine.services import EngineServices
from kg.phrases import embed_with
from policy import Policy
from rag.documents import BUNDLED_CORPUS
from rag.ingest import Ingestor, IngestReport, Progress
from rag.pipeline import IndexHandle, Pipeline
from rag.store import IndexStore
from rag.types import Answer, RAGConfig
from ragmend.errors import ConfigError, NotReady
from ragmend.models.embeddings import token_counter
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings

log = logging.getLogger("ragmend.engine")


class Engine:
    def __init__(self, settings: Settings, models: ModelRegistry | None = None):
        self.settings = settings
        self.models = models or ModelRegistry(settings)
        self.store = IndexStore(settings.index_dir)
        self._index: IndexHandle | None = None
        self._pipeline: Pipeline | None = None
        self._diagnoser: Diagnoser | None = None
        self._repairer: Repairer | None = None
        self._embed_fn: Callable[[list[str]], np.ndarray] | None = None
        self.kg = KnowledgeGraph(settings, self.models) if settings.kg.enabled else None
        self._repairer_lock = threading.Lock()
        unknown = sorted(set(settings.policy.enabled_actions) - set(ACTIONS_BY_NAME))
        if unknown:
            raise ConfigError(
                f"policy.enabled_actions: unknown action(s) {unknown}; actions: {sorted(ACTIONS_BY_NAME)}"
            )
        self._ready = threading.Event()
        self._load_error: str | None = None

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def sources(self) -> tuple[Path, ...]:
        return self.settings.sources or (BUNDLED_CORPUS,)

    @property
    def index(self) -> IndexHandle:
        if self._index is None:
            self._index = IndexHandle(self.store, self.models.embeddings)
        return self._index

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            self._pipeline = Pipeline(self.settings, self.models, self.index)
        return self._pipeline

    @property
    def diagnoser(self) -> Diagnoser:
        if self._diagnoser is None:
            d = self.settings.diagnosis
            options = DiagnosisOptions(
                thresholds=Thresholds(
                    d.entail_threshold,
                    d.contradict_threshold,
                    d.relevance_threshold,
                    d.egc_tau,
                    d.joint_entail_threshold,
                ),
                query_hypothesis=d.query_hypothesis,
                joint_premise=d.joint_premise,
                max_claims=d.max_claims,
            )
            self._diagnoser = Diagnoser(
                self.models.nli,
                self._embed,
                options,
                reranker=self.models.reranker if d.query_hypothesis == "rerank" else None,
                align_kg=self.kg.signal if self.kg is not None else None,
            )
        return self._diagnoser

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings for diagnosis (EGC) and the policy context."""
        if self._embed_fn is None:
            self._embed_fn = embed_with(self.models.embeddings)
        return self._embed_fn(texts)

    @property
    def roles(self) -> tuple[str, ...]:
        """The model roles serving a request needs."""
        roles = ["embeddings", "reranker", "generator"]
        if self.settings.diagnosis.enabled:
            roles.append("nli")
        if self.kg is not None and self.settings.kg.extractor == "spacy":
            roles.append("spacy")
        return tuple(roles)

    def load(self, build_index: bool = True, roles: Sequence[str] | None = None) -> None:
        """Load the models and open the index (building it from the sources if there is none)."""
        try:
            for role in self.roles if roles is None else roles:
                self.models.get(role)
            if build_index and not self.store.exists():
                log.info("no index at %s: ingesting %s", self.store.root, ", ".join(map(str, self.sources)))
                self.ingest(self.sources)
            retriever = self.index.open()
            if self.kg is not None:
                # An index built before the graph (or by a run with kg off) gets its graph now;
                # when they are in step this reads the fingerprints and returns.
                self.kg.sync(retriever.snapshot)
            self._ready.set()
        except Exception as e:
            self._load_error = f"{type(e).__name__}: {e}"
            raise

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def load_error(self) -> str | None:
        return self._load_error

    def status(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "models": {role: self.models.is_loaded(role) for role in self.roles},
            "index": self._index.snapshot.generation
            if self._index is not None and self._index.is_open
            else None,
            "error": self._load_error,
        }

    # -- work ---------------------------------------------------------------------------------

    def ingestor(self) -> Ingestor:
        rag = self.settings.rag
        return Ingestor(
            self.store,
            lambda: self.models.embeddings,
            self.settings.models.embeddings.model,
            rag.chunk_size,
            rag.chunk_overlap,
            token_counter,
            rag.max_file_bytes,
        )

    def ingest(
        self, paths: Sequence[Path], progress: Progress | None = None, rebuild: bool = False
    ) -> IngestReport:
        report = self.ingestor().ingest(paths, progress=progress, rebuild=rebuild)
        if self._index is not None and self._index.is_open:
            self._index.open()  # swap: requests in flight keep the snapshot they hold
        if self.kg is not None:
            self.kg.sync(self.store.load())
        return report

    def config(self, overrides: dict[str, Any] | None = None) -> RAGConfig:
        base = RAGConfig.from_settings(self.settings.rag)
        return base.patch(**overrides) if overrides else base

    def answer(self, query: str, overrides: dict[str, Any] | None = None) -> Answer:
        if not self.ready:
            raise NotReady("ragmend is still loading its models and index")
        self.index.reload_if_changed()
        return self.pipeline.answer(query, self.config(overrides))

    def diagnose(self, answer: Answer) -> Diagnosis:
        mode = "claim" if answer.config.prompt == "claim" else "qa"
        return self.diagnoser.diagnose(
            answer.query, answer.evidence, answer.response, mode=mode, reranked=answer.config.rerank
        )

    @property
    def repairer(self) -> Repairer:
        with self._repairer_lock:
            if self._repairer is None:
                self._repairer = Repairer(
                    Policy.from_settings(self.settings),
                    EngineServices(self),
                    self.pipeline.answer,
                    self.diagnose,
                    self._embed,
                    CostMeter(),
                    refresh_cooldown_s=self.settings.policy.refresh_cooldown_s,
                )
            return self._repairer

    def respond(self, query: str, overrides: dict[str, Any] | None = None) -> Outcome:
        """One request: answer, diagnose, and when it failed, one budgeted repair (engine/repair.py)."""
        started = time.monotonic()
        answer = self.answer(query, overrides)
        if not self.settings.diagnosis.enabled:
            return Outcome(answer, None, seconds=time.monotonic() - started)
        diagnosis = self.diagnose(answer)
        if not diagnosis.failed or not self.settings.policy.repair:
            return Outcome(answer, diagnosis, seconds=time.monotonic() - started)
        final, final_diagnosis, trace = self.repairer.repair(answer, diagnosis, started)
        return Outcome(final, final_diagnosis, answer, diagnosis, trace, time.monotonic() - started)

    def close(self) -> None:
        """Release what holds files: the policy's state store."""
        if self._repairer is not None:
            self._repairer.policy.close()
