"""The corpus knowledge graph: triples with one cached embedding per phrase, kept in step with
the index. The rules live here; the tables in a GraphDatabase (kg/graphdb.py: SQLite, the
embedded default; kg/pggraph.py: PostgreSQL, shared by replicas).

Tables:

    meta      schema version, extractor name, embedding name, generation counter
    docs      doc_id -> fingerprint of the text its triples were extracted from
    phrases   one float32 embedding per distinct normalised subject, relation or object string
    triples   one row per triple: doc_id, node (chunk) id, the triple, its three phrase ids

Every sync of up to `commit_texts` texts is one write transaction, extraction included: a
crash or an exception at any point leaves the previous state, and readers (alignment in the
server) go on reading the previous state while a sync runs.
A larger sync (a first build of a big corpus) commits whole documents every `commit_texts`
texts: a crash keeps what was committed, and the next sync resumes with the rest. A second
writer waits for the first (up to `busy_timeout_s`) and then diffs against its result.
Alignment reads the arrays of a `KGSnapshot`, reloaded only when another commit has bumped the
generation counter, so it never embeds the graph again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragmend.errors import ConfigError, IndexMissing
from ragmend.kg.graphdb import GraphDatabase, GraphTx, SqliteGraph
from ragmend.kg.phrases import Embed, name_key, number_key, triple_phrases, unit_rows
from ragmend.kg.triples import Triple, TripleExtractor

SCHEMA_VERSION = 1

# doc_id -> (fingerprint, [(node_id, text), ...]): the complete set of documents the graph holds.
Docs = Mapping[str, tuple[str, Sequence[tuple[str, str]]]]


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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class _SyncPlan:
    old: dict[str, str]  # doc_id -> fingerprint before the sync
    removed: list[str]
    changed: list[str]  # new or changed documents, to extract
    texts: int  # texts the changed documents hold
    full: bool  # the extractor or the embedding model changed


@dataclass(frozen=True, kw_only=True)
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
        db: GraphDatabase | Path | str,
        extractor: TripleExtractor,
        embed: Embed,
        *,
        embed_name: str = "",
        batch_texts: int = 64,
        commit_texts: int = 2048,
        busy_timeout_s: float = 600.0,
    ):
        """`db` holds the tables (a path: a SQLite file); `embed_name` names the embedding model:
        phrases cached under another name are re-embedded."""
        self.db: GraphDatabase = SqliteGraph(db, busy_timeout_s) if isinstance(db, (Path, str)) else db
        self.extractor = extractor
        self.embed = embed
        self.embed_name = embed_name
        self.batch_texts = batch_texts
        self.commit_texts = commit_texts
        self._lock = threading.Lock()
        self._snapshot: KGSnapshot | None = None
        with self.db.writing() as tx:
            version = tx.get_meta("schema")
            if version is None:
                tx.set_meta("schema", str(SCHEMA_VERSION))
                tx.set_meta("generation", "0")
            elif version != str(SCHEMA_VERSION):
                raise IndexMissing(
                    f"knowledge graph {self.location} has schema {version}, this ragmend reads "
                    f"{SCHEMA_VERSION}: delete it and ingest again"
                )

    @property
    def location(self) -> str:
        return self.db.location

    def close(self) -> None:
        """Release the database's held connection, where it keeps one (PostgreSQL)."""
        self.db.close()

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
        with self.db.writing() as tx:
            plan = self._plan(tx, docs)
            if plan.texts <= self.commit_texts:
                counts = self._replace(tx, docs, plan.changed, plan.old)
                return self._finish(tx, docs, plan=plan, t0=t0, counts=counts)
            self._clear(tx, plan)
        counts = (0, 0)
        for chunk in _chunks(docs, plan.changed, self.commit_texts):
            with self.db.writing() as tx:
                # Another writer may have written some of these since the plan: skip them.
                now = tx.fingerprints(chunk)
                todo = [d for d in chunk if now.get(d) != docs[d][0]]
                added = self._replace(tx, docs, todo, now)
                counts = (counts[0] + added[0], counts[1] + added[1])
                _bump_generation(tx)
        with self.db.writing() as tx:
            return self._finish(tx, docs, plan=plan, t0=t0, counts=counts)

    def _plan(self, tx: GraphTx, docs: Docs) -> _SyncPlan:
        old = tx.fingerprints()
        full_extract = bool(old) and tx.get_meta("extractor") != self.extractor.name
        full_embed = tx.get_meta("embed_name") not in (None, self.embed_name)
        removed = [d for d in old if d not in docs]
        changed = [d for d, (fp, _) in docs.items() if full_extract or full_embed or old.get(d) != fp]
        tx.delete_docs(removed)
        if full_embed:
            # Another embedding model made the cached vectors: they are worthless to alignment.
            tx.clear(phrases=True)
        return _SyncPlan(
            old=old,
            removed=removed,
            changed=changed,
            texts=sum(len(docs[d][1]) for d in changed),
            full=full_extract or full_embed,
        )

    def _clear(self, tx: GraphTx, plan: _SyncPlan) -> None:
        """Before a sync that commits in chunks: make what is committed resumable."""
        if plan.full:
            # The extractor changed: its name is written now, so the old graph must go now, or a
            # resumed sync would take the old documents for current ones.
            tx.clear(phrases=False)
        tx.set_meta("extractor", self.extractor.name)
        tx.set_meta("embed_name", self.embed_name)
        _bump_generation(tx)

    def _replace(
        self, tx: GraphTx, docs: Docs, doc_ids: Sequence[str], old: Mapping[str, str]
    ) -> tuple[int, int]:
        """Extract `doc_ids` and replace what the graph held of them: (triples, phrases) added."""
        tx.delete_docs([d for d in doc_ids if d in old])
        phrase_ids = tx.phrase_ids()
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
            phrases_embedded += self._add_phrases(tx, phrase_ids, rows)
            tx.add_triples([_row(doc_id, node_id, t, phrase_ids) for doc_id, node_id, t in rows])
            triples_added += len(rows)
        tx.add_docs([(d, docs[d][0]) for d in doc_ids])
        return triples_added, phrases_embedded

    def _finish(
        self,
        tx: GraphTx,
        docs: Docs,
        plan: _SyncPlan,
        t0: float,
        counts: tuple[int, int],
    ) -> SyncReport:
        triples_added, phrases_embedded = counts
        # Phrases no triple uses any more would only grow the matrix alignment scans.
        tx.prune_phrases()
        tx.set_meta("extractor", self.extractor.name)
        tx.set_meta("embed_name", self.embed_name)
        _bump_generation(tx)
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
        self, tx: GraphTx, phrase_ids: dict[str, int], rows: list[tuple[str, str, Triple]]
    ) -> int:
        new = sorted({p for _, _, t in rows for p in triple_phrases(t)} - phrase_ids.keys())
        if not new:
            return 0
        vectors = unit_rows(self.embed(new))
        if vectors.shape[0] != len(new):
            raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(new)} phrases")
        dim = tx.get_meta("dim")
        if dim is not None and int(dim) != vectors.shape[1] and phrase_ids:
            raise ConfigError(
                f"the knowledge graph {self.location} holds {dim}-d phrase embeddings, the embed "
                f"function gives {vectors.shape[1]}-d: pass embed_name so the store re-embeds, or delete it"
            )
        tx.set_meta("dim", str(vectors.shape[1]))
        phrase_ids.update(tx.add_phrases(new, vectors))
        return len(new)

    # -- reading --------------------------------------------------------------------------------

    def snapshot(self) -> KGSnapshot:
        """The graph's arrays; cached until another sync commits."""
        with self.db.reading() as tx:
            generation = int(tx.get_meta("generation") or 0)
            stored_embed = tx.get_meta("embed_name")
            if stored_embed not in (None, self.embed_name):
                raise ConfigError(
                    f"the knowledge graph {self.location} was embedded with '{stored_embed}', not "
                    f"'{self.embed_name}': ingest again to rebuild it"
                )
            with self._lock:
                if self._snapshot is not None and self._snapshot.generation == generation:
                    return self._snapshot
            snap = _load_snapshot(tx, generation)
        with self._lock:
            self._snapshot = snap
        return snap

    def fetch(self, ids: Sequence[int]) -> dict[int, KGTriple]:
        """The triples with these ids (ids a later sync removed are absent)."""
        if not ids:
            return {}
        with self.db.reading() as tx:
            rows = tx.select_triples(ids=ids)
        return {r[0]: _kg_triple(r) for r in rows}

    def triples(self, doc_id: str | None = None) -> list[KGTriple]:
        """Every triple (of one document), in insertion order: for inspection and tests."""
        with self.db.reading() as tx:
            return [_kg_triple(r) for r in tx.select_triples(doc_id=doc_id)]

    def fingerprints(self) -> dict[str, str]:
        with self.db.reading() as tx:
            return tx.fingerprints()

    def stats(self) -> KGStats:
        with self.db.reading() as tx:
            docs, triples, subjects, phrases = tx.counts()
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


def _bump_generation(tx: GraphTx) -> None:
    # Readers reload their snapshot when the counter moves.
    tx.set_meta("generation", str(int(tx.get_meta("generation") or 0) + 1))


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


def _load_snapshot(tx: GraphTx, generation: int) -> KGSnapshot:
    phrases = tx.phrase_vectors()
    rows = tx.snapshot_rows()
    phrase_ids = np.array([p[0] for p in phrases], dtype=np.int64)
    dim = int(tx.get_meta("dim") or 0)
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
