"""The corpus knowledge graph on disk: triples in SQLite, with one cached embedding per phrase.

Tables:

    meta      schema version, extractor name, embedding name, generation counter
    docs      doc_id -> fingerprint of the text its triples were extracted from
    phrases   one float32 embedding per distinct normalised subject, relation or object string
    triples   one row per triple: doc_id, node (chunk) id, the triple, its three phrase ids

Every sync of up to `commit_texts` texts is one write transaction (BEGIN IMMEDIATE ... COMMIT)
on a WAL database, extraction included: a crash or an exception at any point leaves the previous
state, and readers (alignment in the server) go on reading the previous state while a sync runs.
A larger sync (a first build of a big corpus) commits whole documents every `commit_texts`
texts: a crash keeps what was committed, and the next sync resumes with the rest. A second
writer waits for the first (up to `busy_timeout_s`) and then diffs against its result.
Alignment reads the arrays of a `KGSnapshot`, reloaded only when another commit has bumped the
generation counter, so it never embeds the graph again.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragmend.errors import ConfigError, IndexMissing
from ragmend.kg.phrases import Embed, name_key, number_key, triple_phrases, unit_rows
from ragmend.kg.triples import Triple, TripleExtractor

SCHEMA_VERSION = 1

# doc_id -> (fingerprint, [(node_id, text), ...]): the complete set of documents the graph holds.
Docs = Mapping[str, tuple[str, Sequence[tuple[str, str]]]]

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

_TRIPLE_COLUMNS = (
    "id, doc_id, node_id, subject, relation, object, negated, numbers, sentence, "
    "subject_start, subject_end, object_start, object_end"
)


@dataclass(frozen=True)
class KGTriple:
    """A triple of the graph and where it came from."""

    id: int
    doc_id: str
    node_id: str
    triple: Triple

    def as_dict(self) -> dict[str, object]:
        t = self.triple
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "node_id": self.node_id,
            "subject": t.subject,
            "relation": t.relation,
            "object": t.object,
            "negated": t.negated,
            "numbers": list(t.numbers),
            "sentence": t.sentence,
        }


@dataclass(frozen=True)
class KGStats:
    docs: int
    triples: int
    subjects: int  # distinct normalised subjects
    phrases: int  # distinct phrases with a cached embedding


@dataclass(frozen=True)
class SyncReport:
    added: int
    updated: int
    unchanged: int
    removed: int
    texts_extracted: int
    triples_added: int
    phrases_embedded: int
    seconds: float
    # The extractor or the embedding model changed since the last sync: every document was
    # extracted and every phrase embedded again.
    full: bool = False


@dataclass(frozen=True)
class _SyncPlan:
    old: dict[str, str]  # doc_id -> fingerprint before the sync
    removed: list[str]
    changed: list[str]  # new or changed documents, to extract
    texts: int  # texts the changed documents hold
    full: bool  # the extractor or the embedding model changed


@dataclass(frozen=True)
class KGSnapshot:
    """The graph as arrays, for vectorised alignment: row i of each per-triple array is one triple."""

    generation: int
    ids: np.ndarray  # (n,) int64 triple ids
    subject: np.ndarray  # (n,) row of `vectors` holding the subject's embedding
    relation: np.ndarray  # (n,)
    object: np.ndarray  # (n,)
    negated: np.ndarray  # (n,) bool
    number_keys: tuple[frozenset[str], ...]  # (n,) kg.phrases.number_key of each object
    name_keys: tuple[frozenset[str], ...]  # (n,) kg.phrases.name_key of each object
    vectors: np.ndarray  # (m, d) float32, unit rows, one per phrase

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


class KGStore:
    def __init__(
        self,
        path: Path | str,
        extractor: TripleExtractor,
        embed: Embed,
        *,
        embed_name: str = "",
        batch_texts: int = 64,
        commit_texts: int = 2048,
        busy_timeout_s: float = 600.0,
    ):
        """`embed_name` names the embedding model: phrases cached under another name are re-embedded."""
        self.path = Path(path)
        self.extractor = extractor
        self.embed = embed
        self.embed_name = embed_name
        self.batch_texts = batch_texts
        self.commit_texts = commit_texts
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._snapshot: KGSnapshot | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect()
        try:
            # WAL is a property of the database file: set once, every later connection uses it.
            con.execute("PRAGMA journal_mode=WAL")
            with self._transaction(con):
                # Statement by statement: executescript would COMMIT the open transaction first.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        con.execute(statement)
                version = _meta(con, "schema")
                if version is None:
                    _set_meta(con, "schema", str(SCHEMA_VERSION))
                    _set_meta(con, "generation", "0")
                elif version != str(SCHEMA_VERSION):
                    raise IndexMissing(
                        f"knowledge graph {self.path} has schema {version}, this ragmend reads "
                        f"{SCHEMA_VERSION}: delete it and ingest again"
                    )
        finally:
            con.close()

    # -- connections ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode (isolation_level=None): transactions are the explicit BEGINs below.
        con = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        # FULL: a commit survives a power cut too; syncs are rare, so the extra fsync is free.
        con.execute("PRAGMA synchronous=FULL")
        return con

    @staticmethod
    @contextlib.contextmanager
    def _transaction(con: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
        con.execute(f"BEGIN {mode}")
        try:
            yield
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        con = self._connect()
        try:
            # One read transaction: every SELECT sees the same commit.
            with self._transaction(con, "DEFERRED"):
                yield con
        finally:
            con.close()

    # -- writing --------------------------------------------------------------------------------

    def sync(self, docs: Docs) -> SyncReport:
        """Make the graph hold exactly `docs`: extract new and changed documents, drop removed ones.

        A document whose fingerprint is unchanged is skipped (its texts are not even read), unless
        the extractor has changed since it was extracted. A sync of at most `commit_texts` texts is
        one transaction; a larger one (a first build, a rebuild) commits every `commit_texts` texts,
        so a crash or a kill keeps the documents already written and the next sync extracts only
        the rest. Every commit replaces whole documents: a reader never sees half of one.
        """
        t0 = time.perf_counter()
        con = self._connect()
        try:
            with self._transaction(con):
                plan = self._plan(con, docs)
                if plan.texts <= self.commit_texts:
                    counts = self._replace(con, docs, plan.changed, plan.old)
                    return self._finish(con, docs, plan, t0, counts)
                self._clear(con, plan)
            counts = (0, 0)
            for chunk in _chunks(docs, plan.changed, self.commit_texts):
                with self._transaction(con):
                    # Another writer may have written some of these since the plan: skip them.
                    now = _fingerprints(con, chunk)
                    todo = [d for d in chunk if now.get(d) != docs[d][0]]
                    added = self._replace(con, docs, todo, now)
                    counts = (counts[0] + added[0], counts[1] + added[1])
                    _bump_generation(con)
            with self._transaction(con):
                return self._finish(con, docs, plan, t0, counts)
        finally:
            con.close()

    def _plan(self, con: sqlite3.Connection, docs: Docs) -> _SyncPlan:
        old = dict(con.execute("SELECT doc_id, fingerprint FROM docs").fetchall())
        full_extract = bool(old) and _meta(con, "extractor") != self.extractor.name
        full_embed = _meta(con, "embed_name") not in (None, self.embed_name)
        removed = [d for d in old if d not in docs]
        changed = [d for d, (fp, _) in docs.items() if full_extract or full_embed or old.get(d) != fp]
        for doc_id in removed:
            con.execute("DELETE FROM triples WHERE doc_id = ?", (doc_id,))
            con.execute("DELETE FROM docs WHERE doc_id = ?", (doc_id,))
        if full_embed:
            # Another embedding model made the cached vectors: they are worthless to alignment.
            con.execute("DELETE FROM triples")
            con.execute("DELETE FROM phrases")
            con.execute("DELETE FROM docs")
        return _SyncPlan(
            old=old,
            removed=removed,
            changed=changed,
            texts=sum(len(docs[d][1]) for d in changed),
            full=full_extract or full_embed,
        )

    def _clear(self, con: sqlite3.Connection, plan: _SyncPlan) -> None:
        """Before a sync that commits in chunks: make what is committed resumable."""
        if plan.full:
            # The extractor changed: its name is written now, so the old graph must go now, or a
            # resumed sync would take the old documents for current ones.
            con.execute("DELETE FROM triples")
            con.execute("DELETE FROM docs")
        _set_meta(con, "extractor", self.extractor.name)
        _set_meta(con, "embed_name", self.embed_name)
        _bump_generation(con)

    def _replace(
        self, con: sqlite3.Connection, docs: Docs, doc_ids: Sequence[str], old: Mapping[str, str]
    ) -> tuple[int, int]:
        """Extract `doc_ids` and replace what the graph held of them: (triples, phrases) added."""
        for doc_id in doc_ids:
            if doc_id in old:
                con.execute("DELETE FROM triples WHERE doc_id = ?", (doc_id,))
                con.execute("DELETE FROM docs WHERE doc_id = ?", (doc_id,))
        phrase_ids: dict[str, int] = dict(con.execute("SELECT text, id FROM phrases").fetchall())
        pending = [(d, node_id, text) for d in doc_ids for node_id, text in docs[d][1]]
        triples_added = phrases_embedded = 0
        for b in range(0, len(pending), self.batch_texts):
            batch = pending[b : b + self.batch_texts]
            extracted = self.extractor.extract([text for _, _, text in batch])
            if len(extracted) != len(batch):
                raise ValueError(
                    f"extractor {self.extractor.name} returned {len(extracted)} lists for {len(batch)} texts"
                )
            rows = [
                (doc_id, node_id, t)
                for (doc_id, node_id, _), triples in zip(batch, extracted, strict=True)
                for t in triples
                if all(triple_phrases(t))
            ]
            phrases_embedded += self._add_phrases(con, phrase_ids, rows)
            con.executemany(
                "INSERT INTO triples (doc_id, node_id, subject, relation, object, negated, numbers, "
                "sentence, subject_start, subject_end, object_start, object_end, subject_id, "
                "relation_id, object_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_row(doc_id, node_id, t, phrase_ids) for doc_id, node_id, t in rows],
            )
            triples_added += len(rows)
        con.executemany(
            "INSERT INTO docs (doc_id, fingerprint) VALUES (?, ?)", [(d, docs[d][0]) for d in doc_ids]
        )
        return triples_added, phrases_embedded

    def _finish(
        self,
        con: sqlite3.Connection,
        docs: Docs,
        plan: _SyncPlan,
        t0: float,
        counts: tuple[int, int],
    ) -> SyncReport:
        triples_added, phrases_embedded = counts
        # Phrases no triple uses any more would only grow the matrix alignment scans.
        con.execute(
            "DELETE FROM phrases WHERE id NOT IN (SELECT subject_id FROM triples UNION "
            "SELECT relation_id FROM triples UNION SELECT object_id FROM triples)"
        )
        _set_meta(con, "extractor", self.extractor.name)
        _set_meta(con, "embed_name", self.embed_name)
        _bump_generation(con)
        return SyncReport(
            added=sum(1 for d in plan.changed if d not in plan.old),
            updated=sum(1 for d in plan.changed if d in plan.old),
            unchanged=len(docs) - len(plan.changed),
            removed=len(plan.removed),
            texts_extracted=plan.texts,
            triples_added=triples_added,
            phrases_embedded=phrases_embedded,
            seconds=time.perf_counter() - t0,
            full=plan.full,
        )

    def _add_phrases(
        self, con: sqlite3.Connection, phrase_ids: dict[str, int], rows: list[tuple[str, str, Triple]]
    ) -> int:
        new = sorted({p for _, _, t in rows for p in triple_phrases(t)} - phrase_ids.keys())
        if not new:
            return 0
        vectors = unit_rows(self.embed(new))
        if vectors.shape[0] != len(new):
            raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(new)} phrases")
        dim = _meta(con, "dim")
        if dim is not None and int(dim) != vectors.shape[1] and phrase_ids:
            raise ConfigError(
                f"the knowledge graph {self.path} holds {dim}-d phrase embeddings, the embed function "
                f"gives {vectors.shape[1]}-d: pass embed_name so the store re-embeds, or delete it"
            )
        _set_meta(con, "dim", str(vectors.shape[1]))
        for text, vec in zip(new, vectors, strict=True):
            cur = con.execute("INSERT INTO phrases (text, vec) VALUES (?, ?)", (text, vec.tobytes()))
            phrase_ids[text] = int(cur.lastrowid or 0)
        return len(new)

    # -- reading --------------------------------------------------------------------------------

    def snapshot(self) -> KGSnapshot:
        """The graph's arrays; cached until another sync commits."""
        with self._reading() as con:
            generation = int(_meta(con, "generation") or 0)
            stored_embed = _meta(con, "embed_name")
            if stored_embed not in (None, self.embed_name):
                raise ConfigError(
                    f"the knowledge graph {self.path} was embedded with '{stored_embed}', not "
                    f"'{self.embed_name}': ingest again to rebuild it"
                )
            with self._lock:
                if self._snapshot is not None and self._snapshot.generation == generation:
                    return self._snapshot
            snap = _load_snapshot(con, generation)
        with self._lock:
            self._snapshot = snap
        return snap

    def fetch(self, ids: Sequence[int]) -> dict[int, KGTriple]:
        """The triples with these ids (ids a later sync removed are absent)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_TRIPLE_COLUMNS} FROM triples WHERE id IN ({marks})", [int(i) for i in ids]
            ).fetchall()
        return {r[0]: _kg_triple(r) for r in rows}

    def triples(self, doc_id: str | None = None) -> list[KGTriple]:
        """Every triple (of one document), in insertion order: for inspection and tests."""
        query = f"SELECT {_TRIPLE_COLUMNS} FROM triples"
        args: tuple[str, ...] = ()
        if doc_id is not None:
            query, args = query + " WHERE doc_id = ?", (doc_id,)
        with self._reading() as con:
            return [_kg_triple(r) for r in con.execute(query + " ORDER BY id", args).fetchall()]

    def fingerprints(self) -> dict[str, str]:
        with self._reading() as con:
            return dict(con.execute("SELECT doc_id, fingerprint FROM docs").fetchall())

    def stats(self) -> KGStats:
        with self._reading() as con:
            docs, triples, subjects = con.execute(
                "SELECT (SELECT COUNT(*) FROM docs), COUNT(*), COUNT(DISTINCT subject_id) FROM triples"
            ).fetchone()
            (phrases,) = con.execute("SELECT COUNT(*) FROM phrases").fetchone()
        return KGStats(docs=docs, triples=triples, subjects=subjects, phrases=phrases)


def _chunks(docs: Docs, doc_ids: Sequence[str], texts: int) -> Iterator[list[str]]:
    """Whole documents, about `texts` texts a chunk (a document larger than that is one chunk)."""
    chunk: list[str] = []
    size = 0
    for doc_id in doc_ids:
        chunk.append(doc_id)
        size += len(docs[doc_id][1])
        if size >= texts:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _fingerprints(con: sqlite3.Connection, doc_ids: Sequence[str]) -> dict[str, str]:
    marks = ",".join("?" * len(doc_ids))
    rows = con.execute(f"SELECT doc_id, fingerprint FROM docs WHERE doc_id IN ({marks})", list(doc_ids))
    return dict(rows.fetchall())


def _bump_generation(con: sqlite3.Connection) -> None:
    # Readers reload their snapshot when the counter moves.
    _set_meta(con, "generation", str(int(_meta(con, "generation") or 0) + 1))


def _row(doc_id: str, node_id: str, t: Triple, phrase_ids: dict[str, int]) -> tuple[object, ...]:
    s, r, o = triple_phrases(t)
    return (
        doc_id,
        node_id,
        t.subject,
        t.relation,
        t.object,
        int(t.negated),
        json.dumps(list(t.numbers)),
        t.sentence,
        *t.subject_span,
        *t.object_span,
        phrase_ids[s],
        phrase_ids[r],
        phrase_ids[o],
    )


def _kg_triple(r: tuple) -> KGTriple:
    (tid, doc_id, node_id, subj, rel, obj, neg, numbers, sentence, ss, se, os_, oe) = r
    triple = Triple(
        subject=subj,
        relation=rel,
        object=obj,
        negated=bool(neg),
        numbers=tuple(json.loads(numbers)),
        sentence=sentence,
        source=node_id,
        subject_span=(ss, se),
        object_span=(os_, oe),
    )
    return KGTriple(id=tid, doc_id=doc_id, node_id=node_id, triple=triple)


def _load_snapshot(con: sqlite3.Connection, generation: int) -> KGSnapshot:
    phrases = con.execute("SELECT id, vec FROM phrases ORDER BY id").fetchall()
    rows = con.execute(
        "SELECT id, subject_id, relation_id, object_id, negated, numbers, object FROM triples ORDER BY id"
    ).fetchall()
    phrase_ids = np.array([p[0] for p in phrases], dtype=np.int64)
    dim = int(_meta(con, "dim") or 0)
    vectors = (
        np.frombuffer(b"".join(p[1] for p in phrases), dtype=np.float32).reshape(len(phrases), dim)
        if phrases
        else np.zeros((0, dim), dtype=np.float32)
    )
    cols = np.array([r[:5] for r in rows], dtype=np.int64).reshape(len(rows), 5)
    # Phrase ids are sorted, so a phrase's row in `vectors` is where its id sorts.
    snap = KGSnapshot(
        generation=generation,
        ids=cols[:, 0],
        subject=np.searchsorted(phrase_ids, cols[:, 1]),
        relation=np.searchsorted(phrase_ids, cols[:, 2]),
        object=np.searchsorted(phrase_ids, cols[:, 3]),
        negated=cols[:, 4].astype(bool),
        number_keys=tuple(number_key(json.loads(r[5])) for r in rows),
        name_keys=tuple(name_key(r[6]) for r in rows),
        vectors=vectors,
    )
    for a in (snap.ids, snap.subject, snap.relation, snap.object, snap.negated, snap.vectors):
        a.setflags(write=False)
    return snap


def _meta(con: sqlite3.Connection, key: str) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(con: sqlite3.Connection, key: str, value: str) -> None:
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
