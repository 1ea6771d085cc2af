"""A choice of attribute ("Which company is based in Kentucky, Vocelli Pizza or Fazoli's?") checked
against the alternative the answer did not pick.

Why: the NLI model can entail a false pick (the passage on Vocelli Pizza is about pizza in
Pittsburgh, the one on Fazoli's says Lexington, Kentucky, and the answer "Vocelli Pizza is based
in Kentucky." is judged by whatever the windows say of it alone). Asking the same model the
contrastive question is a check it can do: the answer's claim with the other alternative in its
place ("Fazoli's is based in Kentucky.") is scored against the same single windows. When the
evidence supports the other and not the pick, the answer chose wrong; when it supports the pick
and not the other, it chose as the passages do.

Only attributes are checked this way. A comparison ("Which is older", "has more members",
"released first") compares two facts no single window holds; swapping the name there makes a
sentence the model cannot settle ("B is older than A."), and comparisons in time are checked by
their dates instead (comparison.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragmend.diagnosis.choices import offered_choice, picked_alternative
from ragmend.diagnosis.spans import key_spans
from ragmend.diagnosis.types import AlternativeCheck, HypothesisVerdict, Outcome

# Words that make a choice a comparison between the two alternatives, not an attribute of one.
_COMPARATIVE = re.compile(
    r"\b(more|most|less|least|fewer|fewest|than|first|last|earlier|earliest|later|latest|sooner|"
    r"older|oldest|elder|younger|youngest|newer|newest|recent(?:ly)?|before|after|longer|longest|"
    r"larger|largest|bigger|biggest|smaller|smallest|higher|highest|taller|tallest|lower|lowest|"
    r"shorter|shortest|further|furthest|farther|farthest|closer|closest|nearer|nearest|greater|"
    r"greatest|better|best|worse|worst|wider|widest|deeper|deepest|heavier|heaviest|faster|"
    r"fastest|slower|slowest|cheaper|cheapest|\w+iest)\b",
    re.I,
)


@dataclass(frozen=True)
class Swap:
    """An answer to a choice of attribute, and the same answer naming the other alternative."""

    alternatives: tuple[str, str]
    picked: int  # the alternative the answer names
    other_response: str  # the answer with the other alternative in its place


def swap_alternative(question: str, response: str) -> Swap | None:
    """The answer with the alternative it picks replaced by the other, for an answer to a choice
    of attribute that names exactly one alternative; None for any other question or answer (a
    comparison, an answer naming both or neither, a yes or no)."""
    choice = offered_choice(question)
    if choice is None or _COMPARATIVE.search(choice.ask):
        return None
    picked = picked_alternative(question, response)
    if not isinstance(picked, int):
        return None
    named, other = choice.alternatives[picked], choice.alternatives[1 - picked]
    if _find(other, response) is not None:
        return None  # "A, not B, is ..." asserts of both: not a swap
    at = _find(named, response)
    if at is None:
        return None
    start, end = at
    swapped = response[:start] + (other[:1].upper() + other[1:] if start == 0 else other) + response[end:]
    return Swap(choice.alternatives, picked, swapped)


# "Which company is based in Kentucky", "Who is younger": the question word and its noun, before
# the verb the alternative takes.
_ASKER = re.compile(
    r"^\s*(which|who|whom|what)(?:\s+[\w'\u2019]+){0,3}?\s+(?=(is|was|are|were|has|had|have|did|does|do)\b)",
    re.I,
)


def choice_statement(question: str, answer: str) -> str | None:
    """A bare answer to a choice question as the statement it makes ("Which is in the pop genre,
    Capital Cities or Tweaker?" + "Tweaker" -> "Tweaker is in the pop genre."); None when the
    question offers no choice or its ask has no verb to take the answer."""
    choice = offered_choice(question)
    m = _ASKER.match(choice.ask) if choice else None
    if choice is None or m is None:
        return None
    said = answer.strip().rstrip(".")
    return f"{said[:1].upper()}{said[1:]} {choice.ask[m.end() :].strip()}."


def without_echo(question: str, response: str) -> str:
    """A choice answer without the other alternative echoed at its end: "Rogers Locomotive and
    Machine Works was based in Paterson, Magna Home Entertainment." -> "Rogers Locomotive and
    Machine Works was based in Paterson." The small generator repeats the question's tail after
    its pick; the claim it makes is what comes before. Any other response as it is."""
    choice = offered_choice(question)
    if choice is None:
        return response
    text = response.strip()
    for n, alternative in enumerate(choice.alternatives):
        m = re.search(rf",\s*{re.escape(alternative)}\s*\.?$", text, re.I)
        head = text[: m.start()].rstrip() if m else ""
        # Only where what precedes names the other alternative: then the tail picks nothing.
        if head and _find(choice.alternatives[1 - n], head) is not None:
            return f"{head}."
    return response


def _find(alternative: str, text: str) -> tuple[int, int] | None:
    """Where `text` names an alternative: the whole of it, else its longest name ("Doris Lessing"
    for "British novelist Doris Lessing"), case aside."""
    names = sorted({alternative, *(s for s in key_spans(alternative) if len(s) > 2)}, key=len, reverse=True)
    for name in names:
        m = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.I)
        if m:
            return m.start(), m.end()
    return None


def check_alternatives(
    swap: Swap, picked_claim: HypothesisVerdict, other_claim: HypothesisVerdict, entail: float
) -> AlternativeCheck:
    """The outcome from each alternative's support (the best single passage's P(entailment) of
    the answer's claim naming it; the joint premise never counts): the evidence supports the
    other and not the pick (disagrees), the pick and not the other (agrees), or both or neither
    (undecided)."""
    own, other = single_support(picked_claim), single_support(other_claim)
    outcome: Outcome = "undecided"
    if other >= entail > own:
        outcome = "disagrees"
    elif own >= entail > other:
        outcome = "agrees"
    support = (own, other) if swap.picked == 0 else (other, own)
    return AlternativeCheck(swap.alternatives, swap.picked, support, outcome)


def single_support(v: HypothesisVerdict) -> float:
    """A hypothesis' best P(entailment) over single passages (never the joint premise)."""
    return max((s.entail for s in v.scores if s.passage != "joint"), default=0.0)
