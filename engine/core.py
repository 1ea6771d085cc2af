"""Engine: one object the server and the CLI talk to."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.documents import BUNDLED_CORPUS
from rag.ingest import Ingestor, IngestReport, Progress
from rag.pipeline import IndexHandle, Pipeline
from rag.store import IndexStore
from rag.types import Answer, RAGConfig
from ragmend.errors import NotReady
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

    def load(
        self, build_index: bool = True, roles: Sequence[str] = ("embeddings", "reranker", "generator")
    ) -> None:
        """Load the models and open the index (building it from the sources if there is none)."""
        try:
            for role in roles:
                self.models.get(role)
            if build_index and not self.store.exists():
                log.info("no index at %s: ingesting %s", self.store.root, ", ".join(map(str, self.sources)))
                self.ingest(self.sources)
            self.index.open()
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
            "models": {role: self.models.is_loaded(role) for role in ("embeddings", "reranker", "generator")},
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
        return report

    def config(self, overrides: dict[str, Any] | None = None) -> RAGConfig:
        base = RAGConfig.from_settings(self.settings.rag)
        return base.patch(**overrides) if overrides else base

    def answer(self, query: str, overrides: dict[str, Any] | None = None) -> Answer:
        if not self.ready:
            raise NotReady("ragmend is still loading its models and index")
        self.index.reload_if_changed()
        return self.pipeline.answer(query, self.config(overrides))
