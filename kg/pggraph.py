"""The knowledge graph in PostgreSQL (`store.kind: postgres`), shared by every replica.

The tables are SQLite's (kg/graphdb.py) with a namespace column (one graph per collection), made
by `ragmend db migrate` (ragmend/pg.py, migration 3). KGStore's rules are unchanged: a sync of up
to `commit_texts` texts is one transaction; one writer per namespace at a time (an advisory
transaction lock: a second replica syncing the same index generation waits, then finds every
fingerprint current and writes nothing); readers see one commit (REPEATABLE READ) and reload
their arrays only when the generation counter moved.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ragmend import pg
from ragmend.kg.graphdb import INSERT_COLUMNS, SNAPSHOT_COLUMNS, TRIPLE_COLUMNS, GraphTx


class PgGraph:
    """One namespace's graph; reads share one connection per process, each sync opens its own."""

    def __init__(self, dsn: str, namespace: str = "default", *, timeout_s: float = 10.0):
        self.dsn = dsn
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._db = pg.ProcessConnection(dsn, timeout_s)

    @property
    def location(self) -> str:
        return f"{pg.describe(self.dsn)}#kg:{self.namespace}"

    @contextlib.contextmanager
    def writing(self) -> Iterator[GraphTx]:
        box: list[Any] = [None]
        with pg.reconnecting(box, self.dsn, self.timeout_s) as conn:
            try:
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"ragmend-kg:{self.namespace}",)
                    )
                    yield _PgTx(conn, self.namespace)
            finally:
                conn.close()

    @contextlib.contextmanager
    def reading(self) -> Iterator[GraphTx]:
        with self._db.use() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield _PgTx(conn, self.namespace)

    def delete_namespace(self) -> None:
        """Drop this namespace's graph (a deleted collection)."""
        with self.writing() as tx:
            assert isinstance(tx, _PgTx)
            tx.drop()

    def close(self) -> None:
        self._db.close()


class _PgTx:
    def __init__(self, conn: Any, namespace: str):
        self.conn = conn
        self.ns = namespace

    def _all(self, sql: str, *args: object) -> list[tuple]:
        return list(self.conn.execute(sql, (self.ns, *args)).fetchall())

    def get_meta(self, key: str) -> str | None:
        rows = self._all("SELECT value FROM ragmend_kg_meta WHERE namespace = %s AND key = %s", key)
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO ragmend_kg_meta VALUES (%s, %s, %s) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value",
            (self.ns, key, value),
        )

    def fingerprints(self, doc_ids: Sequence[str] | None = None) -> dict[str, str]:
        sql = "SELECT doc_id, fingerprint FROM ragmend_kg_docs WHERE namespace = %s"
        if doc_ids is None:
            return dict(self._all(sql))
        return dict(self._all(sql + " AND doc_id = ANY(%s)", list(doc_ids)))

    def delete_docs(self, doc_ids: Sequence[str]) -> None:
        for table in ("ragmend_kg_triples", "ragmend_kg_docs"):
            self.conn.execute(
                f"DELETE FROM {table} WHERE namespace = %s AND doc_id = ANY(%s)", (self.ns, list(doc_ids))
            )

    def clear(self, phrases: bool) -> None:
        tables = ["ragmend_kg_triples", "ragmend_kg_docs"] + (["ragmend_kg_phrases"] if phrases else [])
        for table in tables:
            self.conn.execute(f"DELETE FROM {table} WHERE namespace = %s", (self.ns,))

    def drop(self) -> None:
        self.clear(phrases=True)
        self.conn.execute("DELETE FROM ragmend_kg_meta WHERE namespace = %s", (self.ns,))

    def phrase_ids(self) -> dict[str, int]:
        return dict(self._all("SELECT text, id FROM ragmend_kg_phrases WHERE namespace = %s"))

    def add_phrases(self, texts: Sequence[str], vectors: np.ndarray) -> dict[str, int]:
        # One round trip for the batch; RETURNING names each row's text (its order is not promised).
        rows = self._all(
            "INSERT INTO ragmend_kg_phrases (namespace, text, vec) "
            "SELECT %s, t, v FROM unnest(%s::text[], %s::bytea[]) AS x(t, v) RETURNING text, id",
            list(texts),
            [v.tobytes() for v in vectors],
        )
        return {str(t): int(i) for t, i in rows}

    def add_triples(self, rows: Sequence[tuple[object, ...]]) -> None:
        marks = ", ".join(["%s"] * 16)
        with self.conn.cursor() as cur:
            # psycopg sends executemany's rows in one pipeline, not one round trip each.
            cur.executemany(
                f"INSERT INTO ragmend_kg_triples (namespace, {INSERT_COLUMNS}) VALUES ({marks})",
                [(self.ns, *r) for r in rows],
            )

    def add_docs(self, docs: Sequence[tuple[str, str]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO ragmend_kg_docs (namespace, doc_id, fingerprint) VALUES (%s, %s, %s)",
                [(self.ns, d, fp) for d, fp in docs],
            )

    def prune_phrases(self) -> None:
        self.conn.execute(
            "DELETE FROM ragmend_kg_phrases p WHERE p.namespace = %s AND NOT EXISTS ("
            "SELECT 1 FROM ragmend_kg_triples t WHERE t.namespace = p.namespace AND "
            "p.id IN (t.subject_id, t.relation_id, t.object_id))",
            (self.ns,),
        )

    def phrase_vectors(self) -> list[tuple[int, bytes]]:
        rows = self._all("SELECT id, vec FROM ragmend_kg_phrases WHERE namespace = %s ORDER BY id")
        return [(int(i), bytes(v)) for i, v in rows]

    def snapshot_rows(self) -> list[tuple]:
        return self._all(
            f"SELECT {SNAPSHOT_COLUMNS} FROM ragmend_kg_triples WHERE namespace = %s ORDER BY id"
        )

    def select_triples(self, ids: Sequence[int] | None = None, doc_id: str | None = None) -> list[tuple]:
        sql = f"SELECT {TRIPLE_COLUMNS} FROM ragmend_kg_triples WHERE namespace = %s"
        if ids is not None:
            return self._all(sql + " AND id = ANY(%s) ORDER BY id", [int(i) for i in ids])
        if doc_id is not None:
            return self._all(sql + " AND doc_id = %s ORDER BY id", doc_id)
        return self._all(sql + " ORDER BY id")

    def counts(self) -> tuple[int, int, int, int]:
        rows = self.conn.execute(
            "SELECT (SELECT COUNT(*) FROM ragmend_kg_docs WHERE namespace = %(ns)s), COUNT(*), "
            "COUNT(DISTINCT subject_id), (SELECT COUNT(*) FROM ragmend_kg_phrases WHERE namespace = %(ns)s) "
            "FROM ragmend_kg_triples WHERE namespace = %(ns)s",
            {"ns": self.ns},
        ).fetchall()
        docs, triples, subjects, phrases = rows[0]
        return int(docs), int(triples), int(subjects), int(phrases)
