"""The index in PostgreSQL (`store.kind: postgres`), shared by every replica.

Chunks and their dense vectors live in pgvector through llama-index's PGVectorStore (one table per
namespace, `data_ragmend_chunks_<namespace>`, with its full-text column), each row tagged with
the generation that wrote it; which generations exist and which one is current live in
ragmend's own tables (ragmend/pg.py, migration 2). The promises of the file index hold:

- a writer adds a complete new generation's rows, then makes it current in ONE transaction: a
  failed or killed ingest leaves what readers see unchanged (its rows belong to no committed
  generation and are removed by the next writer);
- readers query with their snapshot's generation as a filter: requests in flight finish on the
  generation they started on; the last KEEP_GENERATIONS stay;
- one writer at a time per namespace (an advisory lock, released if the writer dies).

Dense retrieval runs in the database (`embedding <=> q`). Keyword retrieval keeps BM25, built in
each replica from its generation's texts as read from the database (the same scores as the file
index); PGVectorStore's full-text column is there for a database-side keyword search.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from ragmend import pg
from ragmend.errors import IndexMissing, InputError
from ragmend.rag.store import KEEP_GENERATIONS, Manifest, make_node

BATCH = 256  # rows per INSERT round trip


def table_name(namespace: str) -> str:
    """PGVectorStore's table name for a namespace (it prefixes "data_")."""
    if not re.fullmatch(r"[a-z0-9_]{1,40}", namespace):
        raise InputError(f"namespace {namespace!r}: use 1-40 lower-case letters, digits or _")
    return f"ragmend_chunks_{namespace}"


def _generation_name(n: int) -> str:
    return f"gen-{n:06d}"


def _generation_number(name: str) -> int:
    return int(name.removeprefix("gen-"))


@dataclass(frozen=True, kw_only=True)
class PgSnapshot:
    """One generation of a PostgreSQL index (the file index's IndexSnapshot, same questions)."""

    generation: str
    manifest: Manifest
    store: Any  # PGVectorStore
    nodes: list[TextNode]
    _index: PgIndexStore = field(repr=False)

    @property
    def filters(self) -> MetadataFilters:
        """What keeps a reader on its generation."""
        return MetadataFilters(
            filters=[MetadataFilter(key="generation", value=_generation_number(self.generation))]
        )

    @property
    def path(self) -> str:
        return f"{self._index.location}#{self.generation}"

    @cached_property
    def matrix(self) -> np.ndarray:
        """The generation's vectors in node order, read when asked (an incremental ingest)."""
        return self._index.vectors(self.generation, [n.node_id for n in self.nodes])

    def vector_index(self, embed_model: Any) -> VectorStoreIndex:
        return VectorStoreIndex.from_vector_store(self.store, embed_model=embed_model)

    def reading(self) -> contextlib.AbstractContextManager[None]:
        return pg.sqlalchemy_unavailable(self._index.dsn)

    def stored_vectors(self, node_ids: list[str]) -> np.ndarray | None:
        """One query for just these nodes (the diagnosis' passages), not the generation's matrix."""
        found = self._index.vectors(self.generation, node_ids, only=True)
        return found if len(found) == len(node_ids) else None

    @cached_property
    def _bm25(self) -> Any:
        from llama_index.retrievers.bm25 import BM25Retriever

        corpus: list[BaseNode] = list(self.nodes)
        built = BM25Retriever.from_defaults(nodes=corpus, similarity_top_k=1)
        # Per-request retrievers share the bm25s index and read the corpus from it, as the file
        # index's persisted one carries it.
        built.bm25.corpus = built.corpus
        return built

    def bm25_retriever(self, k: int) -> Any:
        from llama_index.retrievers.bm25 import BM25Retriever

        return BM25Retriever(existing_bm25=self._bm25.bm25, similarity_top_k=min(k, len(self.nodes)))


class PgIndexStore:
    """IndexStore's interface over PostgreSQL (rag/store.py has the file one)."""

    def __init__(self, dsn: str, namespace: str = "default", *, timeout_s: float = 10.0):
        self.dsn = dsn
        self.namespace = namespace
        self.table = table_name(namespace)
        self.timeout_s = timeout_s
        self._db = pg.ProcessConnection(dsn, timeout_s)
        self._stores: dict[int, Any] = {}

    @property
    def location(self) -> str:
        return f"{pg.describe(self.dsn)} ({self.namespace})"

    root = location  # what logs print for the file index's directory

    def _connection(self) -> contextlib.AbstractContextManager[Any]:
        return self._db.use()

    def vector_store(self, dim: int) -> Any:
        """PGVectorStore for this namespace's table (created on first use, with its text column)."""
        if dim not in self._stores:
            from llama_index.vector_stores.postgres import PGVectorStore

            self._stores[dim] = PGVectorStore.from_params(
                connection_string=_sqlalchemy_url(self.dsn, "psycopg2"),
                async_connection_string=_sqlalchemy_url(self.dsn, "asyncpg"),
                table_name=self.table,
                embed_dim=dim,
                hybrid_search=True,
                text_search_config="english",
                use_jsonb=True,
                # A pooled connection is checked before use: after a PostgreSQL restart or
                # failover the pool's old connections are dead, and a query on one would fail.
                create_engine_kwargs={"pool_pre_ping": True},
            )
        return self._stores[dim]

    # -- reading ------------------------------------------------------------------------------

    def current_generation(self) -> str | None:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT generation FROM ragmend_index_current WHERE namespace = %s", (self.namespace,)
            ).fetchone()
        return None if row is None else _generation_name(int(row[0]))

    def exists(self) -> bool:
        return self.current_generation() is not None

    def read_manifest(self) -> Manifest | None:
        gen = self.current_generation()
        return None if gen is None else self._manifest(gen)

    def _manifest(self, gen: str) -> Manifest:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT manifest FROM ragmend_index_generations WHERE namespace = %s AND generation = %s",
                (self.namespace, _generation_number(gen)),
            ).fetchone()
        if row is None:
            raise IndexMissing(f"index generation {gen} of {self.location} is gone: reload")
        return Manifest.from_json(row[0] if isinstance(row[0], dict) else json.loads(row[0]))

    def load(self) -> PgSnapshot:
        gen = self.current_generation()
        if gen is None:
            raise IndexMissing(f"no index in {self.location}: run `ragmend ingest PATH` first")
        manifest = self._manifest(gen)
        store = self.vector_store(manifest.dim)
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT node_id, text, metadata_ FROM data_{self.table} "
                "WHERE (metadata_->>'generation')::int = %s ORDER BY id",
                (_generation_number(gen),),
            ).fetchall()
        nodes = [
            make_node(nid, meta["doc_id"], title=meta["title"], text=text, trust=meta.get("trust"))
            for nid, text, meta in rows
        ]
        return PgSnapshot(generation=gen, manifest=manifest, store=store, nodes=nodes, _index=self)

    def vectors(self, gen: str, node_ids: list[str], only: bool = False) -> np.ndarray:
        """The generation's vectors of `node_ids`, in order. `only`: read just those rows, and
        leave out any the generation lacks (the caller compares lengths); else read the whole
        generation (an ingest wants most of it) and every id must be there."""
        query = (
            f"SELECT node_id, embedding::text FROM data_{self.table} "
            "WHERE (metadata_->>'generation')::int = %s"
        )
        params: tuple[Any, ...] = (_generation_number(gen),)
        if only:
            query, params = query + " AND node_id = ANY(%s)", (*params, list(node_ids))
        with self._connection() as conn:
            rows = conn.execute(query, params).fetchall()
        by_id = {nid: np.asarray(json.loads(v), dtype=np.float32) for nid, v in rows}
        wanted = [n for n in node_ids if n in by_id] if only else node_ids
        return np.stack([by_id[n] for n in wanted]) if wanted else np.zeros((0, 0), np.float32)

    # -- writing ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """One writer per namespace: a session advisory lock on a connection of its own (the
        database releases it when the writer's connection dies)."""
        conn = pg.connect(self.dsn, self.timeout_s)
        try:
            got = conn.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s))", (f"ragmend-index:{self.namespace}",)
            ).fetchone()
            if not got or not got[0]:
                raise InputError(f"another ingest is writing {self.location}; try again when it ends")
            yield
        finally:
            conn.close()

    def write(self, manifest: Manifest, nodes: list[TextNode], matrix: np.ndarray) -> str:
        """Add a complete new generation, then make it current in one transaction. Call under
        writer_lock()."""
        if len(nodes) != matrix.shape[0]:
            raise ValueError("nodes and embeddings differ in length")
        store = self.vector_store(manifest.dim)
        with self._connection() as conn:
            row = conn.execute(
                "SELECT coalesce(max(generation), 0) FROM ragmend_index_generations WHERE namespace = %s",
                (self.namespace,),
            ).fetchone()
        number = int(row[0]) + 1 if row else 1
        self._drop_rows(f"(metadata_->>'generation')::int >= {number}")  # a dead writer's rows
        vectors = np.asarray(matrix, dtype=np.float32)
        # The database restarting mid-write is a 503 to retry; the next write drops these rows.
        with pg.sqlalchemy_unavailable(self.dsn):
            self._add_rows(store, number, nodes, vectors)
        body = json.dumps(manifest.to_json())
        with self._connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO ragmend_index_generations (namespace, generation, manifest) VALUES (%s, %s, %s)",
                (self.namespace, number, body),
            )
            conn.execute(
                "INSERT INTO ragmend_index_current VALUES (%s, %s) "
                "ON CONFLICT (namespace) DO UPDATE SET generation = EXCLUDED.generation",
                (self.namespace, number),
            )
        self._collect_garbage(number)
        return _generation_name(number)

    @staticmethod
    def _add_rows(store: Any, number: int, nodes: list[TextNode], vectors: np.ndarray) -> None:
        """The generation's rows, in batches, each node a copy tagged with its generation (the
        caller's nodes, the snapshot's, stay as they are)."""
        for start in range(0, len(nodes), BATCH):
            batch = []
            for node, vec in zip(nodes[start : start + BATCH], vectors[start : start + BATCH], strict=True):
                meta = node.metadata
                copy = make_node(
                    node.node_id, meta["doc_id"], title=meta["title"], text=node.text, trust=meta.get("trust")
                )
                copy.metadata["generation"] = number
                copy.embedding = vec.tolist()
                batch.append(copy)
            store.add(batch)

    def _collect_garbage(self, current: int) -> None:
        keep_from = current - KEEP_GENERATIONS + 1
        with self._connection() as conn:
            conn.execute(
                "DELETE FROM ragmend_index_generations WHERE namespace = %s AND generation < %s",
                (self.namespace, keep_from),
            )
        self._drop_rows(f"(metadata_->>'generation')::int < {int(keep_from)}")

    def _drop_rows(self, where: str) -> None:
        with self._connection() as conn:
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"data_{self.table}",)).fetchone()
            if exists and exists[0]:
                conn.execute(f"DELETE FROM data_{self.table} WHERE {where}")

    def delete_namespace(self) -> None:
        """Forget this namespace's index (a deleted collection)."""
        with self._connection() as conn, conn.transaction():
            conn.execute("DELETE FROM ragmend_index_current WHERE namespace = %s", (self.namespace,))
            conn.execute("DELETE FROM ragmend_index_generations WHERE namespace = %s", (self.namespace,))
            conn.execute(f"DROP TABLE IF EXISTS data_{self.table}")

    def close(self) -> None:
        self._db.close()


def _sqlalchemy_url(dsn: str, driver: str) -> str:
    """A libpq URL as SQLAlchemy names it for a driver (postgresql+psycopg2://...)."""
    scheme, sep, rest = dsn.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise InputError(f"store.dsn must be a postgresql:// URL for the index, got {pg.describe(dsn)}")
    return f"postgresql+{driver}://{rest}"
