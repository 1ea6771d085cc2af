"""One collection's documents: its index store, the open index, ingest and refresh, and the
knowledge graph that follows each generation. The engine answers over it; the admin API and the
CLI change it through it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from ragmend.diagnosis.comparison import TitleLookup, title_lookup
from ragmend.engine.knowledge import KnowledgeGraph
from ragmend.errors import Conflict, NotFound, NotReady
from ragmend.models.embeddings import token_counter
from ragmend.models.registry import ModelRegistry
from ragmend.rag.documents import BUNDLED_CORPUS, SourceDocument
from ragmend.rag.ingest import Ingestor, IngestReport, Progress
from ragmend.rag.pipeline import IndexHandle
from ragmend.rag.store import DocEntry, IndexBackend, IndexStore
from ragmend.settings import Settings

log = logging.getLogger("ragmend.engine")
# The default corpus's namespace in shared stores; a collection's is its name.
DEFAULT_NAMESPACE = "default"


def open_index(settings: Settings, namespace: str = DEFAULT_NAMESPACE) -> IndexBackend:
    """The index `store.kind` names: generations as files under data_dir, or in PostgreSQL."""
    if settings.store.kind == "postgres":
        from ragmend.rag.pgindex import PgIndexStore

        assert settings.store.dsn is not None  # StoreSettings requires it for postgres
        dsn = settings.store.dsn.get_secret_value()
        return PgIndexStore(dsn, namespace, timeout_s=settings.store.connect_timeout_s)
    return IndexStore(settings.index_dir)


class Corpus:
    def __init__(self, settings: Settings, models: ModelRegistry, namespace: str, ready: threading.Event):
        """`ready`: the engine's; set once its models and this index are loaded (a refresh before
        that is refused, and a change before it opens no index)."""
        self.settings = settings  # only the parts no runtime change touches: sources, rag, kg, store
        self.models = models
        self.namespace = namespace
        self.store = open_index(settings, namespace)
        self.kg = KnowledgeGraph(settings, models, namespace) if settings.kg.enabled else None
        self._ready = ready
        self._index: IndexHandle | None = None
        self._title_lookup: tuple[str, TitleLookup] | None = None
        self._refresh_lock = threading.Lock()  # one change at a time (admin, refresh action)

    @property
    def sources(self) -> tuple[Path, ...]:
        """What an index refresh reads: the configured sources (the default corpus falls back to
        the bundled sample; a collection without sources holds only what was sent over HTTP)."""
        if self.namespace != DEFAULT_NAMESPACE:
            return self.settings.sources
        return self.settings.sources or (BUNDLED_CORPUS,)

    @property
    def index(self) -> IndexHandle:
        if self._index is None:
            self._index = IndexHandle(self.store, self.models.embeddings)
        return self._index

    @property
    def generation(self) -> str | None:
        """The open index's generation (None: not open)."""
        return self._index.snapshot.generation if self._index is not None and self._index.is_open else None

    def open(self, build_index: bool = True) -> None:
        """Open the index at start, ingesting the sources first where there is none; the graph
        is brought in step with it."""
        if build_index and not self.store.exists() and self.sources:
            log.info("no index at %s: ingesting %s", self.store.root, ", ".join(map(str, self.sources)))
            self.ingest(self.sources)
        if self.store.exists():
            retriever = self.index.open()
            if self.kg is not None:
                # An index built before the graph (or by a run with kg off) gets its graph now;
                # when they are in step this reads the fingerprints and returns.
                self.kg.sync(retriever.snapshot)
        elif self.namespace == DEFAULT_NAMESPACE:
            self.index.open()  # IndexMissing, naming what to run
        # else: a collection with no documents yet, ready for its first ingest over HTTP.

    def for_request(self) -> IndexHandle:
        """The index a request reads: moved to the current generation where another process (a
        replica, `ragmend ingest`) made a new one, opened where another replica made the first."""
        index = self.index
        was_open = index.is_open
        if was_open and index.reload_if_changed() and self.kg is not None:
            self.kg.sync(index.snapshot)  # only the documents whose fingerprints changed
        if not index.is_open:
            if not self.store.exists():
                if was_open:  # its generations went since the last request: deleted elsewhere
                    raise NotFound(f"collection '{self.namespace}' was deleted")
                raise Conflict(
                    f"collection '{self.namespace}' has no documents yet: add some "
                    f"(POST /admin/collections/{self.namespace}/documents)"
                )
            index.open()
            if self.kg is not None:
                self.kg.sync(index.snapshot)
        return index

    def ingestor(self) -> Ingestor:
        rag = self.settings.rag
        return Ingestor(
            self.store,
            lambda: self.models.embeddings,
            embed_model_name=self.settings.models.embeddings.model,
            chunk_size=rag.chunk_size,
            chunk_overlap=rag.chunk_overlap,
            tokenizer=token_counter,
            max_file_bytes=rag.max_file_bytes,
        )

    def ingest(
        self, paths: Sequence[Path], progress: Progress | None = None, rebuild: bool = False
    ) -> IngestReport:
        report = self.ingestor().ingest(paths, progress=progress, rebuild=rebuild)
        return self._swapped(report, reopen=self._index is not None and self._index.is_open)

    def upsert_documents(self, docs: Sequence[SourceDocument], delete: Collection[str] = ()) -> IngestReport:
        """Add or replace `docs`, remove the documents `delete` names, keep the rest (the admin
        API's documents; rag/ingest.py Ingestor.upsert), one new generation swapped in."""
        with self._refresh_lock:
            return self._swapped(self.ingestor().upsert(docs, delete), reopen=self._ready.is_set())

    def documents(self) -> dict[str, DocEntry]:
        """The documents of the current generation (none before the first ingest)."""
        return dict(self.store.load().manifest.docs) if self.store.exists() else {}

    def refresh_index(self) -> IngestReport:
        """Re-ingest the configured sources (incremental; built aside, swapped atomically): what
        the index_refresh repair action and POST /admin/index/refresh run."""
        if not self._ready.is_set():
            raise NotReady("ragmend is still loading its models and index")
        with self._refresh_lock:
            if not self.sources:  # a collection of documents sent over HTTP: nothing to re-read
                docs = self.documents()
                chunks = sum(len(d.node_ids) for d in docs.values())
                return IngestReport.unchanged_index(self.store.current_generation(), len(docs), chunks)
            return self.ingest(self.sources)

    def _swapped(self, report: IngestReport, reopen: bool) -> IngestReport:
        """After a new generation: readers move to it when `reopen` (requests in flight keep the
        snapshot they hold) and the graph follows it."""
        if reopen:
            self.index.open()
        if self.kg is not None:
            self.kg.sync(self.store.load())
        return report

    def titled(self, name: str) -> Sequence[tuple[str, str]]:
        """The open index's opening passage (title, text) of each document titled `name`
        (comparison.title_key), from a lookup built once per index generation."""
        if self._index is None or not self._index.is_open:
            return []
        snapshot = self._index.snapshot
        cached = self._title_lookup
        if cached is None or cached[0] != snapshot.generation:
            seen: set[str] = set()
            openings = []
            for node in snapshot.nodes:  # a document's first node is its opening
                doc_id = str(node.metadata.get("doc_id", node.node_id))
                if doc_id not in seen:
                    seen.add(doc_id)
                    openings.append((str(node.metadata.get("title", "")), node.text))
            # One assignment: a request reading the old lookup meanwhile still reads a whole one.
            self._title_lookup = cached = (snapshot.generation, title_lookup(openings))
        return cached[1](name)

    def stored_vectors(self, node_ids: list[str]) -> np.ndarray | None:
        """The open index's vectors of these passages (None: not all of them are in it)."""
        if self._index is None or not self._index.is_open:
            return None
        return self._index.snapshot.stored_vectors(node_ids)

    def close(self) -> None:
        if self.kg is not None:
            self.kg.close()
        self.store.close()
