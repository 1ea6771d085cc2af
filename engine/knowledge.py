"""The corpus knowledge graph as the engine uses it: kept in step with the index, and turned
into the diagnosis's kappa signal for a response."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ragmend.diagnosis.types import KGSignal, TripleMatch
from ragmend.kg import AlignThresholds, KGStore, align_text, open_store
from ragmend.rag.store import Snapshot

if TYPE_CHECKING:
    from ragmend.kg.store import SyncReport
    from ragmend.models.registry import ModelRegistry
    from ragmend.settings import Settings


class KnowledgeGraph:
    def __init__(self, settings: Settings, models: ModelRegistry, namespace: str = "default"):
        self._settings = settings
        self._models = models
        self._namespace = namespace
        self._store: KGStore | None = None
        self._available: bool | None = None  # the graph holds triples; set at each sync
        self._lock = threading.Lock()
        self.thresholds = AlignThresholds.from_settings(settings.kg)

    @property
    def store(self) -> KGStore:
        with self._lock:
            if self._store is None:
                self._store = open_store(self._settings, self._models, self._namespace)
            return self._store

    def sync(self, snapshot: Snapshot) -> SyncReport:
        """Make the graph hold exactly the documents of this index generation (incremental)."""
        text_of = {n.id_: n.text for n in snapshot.nodes}
        docs = {
            doc_id: (entry.fingerprint, [(nid, text_of[nid]) for nid in entry.node_ids if nid in text_of])
            for doc_id, entry in snapshot.manifest.docs.items()
        }
        report = self.store.sync(docs)
        self._available = self.store.stats().triples > 0
        return report

    def close(self) -> None:
        """Release the graph's connection (PostgreSQL keeps one per process)."""
        with self._lock:
            if self._store is not None:
                self._store.close()

    def signal(self, response: str) -> KGSignal:
        store = self.store
        alignment = align_text(
            response, store.extractor, store=store, embed=store.embed, thresholds=self.thresholds
        )
        matches = tuple(
            TripleMatch(
                triple=m.triple.spo,
                verdict=m.verdict,
                kg_triple=m.kg_triple.triple.spo if m.kg_triple else None,
                similarity=(round(m.subject_sim, 4), round(m.relation_sim, 4), round(m.object_sim, 4)),
                source=m.kg_triple.node_id if m.kg_triple else "",
                reason=m.reason,
                another_object=m.verdict == "conflict" and m.object_sim < self.thresholds.object,
            )
            for m in alignment.triples
        )
        if self._available is None:  # a graph synced by another process before this one started
            self._available = store.stats().triples > 0
        return KGSignal(alignment.kappa, matches, available=self._available)
