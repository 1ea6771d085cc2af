"""kappa checked against the passage each conflicting graph triple was read from.

Why: the graph takes an unlike object of a one-valued relation as a contradiction, but a passage
can say both. "Elko Regional Airport is in Nevada." met the graph's "Elko Regional Airport is in
Elko County", read from the Elko passage, which also says Nevada and entails the answer: the
airport is in both, and the graph has no notion of a place within a place (nor of another
wording of one object). A conflict is a contradiction only where the graph triple's own passage
does not support the claim; where it does (a retrieved passage's P(entailment) of a claim naming
the triple's subject reaches the entail threshold), the match is `entailed` and counts as
consistent. Only a conflict of another object is checked so; a clash of names, numbers or
negation on a matching object stands, as does a conflict with a passage that was not retrieved
or that does not entail the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ragmend.diagnosis.spans import normalise
from ragmend.diagnosis.types import HypothesisVerdict, KGSignal, TripleMatch
from ragmend.kg.align import kappa_of


def crosscheck(kg: KGSignal, claims: Sequence[HypothesisVerdict], entail: float) -> KGSignal:
    """`kg` with each conflict whose graph triple's source passage entails a claim about the
    triple's subject marked `entailed`, and kappa recomputed (an entailed match counts as
    consistent)."""
    if kg.kappa != "conflict":
        return kg
    matches = tuple(
        replace(m, verdict="entailed") if m.verdict == "conflict" and _entailed(m, claims, entail) else m
        for m in kg.matches
    )
    verdicts = {"consistent" if m.verdict == "entailed" else m.verdict for m in matches}
    return replace(kg, kappa=kappa_of(verdicts), matches=matches)


def _entailed(m: TripleMatch, claims: Sequence[HypothesisVerdict], entail: float) -> bool:
    subject = normalise(m.triple[0])
    # Only an unlike object can be another fact; a clash of names, numbers or negation on a
    # matching object ("sister company of Beyond Home Entertainment" against "... of Beyond
    # International") is a contradiction the NLI model may miss, and it stands.
    return (
        m.another_object
        and bool(subject)
        and any(
            f" {subject} " in f" {normalise(v.hypothesis)} "
            and any(s.passage == m.source and s.entail >= entail for s in v.scores)
            for v in claims
        )
    )
