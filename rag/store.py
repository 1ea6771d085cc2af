"""The persisted index: chunk nodes, their dense vectors and a BM25 index, one generation at a time.

Layout under the index directory:

    CURRENT            the name of the live generation (replaced atomically)
    gen-000007/        manifest.json, nodes.jsonl, embeddings.npy, bm25/
    .build-<uuid>/     a generation being written (removed if a writer died)
    .lock              held by the one writer at a time

A writer builds a complete generation aside, fsyncs it, renames it into place and only then
points CURRENT at it. A crash at any moment leaves CURRENT naming a complete generation.
Readers load a snapshot and keep it: requests in flight finish on the generation they started on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode

from ragmend.errors import IndexMissing, InputError
from ragmend.rag.vector_store import NumpyVectorStore

MANIFEST_VERSION = 1
KEEP_GENERATIONS = 2  # the live one and its predecessor, which in-flight readers may still hold


@dataclass(frozen=True)
class DocEntry:
    fingerprint: str
    source: str
    title: str
    node_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Manifest:
    embed_model: str
    dim: int
    chunk_size: int
    chunk_overlap: int
    docs: dict[str, DocEntry] = field(default_factory=dict)
    created: float = 0.0
    version: int = MANIFEST_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "created": self.created,
            "embed_model": self.embed_model,
            "dim": self.dim,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "docs": {
                k: {
                    "fingerprint": d.fingerprint,
                    "source": d.source,
                    "title": d.title,
                    "node_ids": list(d.node_ids),
                }
                for k, d in self.docs.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        if data.get("version") != MANIFEST_VERSION:
            raise IndexMissing(
                f"index manifest version {data.get('version')} is not {MANIFEST_VERSION}: re-ingest"
            )
        docs = {
            k: DocEntry(d["fingerprint"], d["source"], d["title"], tuple(d["node_ids"]))
            for k, d in data["docs"].items()
        }
        return cls(
            embed_model=data["embed_model"],
            dim=int(data["dim"]),
            chunk_size=int(data["chunk_size"]),
            chunk_overlap=int(data["chunk_overlap"]),
            docs=docs,
            created=float(data.get("created", 0.0)),
        )


def make_node(node_id: str, doc_id: str, title: str, text: str, trust: float | None = None) -> TextNode:
    node = TextNode(
        id_=node_id,
        text=text,
        metadata={"title": title, "doc_id": doc_id} | ({} if trust is None else {"trust": trust}),
        # The title is embedded and BM25-indexed with the chunk ("title: ...\n\ntext"); the doc id
        # and the trust level are not.
        excluded_embed_metadata_keys=["doc_id", "trust"],
        excluded_llm_metadata_keys=["doc_id", "trust"],
    )
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc_id)
    return node


class Snapshot(Protocol):
    """One generation of an index, as retrieval, ingest and the graph read it (IndexSnapshot
    over files, rag/pgindex.PgSnapshot over PostgreSQL)."""

    @property
    def generation(self) -> str: ...

    @property
    def manifest(self) -> Manifest: ...

    @property
    def nodes(self) -> list[TextNode]: ...

    @property
    def matrix(self) -> np.ndarray: ...

    @property
    def filters(self) -> Any:  # MetadataFilters keeping dense queries on this generation, or None
        ...

    def vector_index(self, embed_model: Any) -> VectorStoreIndex: ...

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """Around a dense query: the store's own errors while it cannot serve become
        StoreUnavailable (a 503 to retry), not a bug."""
        ...

    def bm25_retriever(self, k: int) -> Any: ...

    def stored_vectors(self, node_ids: list[str]) -> np.ndarray | None:
        """The vectors this generation holds for these nodes, in order (unit rows); None when
        one of them is not in it (a passage retrieved from another generation)."""
        ...


class IndexBackend(Protocol):
    """Where generations are kept (IndexStore: files; rag/pgindex.PgIndexStore: PostgreSQL)."""

    @property
    def root(self) -> Any: ...  # where, for messages

    def current_generation(self) -> str | None: ...

    def exists(self) -> bool: ...

    def read_manifest(self) -> Manifest | None: ...

    def load(self) -> Snapshot: ...

    def writer_lock(self) -> contextlib.AbstractContextManager[None]: ...

    def write(self, manifest: Manifest, nodes: list[TextNode], matrix: np.ndarray) -> str: ...

    def delete_namespace(self) -> None: ...  # forget every generation (a deleted collection)

    def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class IndexSnapshot:
    generation: str
    path: Path
    manifest: Manifest
    store: NumpyVectorStore
    _bm25: Any  # BM25Retriever loaded once; per-request retrievers share its bm25s index

    @property
    def nodes(self) -> list[TextNode]:
        return self.store.nodes

    @property
    def matrix(self) -> np.ndarray:
        return self.store.matrix

    @property
    def filters(self) -> None:
        return None  # the snapshot's own matrix holds only its generation

    def vector_index(self, embed_model: Any) -> VectorStoreIndex:
        return VectorStoreIndex.from_vector_store(self.store, embed_model=embed_model)

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # an in-memory matrix has no outage

    @functools.cached_property
    def _rows(self) -> dict[str, int]:
        return {n.node_id: i for i, n in enumerate(self.nodes)}

    def stored_vectors(self, node_ids: list[str]) -> np.ndarray | None:
        rows = [self._rows.get(n) for n in node_ids]
        if any(r is None for r in rows):
            return None
        return self.matrix[[r for r in rows if r is not None]]

    def bm25_retriever(self, k: int) -> Any:
        from llama_index.retrievers.bm25 import BM25Retriever

        # A fresh retriever per call: BM25Retriever keeps top-k as mutable state, shared here
        # across request threads; the bm25s index itself is read-only at query time.
        return BM25Retriever(existing_bm25=self._bm25.bm25, similarity_top_k=min(k, len(self.nodes)))


class IndexStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def delete_namespace(self) -> None:
        """Remove the index directory (a deleted collection's)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def close(self) -> None:
        """Nothing held: each read opens its files."""

    # -- reading ------------------------------------------------------------------------------

    def current_generation(self) -> str | None:
        try:
            name = (self.root / "CURRENT").read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return name or None

    def exists(self) -> bool:
        gen = self.current_generation()
        return gen is not None and (self.root / gen / "manifest.json").exists()

    def read_manifest(self) -> Manifest | None:
        gen = self.current_generation()
        if gen is None:
            return None
        return Manifest.from_json(json.loads((self.root / gen / "manifest.json").read_text(encoding="utf-8")))

    def load(self) -> IndexSnapshot:
        from llama_index.retrievers.bm25 import BM25Retriever

        gen = self.current_generation()
        if gen is None:
            raise IndexMissing(f"no index at {self.root}: run `ragmend ingest PATH` first")
        path = self.root / gen
        try:
            manifest = Manifest.from_json(json.loads((path / "manifest.json").read_text(encoding="utf-8")))
            nodes = [
                make_node(r["id"], r["doc_id"], title=r["title"], text=r["text"], trust=r.get("trust"))
                for r in map(json.loads, (path / "nodes.jsonl").read_text(encoding="utf-8").splitlines())
            ]
            matrix = np.load(path / "embeddings.npy", allow_pickle=False)
            bm25 = BM25Retriever.from_persist_dir(str(path / "bm25"))
        except (OSError, ValueError, KeyError) as e:
            raise IndexMissing(f"index generation {path} is unreadable ({e}): re-ingest") from e
        store = NumpyVectorStore(nodes=nodes, matrix=matrix)
        return IndexSnapshot(generation=gen, path=path, manifest=manifest, store=store, _bm25=bm25)

    # -- writing ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as e:
                raise InputError(f"another ingest is writing {self.root}; try again when it ends") from e
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def write(self, manifest: Manifest, nodes: list[TextNode], matrix: np.ndarray) -> str:
        """Write a complete new generation and make it current. Call under writer_lock()."""
        from llama_index.retrievers.bm25 import BM25Retriever

        if len(nodes) != matrix.shape[0]:
            raise ValueError("nodes and embeddings differ in length")
        self._remove_stale_builds()
        build = self.root / f".build-{uuid.uuid4().hex}"
        build.mkdir(parents=True)
        try:
            manifest = dataclasses.replace(manifest, created=time.time())
            rows = (
                json.dumps(
                    {
                        "id": n.node_id,
                        "doc_id": n.metadata["doc_id"],
                        "title": n.metadata["title"],
                        "text": n.text,
                    }
                    | ({"trust": n.metadata["trust"]} if "trust" in n.metadata else {}),
                    ensure_ascii=False,
                )
                for n in nodes
            )
            _write_synced(build / "nodes.jsonl", ("\n".join(rows) + "\n").encode("utf-8"))
            with open(build / "embeddings.npy", "wb") as f:
                np.save(f, np.asarray(matrix, dtype=np.float32), allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            (build / "bm25").mkdir()
            corpus: list[BaseNode] = list(nodes)
            BM25Retriever.from_defaults(nodes=corpus, similarity_top_k=1).persist(str(build / "bm25"))
            _fsync_tree(build / "bm25")
            # The manifest last: a generation directory with a manifest is complete.
            _write_synced(build / "manifest.json", json.dumps(manifest.to_json()).encode("utf-8"))
            gen = self._next_generation()
            os.rename(build, self.root / gen)
            _fsync_dir(self.root)
            self._point_current_at(gen)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
        self._collect_garbage(gen)
        return gen

    def _next_generation(self) -> str:
        numbers = [int(p.name[4:]) for p in self.root.glob("gen-*") if p.name[4:].isdigit()]
        return f"gen-{max(numbers, default=0) + 1:06d}"

    def _point_current_at(self, gen: str) -> None:
        tmp = self.root / f".CURRENT.{uuid.uuid4().hex}"
        _write_synced(tmp, (gen + "\n").encode("utf-8"))
        os.replace(tmp, self.root / "CURRENT")
        _fsync_dir(self.root)

    def _remove_stale_builds(self) -> None:
        # Only one writer holds the lock, so any build directory left here belongs to a dead one.
        for p in self.root.glob(".build-*"):
            shutil.rmtree(p, ignore_errors=True)

    def _collect_garbage(self, current: str) -> None:
        gens = sorted(p.name for p in self.root.glob("gen-*"))
        keep = set(gens[-KEEP_GENERATIONS:]) | {current}
        for name in gens:
            if name not in keep:
                shutil.rmtree(self.root / name, ignore_errors=True)


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    for p in path.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(path)
