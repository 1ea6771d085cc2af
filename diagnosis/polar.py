"""A bare "Yes" or "No" to a question asked yes or no, read as what it asserts.

"Are both A and B actors?" answered "Yes" claims that A is an actor and that B is one: each is
judged against single passages like any claim (compound.py). Answered "No", it claims that one of
them is not: it is judged as one denial of them all, supported by a passage that contradicts one
of them and contradicted by one that states them all (`denial`). Why: read through the
question-statement template ('The answer to the question "..." is No.') a bare yes or no is a
sentence no passage entails, so every one was flagged, right or wrong.

The question is read as "AUX SUBJECT PREDICATE?", the subject one name or two joined by "and"
(names: capitalised or quoted words, a few connectors between them; "the documentaries" may lead).
A question read otherwise ("Did the band that ... ?") gives None and keeps the template.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmend.diagnosis.aggregate import hypothesis_state
from ragmend.diagnosis.compound import ONE_SUBJECT, relates_the_two, singular_predicate
from ragmend.diagnosis.hypotheses import negate
from ragmend.diagnosis.patterns import AUXILIARIES
from ragmend.diagnosis.premises import JOINT
from ragmend.diagnosis.statement import as_sentence, is_name_word, name_end
from ragmend.diagnosis.types import HypothesisVerdict, PassageScores, Thresholds


@dataclass(frozen=True)
class PolarReading:
    """What a bare yes or no asserts: `claims`, the question's statement as atomic claims; `denied`:
    the answer is "No", so it holds where the evidence contradicts one of them."""

    claims: tuple[str, ...]
    denied: bool

    @property
    def judged(self) -> tuple[str, ...]:
        """The claims the answer is judged by: a "No", one denial of them all (`denial`)."""
        return (denial_text(self.claims),) if self.denied else self.claims


def polar_reading(question: str, response: str) -> PolarReading | None:
    """The claims of a bare "Yes"/"No" (a full stop or "!" aside) to a yes/no question; None for any
    other response, and for a question whose subject cannot be read."""
    said = response.strip().rstrip(".!").strip().lower()
    if said not in ("yes", "no"):
        return None
    claims = statement_claims(question)
    return PolarReading(claims, denied=said == "no") if claims else None


def statement_claims(question: str) -> tuple[str, ...]:
    """The yes/no question as the atomic claims its "Yes" asserts ("Were A and B both English?" ->
    "A was English.", "B was English."); () where it cannot be read."""
    words = question.strip().rstrip("?").strip().split()
    if len(words) < 3 or words[0].lower() not in AUXILIARIES:
        return ()
    aux, rest = words[0].lower(), words[1:]
    start = 1 if rest[0].lower() == "both" else 0
    head = _common_head(rest, start)  # "the documentaries": kept in the joint statement only
    a_end = name_end(rest, head + 1 if _the_name(rest, head) else head)
    if a_end <= head + int(_the_name(rest, head)):
        return ()
    if a_end < len(rest) and rest[a_end].lower() == "or":
        return ()  # "Is A or B bigger?" offers a choice: neither yes nor no answers it
    if a_end < len(rest) and rest[a_end].lower() == "and":
        b_from = a_end + 1 + int(_the_name(rest, a_end + 1))
        b_end = name_end(rest, b_from)
        predicate = _predicate(rest[b_end:])
        if b_end == b_from or not predicate:
            return ()
        a, b = _words(rest[head:a_end]), _words(rest[a_end + 1 : b_end])
        if relates_the_two(predicate):  # "... by the same director": said of the two together
            return (as_sentence(f"{_words(rest[start:b_end])} {aux} {predicate}"),)
        one = ONE_SUBJECT.get(aux, aux)
        return tuple(as_sentence(f"{s} {one} {_for_one(predicate, one)}") for s in (a, b))
    predicate_words = rest[a_end:]
    if not _predicate(predicate_words):
        return ()
    return _gapped(_words(rest[start:a_end]), aux, predicate_words)


def _gapped(subject: str, aux: str, predicate: list[str]) -> tuple[str, ...]:
    """One subject's statement, or two where the predicate gaps a second clause ("Is A a mountain
    and B a mountain peak?" -> "A is a mountain.", "B is a mountain peak.")."""
    for k, word in enumerate(predicate):
        if word.lower() != "and" or k == 0:
            continue
        end = name_end(predicate, k + 1)
        if k + 1 < end < len(predicate) and predicate[end][:1].islower():
            first = f"{subject} {aux} {' '.join(predicate[:k])}"
            second = f"{_words(predicate[k + 1 : end])} {aux} {' '.join(predicate[end:])}"
            return (as_sentence(first), as_sentence(second))
    return (as_sentence(f"{subject} {aux} {' '.join(predicate)}"),)


def _common_head(words: list[str], start: int) -> int:
    """Past a leading "the" and up to two lower-case words before a name ("the documentaries Out of
    Place ..."); `start` where there is none."""
    if start < len(words) and words[start].lower() == "the":
        for end in (start + 2, start + 3):
            if end < len(words) and words[end - 1][:1].islower() and is_name_word(words[end]):
                return end
    return start


def _the_name(words: list[str], i: int) -> bool:
    """A name led by "the" ("the Pacific Ocean"), which stays in the claim."""
    return i + 1 < len(words) and words[i].lower() == "the" and is_name_word(words[i + 1])


def _predicate(words: list[str]) -> str:
    """What is asked of the subject, less a leading "both"."""
    while words and words[0].lower() in ("both", "each", "all"):  # said of each, not what is said
        words = words[1:]
    return " ".join(words)


def _for_one(predicate: str, aux: str) -> str:
    """The predicate said of one subject: "professional tennis players" -> "a professional tennis
    player"; "been tennis players" -> "been a tennis player"."""
    if aux not in ("is", "was", "has"):
        return predicate
    first, _, after = predicate.partition(" ")
    if first.lower() == "been" and after:
        return f"{first} {singular_predicate(after)}"
    return singular_predicate(predicate)


def _words(words: Sequence[str]) -> str:
    return " ".join(words).strip(",")


def denial_text(claims: Sequence[str]) -> str:
    """What a "No" claims, as one sentence: "It is not true that A was English and B was English."."""
    return negate(" and ".join(c.rstrip(".") for c in claims))


def denial(verdicts: Sequence[HypothesisVerdict], t: Thresholds) -> HypothesisVerdict:
    """A "No" judged against each passage: it holds where the passage contradicts one of the
    claims its question's "Yes" makes (P(entail) of the denial: the strongest such contradiction),
    and is contradicted where the passage entails every one (the weakest such entailment). A joint
    premise is left out: two passages side by side draw contradictions neither holds."""
    by_passage: dict[str, list[PassageScores]] = {}
    for v in verdicts:
        for s in v.scores:
            if s.passage != JOINT:
                by_passage.setdefault(s.passage, []).append(s)
    scores = []
    for pid, seen in by_passage.items():
        entail = max(s.contradict for s in seen)
        contradict = min(s.entail for s in seen) if len(seen) == len(verdicts) else 0.0
        neutral = round(max(0.0, 1.0 - entail - contradict), 4)
        truncated = any(s.truncated for s in seen)
        scores.append(
            PassageScores(
                passage=pid, entail=entail, neutral=neutral, contradict=contradict, truncated=truncated
            )
        )
    return hypothesis_state(denial_text([v.hypothesis for v in verdicts]), scores, t)
