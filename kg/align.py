"""kappa = TripleAlignStatus(r): the response's triples against the corpus knowledge graph.

Each response triple is compared with every graph triple by the cosine similarity of the
embeddings of their normalised subjects, relations and objects (one matrix product over the
store's cached phrase matrix, then gathers; nothing of the graph is embedded again). A graph
triple is a candidate when subject and relation both reach their thresholds. Against a candidate:

- the object matches (similarity >= threshold), its numbers and names agree and the negation is
  the same: consistent;
- the object matches but a number, date or name differs, or one side is negated: conflict.
  Numbers and names are compared as sets (kg.phrases.number_key, name_key; a less precise side
  agrees): embeddings put 1867 near 1868 (0.69) and Titanic near Jaws (0.54), both over the
  object threshold;
- the object does not match and neither side is negated: conflict, provided both objects are of
  one kind (both carry numbers or neither does): "born in Warsaw" and "born in 1867" answer
  different questions, and a graph that lacks the year has not contradicted it;
- otherwise the candidate says nothing about the triple.

A response triple is consistent when some candidate is consistent (subjects have many objects:
Paris is a capital and a city), else conflict when some candidate conflicts, else missing.
Over the response: any conflict -> conflict; else any consistent -> consistent; else missing; no
triple at all -> no_triplet. Subject and object are never swapped: few relations are symmetric
and the extractor already turns passives active, so one voice cannot miss the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragmend.errors import ConfigError
from ragmend.kg.phrases import Embed, keys_agree, name_key, number_key, triple_phrases, unit_rows
from ragmend.kg.store import KGSnapshot, KGStore, KGTriple
from ragmend.kg.triples import Triple, TripleExtractor
from ragmend.settings import KGSettings

Kappa = Literal["consistent", "conflict", "missing", "no_triplet"]
Verdict = Literal["consistent", "conflict", "missing"]


@dataclass(frozen=True)
class AlignThresholds:
    subject: float = 0.9
    relation: float = 0.9
    object: float = 0.5

    @classmethod
    def from_settings(cls, kg: KGSettings) -> AlignThresholds:
        t = kg.thresholds
        return cls(subject=t.subject, relation=t.relation, object=t.object)


@dataclass(frozen=True, kw_only=True)
class TripleAlignment:
    """One response triple's verdict and the graph triple behind it (the explanation)."""

    triple: Triple
    verdict: Verdict
    # consistent/conflict: the best such candidate; missing: the nearest graph triple by subject
    # and relation, to show how close the graph came (None for an empty graph).
    kg_triple: KGTriple | None
    subject_sim: float
    relation_sim: float
    object_sim: float
    reason: str

    @property
    def similarity(self) -> tuple[float, float, float]:
        return (self.subject_sim, self.relation_sim, self.object_sim)

    def as_dict(self) -> dict[str, object]:
        t = self.triple
        return {
            "triple": {
                "subject": t.subject,
                "relation": t.relation,
                "object": t.object,
                "negated": t.negated,
            },
            "verdict": self.verdict,
            "kg": self.kg_triple.as_dict() if self.kg_triple else None,
            "similarity": {
                "subject": round(self.subject_sim, 4),
                "relation": round(self.relation_sim, 4),
                "object": round(self.object_sim, 4),
            },
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Alignment:
    kappa: Kappa
    triples: tuple[TripleAlignment, ...]

    def as_dict(self) -> dict[str, object]:
        return {"kappa": self.kappa, "triples": [t.as_dict() for t in self.triples]}


def align(
    response_triples: list[Triple],
    store: KGStore,
    embed: Embed,
    thresholds: AlignThresholds | None = None,
) -> Alignment:
    """kappa of a response's triples against the graph in `store`, with the matched graph triples."""
    if not response_triples:
        return Alignment("no_triplet", ())
    th = thresholds or AlignThresholds()
    for _attempt in range(2):
        snap = store.snapshot()
        judged = _judge(response_triples, snap, embed, th)
        wanted = [row for *_, row in judged if row is not None]
        found = store.fetch([int(snap.ids[row]) for row in wanted])
        # A sync may have committed between the snapshot and the fetch; judge again on the new graph.
        if len(found) == len(set(wanted)):
            break
    items = tuple(
        TripleAlignment(
            triple=t,
            verdict=verdict,
            kg_triple=found.get(int(snap.ids[row])) if row is not None else None,
            subject_sim=s,
            relation_sim=r,
            object_sim=o,
            reason=reason,
        )
        for t, verdict, reason, (s, r, o), row in judged
    )
    return Alignment(kappa_of({i.verdict for i in items}), items)


def kappa_of(verdicts: set[str]) -> Kappa:
    """kappa over a response's triple verdicts (at least one triple): any conflict -> conflict;
    else any consistent -> consistent; else missing."""
    if "conflict" in verdicts:
        return "conflict"
    return "consistent" if "consistent" in verdicts else "missing"


def align_text(
    text: str,
    extractor: TripleExtractor,
    store: KGStore,
    embed: Embed,
    thresholds: AlignThresholds | None = None,
) -> Alignment:
    """Extract the triples of `text` (a response) and align them."""
    return align(extractor.extract([text])[0], store, embed, thresholds)


_Judged = tuple[Triple, Verdict, str, tuple[float, float, float], int | None]
MANY_VALUED = frozenset({"be", "have", "include", "contain", "become"})


def _judge(triples: list[Triple], snap: KGSnapshot, embed: Embed, th: AlignThresholds) -> list[_Judged]:
    if snap.size == 0:
        return [(t, "missing", "the knowledge graph is empty", (0.0, 0.0, 0.0), None) for t in triples]
    keys = [triple_phrases(t) for t in triples]
    texts = sorted({p for k in keys for p in k})
    col = {p: i for i, p in enumerate(texts)}
    queries = unit_rows(embed(texts))
    if queries.shape[1] != snap.vectors.shape[1]:
        raise ConfigError(
            f"the embed function gives {queries.shape[1]}-d vectors, the knowledge graph holds "
            f"{snap.vectors.shape[1]}-d ones: align with the model the graph was built with"
        )
    # Similarity of every graph phrase to every response phrase: (m phrases, q phrases).
    sims = snap.vectors @ queries.T
    return [
        _judge_one(t, [col[p] for p in k], snap=snap, sims=sims, th=th)
        for t, k in zip(triples, keys, strict=True)
    ]


def _judge_one(
    t: Triple, cols: list[int], snap: KGSnapshot, sims: np.ndarray, th: AlignThresholds
) -> _Judged:
    s_all = sims[snap.subject, cols[0]]
    r_all = sims[snap.relation, cols[1]]
    cand = np.flatnonzero((s_all >= th.subject) & (r_all >= th.relation))
    if cand.size == 0:
        row = int(np.argmax(s_all + r_all))
        o = float(sims[snap.object[row], cols[2]])
        reason = "no graph triple has this subject and relation"
        return (t, "missing", reason, (float(s_all[row]), float(r_all[row]), o), row)

    s, r, o = s_all[cand], r_all[cand], sims[snap.object[cand], cols[2]]
    numbers, names = number_key(t.numbers), name_key(t.object)
    kg_numbers = [snap.number_keys[i] for i in cand]
    numbers_ok = np.array([keys_agree(numbers, k) for k in kg_numbers], dtype=bool)
    names_ok = np.array([keys_agree(names, snap.name_keys[i]) for i in cand], dtype=bool)
    same_kind = np.array([bool(k) == bool(numbers) for k in kg_numbers], dtype=bool)
    same_negation = snap.negated[cand] == t.negated
    object_match = o >= th.object
    consistent = object_match & numbers_ok & names_ok & same_negation
    # A many-valued relation (the copula: a person "is" a journalist AND a co-founder) holds
    # several objects at once, so an unlike object is another fact, not a contradiction; only
    # a clash of names, numbers or negation on a matching object is.
    many_valued = t.relation.lower() in MANY_VALUED
    conflict = (object_match & ~(numbers_ok & names_ok & same_negation)) | (
        ~object_match & same_kind & ~snap.negated[cand] & (not t.negated) & (not many_valued)
    )
    score = s + r + o
    ordered: tuple[tuple[Verdict, np.ndarray], ...] = (("consistent", consistent), ("conflict", conflict))
    for verdict, mask in ordered:
        if mask.any():
            i = int(np.flatnonzero(mask)[np.argmax(score[mask])])
            reason = _reason(
                verdict,
                bool(object_match[i]),
                numbers_ok=bool(numbers_ok[i]),
                names_ok=bool(names_ok[i]),
                same_negation=bool(same_negation[i]),
            )
            return (t, verdict, reason, (float(s[i]), float(r[i]), float(o[i])), int(cand[i]))
    i = int(np.argmax(s + r))
    reason = "the graph states this subject and relation only with another kind of object, or negated"
    return (t, "missing", reason, (float(s[i]), float(r[i]), float(o[i])), int(cand[i]))


def _reason(verdict: str, object_match: bool, numbers_ok: bool, names_ok: bool, same_negation: bool) -> str:
    if verdict == "consistent":
        return "subject, relation and object match"
    if not object_match:
        return "same subject and relation, another object"
    if not numbers_ok:
        return "same subject and relation, other numbers or dates"
    if not names_ok:
        return "same subject and relation, another name"
    return "same subject, relation and object, opposite negation" if not same_negation else ""
