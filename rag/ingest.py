"""Incremental ingest: chunk and embed only documents that are new or changed.

A source (a directory or a JSONL file) is synchronised as a whole: its documents are added or
updated, documents it no longer holds are removed, and documents of other sources are kept.
The new generation is built aside and swapped in atomically (rag.store).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, TextNode

from ragmend.errors import Conflict, InputError, NotFound
from ragmend.rag.documents import SourceDocument, load_source
from ragmend.rag.store import DocEntry, IndexBackend, Manifest, Snapshot, make_node

# progress(done, total) after each embedding batch
Progress = Callable[[int, int], None]
EMBED_BATCH = 128


@dataclass(frozen=True, kw_only=True)
class IngestReport:
    generation: str
    documents: int
    added: int
    updated: int
    unchanged: int
    removed: int
    chunks: int
    embedded_chunks: int
    seconds: float
    # Where the time went: reading and validating sources is the rest.
    chunk_s: float = 0.0
    embed_s: float = 0.0
    write_s: float = 0.0

    @classmethod
    def unchanged_index(cls, generation: str | None, documents: int, chunks: int) -> IngestReport:
        """What a refresh with no sources to read reports: nothing read, nothing written."""
        return cls(
            generation=generation or "",
            documents=documents,
            added=0,
            updated=0,
            unchanged=documents,
            removed=0,
            chunks=chunks,
            embedded_chunks=0,
            seconds=0.0,
        )

    @property
    def chunks_per_s(self) -> float:
        return self.embedded_chunks / self.seconds if self.seconds > 0 else 0.0


class Ingestor:
    def __init__(
        self,
        store: IndexBackend,
        embed_model: Callable[[], Any],
        embed_model_name: str,
        chunk_size: int,
        chunk_overlap: int,
        tokenizer: Callable[[Any], Callable[[str], list[int]]],
        max_file_bytes: int,
    ):
        """`embed_model` is called only once there is something to embed: bad input fails fast."""
        self.store = store
        self._embed_model = embed_model
        self._tokenizer = tokenizer
        self.embed_model_name = embed_model_name
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.max_file_bytes = max_file_bytes

    def _splitter(self) -> SentenceSplitter:
        return SentenceSplitter(
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            tokenizer=self._tokenizer(self._embed_model()),
            include_prev_next_rel=False,
            # A section of a Markdown file is its own Document, named "<doc id>#s<n>": its
            # chunks are "<doc id>#s<n>.<i>", a whole document's "<doc id>#<i>".
            id_func=lambda i, doc: f"{doc.doc_id}.{i}" if "section" in doc.metadata else f"{doc.doc_id}#{i}",
        )

    def split(self, text: str) -> list[str]:
        """The chunks ingest would make of `text`: the same splitter, sizes and tokenizer."""
        return [c for c in self._splitter().split_text(text) if c.strip()]

    def ingest(
        self, paths: Sequence[Path], progress: Progress | None = None, rebuild: bool = False
    ) -> IngestReport:
        """Synchronise the index with `paths`. `rebuild` discards everything else in the index."""
        t0 = time.perf_counter()
        # Read and validate every source before taking the lock or writing anything.
        incoming: dict[str, SourceDocument] = {}
        for path in paths:
            for doc in load_source(Path(path), self.max_file_bytes):
                incoming[doc.id] = doc
        with self.store.writer_lock():
            old = None if rebuild or not self.store.exists() else self._previous()
            # Each source is synchronised as a whole: what it no longer holds goes.
            return self._build(
                incoming, old, progress=progress, t0=t0, sources={d.source for d in incoming.values()}
            )

    def upsert(
        self, docs: Sequence[SourceDocument], delete: Collection[str] = (), progress: Progress | None = None
    ) -> IngestReport:
        """Add or replace `docs` and remove the documents `delete` names, keeping every other one:
        documents sent over HTTP, where each stands alone (no source is synchronised as a whole).
        Validated before anything is written; the new generation is swapped in atomically."""
        t0 = time.perf_counter()
        incoming: dict[str, SourceDocument] = {}
        for doc in docs:
            if doc.id in incoming:
                raise InputError(f"document id '{doc.id}' is sent twice")
            incoming[doc.id] = doc
        both = sorted(incoming.keys() & set(delete))
        if both:
            raise InputError(f"document(s) {both} are both added and deleted")
        with self.store.writer_lock():
            old = self._previous() if self.store.exists() else None
            held = old.manifest.docs if old is not None else {}
            unknown = sorted(set(delete) - held.keys())
            if unknown:
                raise NotFound(f"no document(s) {unknown} in this index")
            if not incoming and set(delete) >= held.keys():
                raise Conflict("that would leave no documents: delete the collection instead")
            return self._build(incoming, old, progress=progress, t0=t0, sources=set(), drop=frozenset(delete))

    def _previous(self) -> Snapshot:
        """The current generation, which a new one must be compatible with."""
        old = self.store.load()
        m = old.manifest
        if (m.embed_model, m.chunk_size, m.chunk_overlap) != (
            self.embed_model_name,
            self.chunk_size,
            self.chunk_overlap,
        ):
            was = f"'{m.embed_model}' {m.chunk_size}/{m.chunk_overlap}"
            now = f"'{self.embed_model_name}' {self.chunk_size}/{self.chunk_overlap}"
            raise InputError(
                f"the index was built with embeddings and chunks {was}; the configuration says {now}: "
                "rebuild it from all its sources (`ragmend ingest --rebuild PATH...`)"
            )
        return old

    def _build(
        self,
        incoming: dict[str, SourceDocument],
        old: Snapshot | None,
        progress: Progress | None,
        t0: float,
        sources: set[str],
        drop: frozenset[str] = frozenset(),
    ) -> IngestReport:
        """The new generation: `incoming` added or replacing, the documents of `sources` that
        `incoming` lacks removed, those `drop` names removed, every other one carried over."""
        old_docs = old.manifest.docs if old else {}
        row_of = {n.node_id: i for i, n in enumerate(old.nodes)} if old else {}
        nodes: list[TextNode] = []
        rows: list[np.ndarray] = []
        entries: dict[str, DocEntry] = {}

        def reuse(doc_id: str, entry: DocEntry) -> None:
            assert old is not None
            entries[doc_id] = entry
            for nid in entry.node_ids:
                nodes.append(old.nodes[row_of[nid]])
                rows.append(old.matrix[row_of[nid]])

        # Documents of other sources are carried over as they are.
        for doc_id, entry in old_docs.items():
            if entry.source not in sources and doc_id not in incoming and doc_id not in drop:
                reuse(doc_id, entry)
        added = updated = unchanged = 0
        to_chunk: list[SourceDocument] = []
        for doc in incoming.values():
            prev = old_docs.get(doc.id)
            if prev is not None and prev.fingerprint == doc.fingerprint:
                # Same text; the source it now comes from decides what a later re-sync removes.
                reuse(doc.id, DocEntry(prev.fingerprint, doc.source, prev.title, prev.node_ids))
                unchanged += 1
            else:
                to_chunk.append(doc)
                added += prev is None
                updated += prev is not None
        removed = sum(
            1 for k, d in old_docs.items() if (d.source in sources and k not in incoming) or k in drop
        )

        t_chunk = time.perf_counter()
        fresh = self.chunk(to_chunk)
        t_embed = time.perf_counter()
        by_doc: dict[str, list[str]] = {}
        for n in fresh:
            by_doc.setdefault(n.metadata["doc_id"], []).append(n.node_id)
        for doc in to_chunk:
            entries[doc.id] = DocEntry(doc.fingerprint, doc.source, doc.title, tuple(by_doc.get(doc.id, ())))
        nodes.extend(fresh)
        rows.extend(self.embed(fresh, progress))
        t_write = time.perf_counter()
        if not nodes:
            raise InputError("nothing to index: every document is empty")
        matrix = np.stack(rows).astype(np.float32, copy=False)
        manifest = Manifest(
            embed_model=self.embed_model_name,
            dim=int(matrix.shape[1]),
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            docs=entries,
        )
        gen = self.store.write(manifest, nodes, matrix)
        t_end = time.perf_counter()
        return IngestReport(
            generation=gen,
            documents=len(entries),
            added=added,
            updated=updated,
            unchanged=unchanged,
            removed=removed,
            chunks=len(nodes),
            embedded_chunks=len(fresh),
            seconds=t_end - t0,
            chunk_s=t_embed - t_chunk,
            embed_s=t_write - t_embed,
            write_s=t_end - t_write,
        )

    def chunk(self, docs: list[SourceDocument]) -> list[TextNode]:
        if not docs:
            return []
        documents = [
            Document(
                id_=d.id if len(parts) == 1 else f"{d.id}#s{n}",
                text=text,
                metadata={"title": title, "doc_id": d.id}
                | ({} if len(parts) == 1 else {"section": n})
                | ({} if d.trust is None else {"trust": d.trust}),
                excluded_embed_metadata_keys=["doc_id", "section", "trust"],
                excluded_llm_metadata_keys=["doc_id", "section", "trust"],
            )
            for d in docs
            for parts in (d.sections(),)
            for n, (title, text) in enumerate(parts)
        ]
        split = self._splitter().get_nodes_from_documents(documents)
        # A sentence splitter over Documents yields TextNodes (typed BaseNode by llama-index).
        return [
            make_node(
                n.node_id,
                n.metadata["doc_id"],
                title=n.metadata["title"],
                text=n.get_content(),
                trust=n.metadata.get("trust"),
            )
            for n in split
        ]

    def embed(
        self, nodes: list[TextNode], progress: Progress | None = None, length_sorted: bool = True
    ) -> list[np.ndarray]:
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        if not texts:
            if progress:
                progress(0, 0)
            return []
        embed_model = self._embed_model()
        # Batches of similar length waste little on padding: embed in length order, return in
        # the nodes' order.
        order = (
            sorted(range(len(texts)), key=lambda i: len(texts[i]))
            if length_sorted
            else list(range(len(texts)))
        )
        vectors: list[np.ndarray | None] = [None] * len(texts)
        for start in range(0, len(order), EMBED_BATCH):
            idx = order[start : start + EMBED_BATCH]
            for i, v in zip(idx, embed_model.get_text_embedding_batch([texts[i] for i in idx]), strict=True):
                vectors[i] = np.asarray(v, dtype=np.float32)
            if progress:
                progress(min(start + EMBED_BATCH, len(texts)), len(texts))
        return vectors  # type: ignore[return-value]  # every slot was filled above
