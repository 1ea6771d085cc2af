"""Choice questions ("Who is older, Steven Tyler, or Elizabeth Fraser?"): the answers a question
offers, and which one a response picks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.diagnosis.patterns import NUMBER, QUOTE_MARKS, opening_word
from ragmend.diagnosis.spans import (
    COMMON_WORDS,
    found_in,
    key_spans,
    names_unasked,
    normalise,
)

# -- choice questions: "Who is older, Steven Tyler, or Elizabeth Fraser?" ------------------------

# A question that offers its answers opens with a question word and ends in "A or B".
_CHOICE_OPENINGS = frozenset(("which", "who", "whom", "whose", "what"))
_OR = re.compile(r"\s+or\s+", re.I)
_MAX_ALTERNATIVE_WORDS = 12
_CLAUSE_AFTER = re.compile(r",\s+(?=[a-z])")


@dataclass(frozen=True)
class Choice:
    """A question's offered answers and what it asks of them (the text before them)."""

    ask: str
    alternatives: tuple[str, str]


def offered_choice(question: str) -> Choice | None:
    """The two answers a question offers ("Which came out first, Dinosaur or McFarland, USA" ->
    "Dinosaur", "McFarland, USA"; "who is younger Ulrich Walter or Luca Parmitano?"), None for any
    other question. The first alternative runs from the last comma before "or" (a comma right
    before "or" aside) or, without one, is the last name before it."""
    q = question.strip().rstrip("?").strip()
    if opening_word(q) not in _CHOICE_OPENINGS:
        return None
    parts = _OR.split(q)
    if len(parts) != 2:
        return None
    before, b = parts[0].rstrip(" ,"), parts[1]
    # "A or B, have a campus abroad?": the question goes on after B ("McFarland, USA" does not).
    b, *rest = _CLAUSE_AFTER.split(b, 1)
    b = b.strip(" ,.:;" + QUOTE_MARKS)
    if "," in before:
        ask, a = before.rsplit(",", 1)
        # "Minden, Nevada or Gardnerville, Nevada": B's place after its comma is A's too, so A
        # takes its own comma ("Minden, Nevada"), not the place alone.
        if "," in b and "," in ask and normalise(a) == normalise(b.rsplit(",", 1)[1]):
            ask, head = ask.rsplit(",", 1)
            a = f"{head.strip()},{a}"
    elif ":" in before:
        ask, a = before.rsplit(":", 1)
    else:
        names = key_spans(before)
        if not names or not before.endswith(names[-1]):
            return None
        a, ask = names[-1], before[: -len(names[-1])]
    a = a.strip(" " + QUOTE_MARKS)
    if not a or not b or max(len(a.split()), len(b.split())) > _MAX_ALTERNATIVE_WORDS:
        return None
    return Choice(" ".join([ask.strip(), *rest]).strip(), (a, b))


def _names_alternative(alternative: str, said: str, loosely: bool = False) -> int | None:
    """Where (a character offset into normalised text) an answer names an alternative: the whole
    of it, or one of its names ("Doris Lessing" for "British novelist Doris Lessing"); `loosely`,
    the last word of one of its names ("Kenneth Eliot Flach" for "Ken Flach")."""
    spans = [alternative, *(s for s in key_spans(alternative) if not NUMBER.fullmatch(s))]
    spans = [s for s in spans if normalise(s)]
    if loosely:
        last = {normalise(s).split()[-1] for s in spans}
        at = [f" {said} ".find(f" {w} ") for w in last if len(w) > 3 and w not in COMMON_WORDS]
    else:
        at = [said.find(normalise(s).split()[0]) for s in spans if found_in(s, said)]
    return min((i for i in at if i >= 0), default=None)


def picked_alternative(question: str, response: str) -> int | Literal["neither"] | None:
    """Which offered answer a response names as its subject (0 or 1; "Jed Hoyer is older than
    John William Henry II." picks 0), "neither" when it names something else instead ("Steven
    Nathan Zwicker is older than Elizabeth Fraser."), None when there is no choice to judge (no
    offered answers, a yes or no, an abstention, a pronoun)."""
    choice = offered_choice(question)
    if choice is None or not response.strip() or is_abstention(response):
        return None
    said = normalise(response)
    if not said or said.split()[0] in ("yes", "no"):
        return None
    asked = normalise(question)
    subject, _, compared = said.partition(" than ")  # "A is older than B": A is the one named
    for loosely in (False, True):
        at = [_names_alternative(alt, subject, loosely) for alt in choice.alternatives]
        if at[0] is None and at[1] is None:
            continue
        pick = 0 if at[1] is None or (at[0] is not None and at[0] <= at[1]) else 1
        # Compared with something the question did not offer: "Meg Ryan is older than Keith
        # Richards." does not choose between Nicki Minaj and Meg Ryan.
        other = choice.alternatives[1 - pick]
        names_other = any(_names_alternative(other, compared, lo) is not None for lo in (False, True))
        if compared and not names_other and names_unasked(response.split(" than ", 1)[-1], asked):
            return "neither"
        return pick
    return "neither" if names_unasked(response, asked) else None
