"""Whether the evidence holds incompatible answers to the question, and which passages hold which.

Passages that merely differ (one says more, or speaks of something else) do not count: the evidence
is in conflict on the asked fact when, for one claim of the answer, some passage entails it and
another contradicts it, each at `conflict_threshold` or more (a bar above the diagnosis's entail
and contradict thresholds: a conflict changes what the user reads), and the contradicting passage
answers the question about as well as the entailing one: its cross-encoder relevance to the
question (a logit) within `relevance_margin` of the best of the answer's side. The NLI model reads
"Marie Curie died in Passy" as contradicting "Marie Curie was born in Warsaw"; the cross-encoder
scores it 4 logits below the passage that says where she was born, where a passage naming another
acquirer, or another winner, scores within one. Without a reranker every contradicting passage
counts. Nor does a passage the answer follows for another of its claims (it entails one at the
bar): the answer and that passage tell one account (the steps of one recipe, the parts of one
description), and what NLI reads as a contradiction is between two parts of it, not two answers to
the question. The answer's side is the passages that entail its claim; the other side is those that
contradict it. What each side says is quoted from its own passages, never the answer's words: the
answer's side by its sentence that entails the claim most, the other side by its sentence that
contradicts it most (one small NLI batch). A conflict stands only where those quotes themselves
entail and contradict the claim at the same bar: read whole, a long passage draws contradictions
that none of its sentences holds, and the user would read two quotes that agree presented as a
disagreement. Each side also carries the sum of its passages' trust levels, where every one of them
has one (a document's "trust" at ingest). Nothing is generated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.premises import JOINT
from ragmend.diagnosis.types import ConflictSide, EvidenceConflict, HypothesisVerdict

# (premise, hypothesis) pairs -> each pair's (P(entail), P(neutral), P(contradict)).
NLIScores = Callable[[list[tuple[str, str]]], Sequence[Sequence[float]]]
ENTAIL, CONTRADICT = 0, 2
MAX_QUOTE_SENTENCES = 12  # a passage's sentences read for the quote, from its start
RELEVANCE_MARGIN = 2.0  # cross-encoder logits (the module's docstring)


def conflict_on_claims(
    claims: Sequence[HypothesisVerdict],
    passages: Sequence[tuple[str, str]],
    threshold: float,
    nli: NLIScores,
    relevance: Mapping[str, float] | None = None,
    relevance_margin: float = RELEVANCE_MARGIN,
    trust: Mapping[str, float] | None = None,
) -> EvidenceConflict | None:
    """The strongest conflict over the answer's claims (`passages`: each id and text; `relevance`:
    each passage's cross-encoder logit for the question, None without a reranker; `trust`: the
    trust level of each passage whose source has one), or None."""
    candidates: list[tuple[float, HypothesisVerdict, list[str], list[str]]] = []
    entailed = _entailed_by_passage(claims, threshold)
    for i, claim in enumerate(claims):
        scores = [s for s in claim.scores if s.passage != JOINT]
        pro = [s.passage for s in scores if s.entail >= threshold]
        followed = {p for p, which in entailed.items() if which - {i}}  # for another claim
        con = [
            s.passage
            for s in scores
            if s.contradict >= threshold and s.passage not in pro and s.passage not in followed
        ]
        if pro and con and relevance is not None:
            bar = max(relevance.get(p, 0.0) for p in pro) - relevance_margin
            con = [p for p in con if relevance.get(p, bar) >= bar]
        if not pro or not con:
            continue
        strength = min(
            max(s.entail for s in scores if s.passage in pro),
            max(s.contradict for s in scores if s.passage in con),
        )
        candidates.append((strength, claim, pro, con))
    text = dict(passages)
    for strength, claim, pro, con in sorted(candidates, key=lambda c: -c[0]):
        says_for, says_against = _quotes(
            [text[p] for p in pro], [text[p] for p in con], claim.hypothesis, nli
        )
        if says_for.score < threshold or says_against.score < threshold:
            continue
        return EvidenceConflict(
            claim=claim.hypothesis,
            sides=(
                ConflictSide(tuple(pro), says_for.text, takes_answer=True, trust=_trusted(pro, trust)),
                ConflictSide(tuple(con), says_against.text, takes_answer=False, trust=_trusted(con, trust)),
            ),
            strength=round(strength, 4),
        )
    return None


def _entailed_by_passage(claims: Sequence[HypothesisVerdict], threshold: float) -> dict[str, set[int]]:
    """Which claims (by index) each passage entails at the bar: the answer follows it for those."""
    entailed: dict[str, set[int]] = {}
    for i, claim in enumerate(claims):
        for s in claim.scores:
            if s.passage != JOINT and s.entail >= threshold:
                entailed.setdefault(s.passage, set()).add(i)
    return entailed


def _trusted(ids: Sequence[str], trust: Mapping[str, float] | None) -> float | None:
    """The sum of the passages' trust levels; None where any has none."""
    if trust is None or any(p not in trust for p in ids):
        return None
    return round(sum(trust[p] for p in ids), 4)


class Quote(NamedTuple):
    text: str
    score: float  # its P(entail) or P(contradict) of the claim, as the side it quotes


def _quotes(
    for_texts: Sequence[str], against_texts: Sequence[str], claim: str, nli: NLIScores
) -> tuple[Quote, Quote]:
    """The sentence of the entailing passages that entails the claim most, and the sentence of the
    contradicting passages that contradicts it most, from one NLI batch."""
    pro, con = _sentences(for_texts), _sentences(against_texts)
    probs = nli([(sentence, claim) for sentence in pro + con]) if pro or con else []
    return (
        _best(pro, [row[ENTAIL] for row in probs[: len(pro)]], for_texts),
        _best(con, [row[CONTRADICT] for row in probs[len(pro) :]], against_texts),
    )


def _best(sentences: Sequence[str], scores: Sequence[float], texts: Sequence[str]) -> Quote:
    """The best-scored sentence; a passage's whole text where it has no sentence to split (scored
    1.0: its passage's own score already met the bar)."""
    if not sentences:
        return Quote(texts[0].strip(), 1.0)
    i = max(range(len(sentences)), key=scores.__getitem__)
    return Quote(sentences[i], float(scores[i]))


def _sentences(texts: Sequence[str]) -> list[str]:
    return [s for t in texts for s in split_sentences(t)[:MAX_QUOTE_SENTENCES]]
