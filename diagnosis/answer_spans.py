"""Where in the answer it is unsupported: the claims the diagnosis found wanting, located as
character ranges of the answer text, so a client can mark them (the form LettuceDetect and
HaluGate give, at the grain of the claims ragmend judges: sentences, or a compound sentence's
atomic parts located at their sentence).

A span is given only for an answer the diagnosis fails (a failure type other than NoFailure):
each claim whose own P(unsupported) reaches the verdict's threshold, or, without a verdict, each
claim no passage entails. Where the answer fails on what no single claim shows (the question not
answered, a wrong pick between alternatives), its weakest claim is the span, so a failing answer
always points somewhere.

>>> sentence_ranges("Paris is in France. It is big.")
[(0, 19), (20, 30)]
>>> claim_range("Paris is in France. It is big.", "It is big.")
(20, 30)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.spans import normalise
from ragmend.diagnosis.types import AnswerSpan, HypothesisVerdict, Verdict


def sentence_ranges(text: str) -> list[tuple[int, int]]:
    """The character range of each of the text's sentences (hypotheses.split_sentences), in order."""
    ranges, at = [], 0
    for sentence in split_sentences(text):
        found = _find(text, sentence, at)
        if found is not None:
            ranges.append(found)
            at = found[1]
    return ranges


def locate_claims(response: str, claims: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character span of each claim in the response, in order, each searched from where the one
    before it begins: where it stands verbatim (any whitespace matching any other; without its
    final stop where the response goes on, or cites, there), else where it begins as the claim
    does, else the longest run of its last words found verbatim (an atomic part of a compound
    sentence: "Bates has said the shooting was accidental." is placed at "has said the shooting
    was accidental" after "Bates is charged with ... and"). None when none is found.

    >>> locate_claims("It opens at 8 [1]. It has WiFi.", ["It opens at 8.", "It has WiFi.", "Gone."])
    [(0, 13), (19, 31), None]
    """
    out: list[tuple[int, int] | None] = []
    cursor = 0
    for claim in claims:
        span = _find(response, claim, cursor) or _find(response, claim.rstrip(" .!?"), cursor)
        if span is None:
            start = response.find(claim[:40], cursor)
            span = (start, start + len(claim)) if start >= 0 else _tail_span(response, claim, cursor)
        out.append(span)
        if span:
            cursor = span[0] + 1
    return out


def claim_range(answer: str, claim: str, ranges: Sequence[tuple[int, int]] | None = None) -> tuple[int, int]:
    """One claim's range in the answer: where `locate_claims` places it, else the sentence
    sharing most of its words, else the whole answer (a bare answer's claim is the question's
    statement with the answer in its slot)."""
    located = locate_claims(answer, [claim])[0]
    return located if located is not None else _sentence_or_whole(answer, claim, ranges)


def unsupported_spans(
    answer: str, claims: Sequence[HypothesisVerdict], failed: bool, verdict: Verdict | None
) -> tuple[AnswerSpan, ...]:
    """The spans of a failing answer's unsupported claims (the module's rule); none when it passes."""
    if not failed or not claims or not answer.strip():
        return ()
    chosen = [i for i, c in enumerate(claims) if _wanting(c, verdict)]
    if not chosen:
        chosen = [max(range(len(claims)), key=lambda i: _weakness(claims[i]))]
    ranges = sentence_ranges(answer)
    located = locate_claims(answer, [c.hypothesis for c in claims])
    spans: dict[tuple[int, int], AnswerSpan] = {}
    for i in chosen:
        c = claims[i]
        start, end = located[i] or _sentence_or_whole(answer, c.hypothesis, ranges)
        if (start, end) not in spans or _weakness(c) > _weakness(claims[spans[(start, end)].claim]):
            spans[(start, end)] = AnswerSpan(
                start=start,
                end=end,
                text=answer[start:end],
                claim=i,
                p_unsupported=c.p_unsupported,
                state=c.state,
            )
    return tuple(sorted(spans.values(), key=lambda s: s.start))


def _wanting(claim: HypothesisVerdict, verdict: Verdict | None) -> bool:
    if verdict is not None and claim.p_unsupported is not None:
        return claim.p_unsupported >= verdict.threshold
    return claim.state != "entail"


def _weakness(claim: HypothesisVerdict) -> float:
    if claim.p_unsupported is not None:
        return claim.p_unsupported
    return {"contradict": 2.0, "neutral": 1.0}.get(claim.state, 0.0)


def _sentence_or_whole(answer: str, claim: str, ranges: Sequence[tuple[int, int]] | None) -> tuple[int, int]:
    words = set(normalise(claim).split())
    best, best_share = None, 0.0
    for start, end in ranges if ranges is not None else sentence_ranges(answer):
        share = len(words & set(normalise(answer[start:end]).split())) / max(1, len(words))
        if share > best_share:
            best, best_share = (start, end), share
    return best if best is not None and best_share >= 0.5 else _stripped(answer, 0, len(answer))


def _tail_span(response: str, claim: str, cursor: int) -> tuple[int, int] | None:
    """The span of the longest run of a claim's last words (three at least) in the response."""
    words = claim.rstrip(". ").split()
    for i in range(len(words) - 2):
        tail = " ".join(words[i:])
        at = response.find(tail, cursor)
        if at >= 0:
            return (at, at + len(tail))
    return None


def _find(text: str, piece: str, start: int) -> tuple[int, int] | None:
    """Where `piece` stands in `text` from `start`, any run of whitespace matching any other."""
    words = piece.split()
    if not words:
        return None
    m = re.compile(r"\s+".join(re.escape(w) for w in words)).search(text, start)
    return None if m is None else (m.start(), m.end())


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
