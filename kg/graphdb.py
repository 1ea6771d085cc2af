"""Where the knowledge graph's tables live: the transaction interface KGStore's sync and reads are
written against (kg/store.py holds the rules), and its SQLite implementation (the embedded default,
one file beside the index). rag-free: kg/pggraph.py is the PostgreSQL one replicas share.

A `writing()` transaction is the only writer of its graph while it is open (SQLite: BEGIN
IMMEDIATE; PostgreSQL: an advisory transaction lock per namespace), so a second writer waits for
the first and then diffs against its result. A `reading()` transaction sees one commit throughout.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

# id, doc_id, node_id, subject, relation, object, negated, numbers, sentence, spans: one triple.
TRIPLE_COLUMNS = (
    "id, doc_id, node_id, subject, relation, object, negated, numbers, sentence, "
    "subject_start, subject_end, object_start, object_end"
)
# What an inserted triple row holds: TRIPLE_COLUMNS less the id, plus its three phrase ids.
INSERT_COLUMNS = (
    "doc_id, node_id, subject, relation, object, negated, numbers, sentence, subject_start, "
    "subject_end, object_start, object_end, subject_id, relation_id, object_id"
)
# What a snapshot reads of each triple: its id, its phrase ids, negation, numbers and object.
SNAPSHOT_COLUMNS = "id, subject_id, relation_id, object_id, negated, numbers, object"


class GraphTx(Protocol):
    """One open transaction on a graph's tables."""

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def fingerprints(self, doc_ids: Sequence[str] | None = None) -> dict[str, str]: ...
    def delete_docs(self, doc_ids: Sequence[str]) -> None: ...
    def clear(self, phrases: bool) -> None: ...
    def phrase_ids(self) -> dict[str, int]: ...
    def add_phrases(self, texts: Sequence[str], vectors: np.ndarray) -> dict[str, int]: ...
    def add_triples(self, rows: Sequence[tuple[object, ...]]) -> None: ...
    def add_docs(self, docs: Sequence[tuple[str, str]]) -> None: ...
    def prune_phrases(self) -> None: ...
    def phrase_vectors(self) -> list[tuple[int, bytes]]: ...
    def snapshot_rows(self) -> list[tuple]: ...
    def select_triples(self, ids: Sequence[int] | None = None, doc_id: str | None = None) -> list[tuple]: ...
    def counts(self) -> tuple[int, int, int, int]: ...


class GraphDatabase(Protocol):
    @property
    def location(self) -> str: ...

    def writing(self) -> contextlib.AbstractContextManager[GraphTx]: ...
    def reading(self) -> contextlib.AbstractContextManager[GraphTx]: ...
    def delete_namespace(self) -> None: ...  # drop this graph (a deleted collection's)
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (doc_id TEXT PRIMARY KEY, fingerprint TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phrases (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS triples (
    id INTEGER PRIMARY KEY,
    doc_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    relation TEXT NOT NULL,
    object TEXT NOT NULL,
    negated INTEGER NOT NULL,
    numbers TEXT NOT NULL,
    sentence TEXT NOT NULL,
    subject_start INTEGER NOT NULL,
    subject_end INTEGER NOT NULL,
    object_start INTEGER NOT NULL,
    object_end INTEGER NOT NULL,
    subject_id INTEGER NOT NULL,
    relation_id INTEGER NOT NULL,
    object_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS triples_by_doc ON triples (doc_id);
"""


class SqliteGraph:
    """The graph in one SQLite file (WAL: readers go on reading the last commit during a sync)."""

    def __init__(self, path: Path | str, busy_timeout_s: float = 600.0):
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect()
        try:
            # WAL is a property of the database file: set once, every later connection uses it.
            con.execute("PRAGMA journal_mode=WAL")
            with _transaction(con, "IMMEDIATE"):
                # Statement by statement: executescript would COMMIT the open transaction first.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        con.execute(statement)
        finally:
            con.close()

    @property
    def location(self) -> str:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode (isolation_level=None): transactions are the explicit BEGINs below.
        con = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        # FULL: a commit survives a power cut too; syncs are rare, so the extra fsync is free.
        con.execute("PRAGMA synchronous=FULL")
        return con

    @contextlib.contextmanager
    def _open(self, mode: str) -> Iterator[GraphTx]:
        con = self._connect()
        try:
            with _transaction(con, mode):
                yield _SqliteTx(con)
        finally:
            con.close()

    def writing(self) -> contextlib.AbstractContextManager[GraphTx]:
        return self._open("IMMEDIATE")

    def reading(self) -> contextlib.AbstractContextManager[GraphTx]:
        return self._open("DEFERRED")

    def delete_namespace(self) -> None:
        """Delete the database file (and its WAL)."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        """Nothing held: each transaction opens and closes its own connection."""


@contextlib.contextmanager
def _transaction(con: sqlite3.Connection, mode: str) -> Iterator[None]:
    con.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


class _SqliteTx:
    def __init__(self, con: sqlite3.Connection):
        self.con = con

    def get_meta(self, key: str) -> str | None:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def fingerprints(self, doc_ids: Sequence[str] | None = None) -> dict[str, str]:
        if doc_ids is None:
            return dict(self.con.execute("SELECT doc_id, fingerprint FROM docs").fetchall())
        marks = ",".join("?" * len(doc_ids))
        rows = self.con.execute(
            f"SELECT doc_id, fingerprint FROM docs WHERE doc_id IN ({marks})", list(doc_ids)
        )
        return dict(rows.fetchall())

    def delete_docs(self, doc_ids: Sequence[str]) -> None:
        self.con.executemany("DELETE FROM triples WHERE doc_id = ?", [(d,) for d in doc_ids])
        self.con.executemany("DELETE FROM docs WHERE doc_id = ?", [(d,) for d in doc_ids])

    def clear(self, phrases: bool) -> None:
        self.con.execute("DELETE FROM triples")
        self.con.execute("DELETE FROM docs")
        if phrases:
            self.con.execute("DELETE FROM phrases")

    def phrase_ids(self) -> dict[str, int]:
        return dict(self.con.execute("SELECT text, id FROM phrases").fetchall())

    def add_phrases(self, texts: Sequence[str], vectors: np.ndarray) -> dict[str, int]:
        ids = {}
        for text, vec in zip(texts, vectors, strict=True):
            cur = self.con.execute("INSERT INTO phrases (text, vec) VALUES (?, ?)", (text, vec.tobytes()))
            ids[text] = int(cur.lastrowid or 0)
        return ids

    def add_triples(self, rows: Sequence[tuple[object, ...]]) -> None:
        marks = ", ".join("?" * 15)
        self.con.executemany(f"INSERT INTO triples ({INSERT_COLUMNS}) VALUES ({marks})", rows)

    def add_docs(self, docs: Sequence[tuple[str, str]]) -> None:
        self.con.executemany("INSERT INTO docs (doc_id, fingerprint) VALUES (?, ?)", docs)

    def prune_phrases(self) -> None:
        self.con.execute(
            "DELETE FROM phrases WHERE id NOT IN (SELECT subject_id FROM triples UNION "
            "SELECT relation_id FROM triples UNION SELECT object_id FROM triples)"
        )

    def phrase_vectors(self) -> list[tuple[int, bytes]]:
        return self.con.execute("SELECT id, vec FROM phrases ORDER BY id").fetchall()

    def snapshot_rows(self) -> list[tuple]:
        return self.con.execute(f"SELECT {SNAPSHOT_COLUMNS} FROM triples ORDER BY id").fetchall()

    def select_triples(self, ids: Sequence[int] | None = None, doc_id: str | None = None) -> list[tuple]:
        query, args = f"SELECT {TRIPLE_COLUMNS} FROM triples", list[object]()
        if ids is not None:
            query += f" WHERE id IN ({','.join('?' * len(ids))})"
            args = [int(i) for i in ids]
        elif doc_id is not None:
            query, args = query + " WHERE doc_id = ?", [doc_id]
        return self.con.execute(query + " ORDER BY id", args).fetchall()

    def counts(self) -> tuple[int, int, int, int]:
        docs, triples, subjects = self.con.execute(
            "SELECT (SELECT COUNT(*) FROM docs), COUNT(*), COUNT(DISTINCT subject_id) FROM triples"
        ).fetchone()
        (phrases,) = self.con.execute("SELECT COUNT(*) FROM phrases").fetchone()
        return docs, triples, subjects, phrases
