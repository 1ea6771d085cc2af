"""The checks that adjust what the NLI model says of one premise and one hypothesis.

The NLI model reads two texts and nothing else; it confuses subjects that share a shape. Each
check below reads what the two texts name and moves probability mass where the model cannot
be right, in this order:

  other_edition     a window about another edition of what the claim names by its edition
                    (another year's awards, another season) says nothing of it: neutral.
  role_of_another   a window that credits a role the claim credits to someone else (a cast
                    list) contradicts the claim: its entailment becomes contradiction.
  needs_name        a window that does not name what the claim is about cannot contradict
                    it: its contradiction becomes neutral (the model learned from image captions
                    that another subject is a contradiction). What it is about: the subject of a
                    claim saying what its subject is ("A was English."), else any of its names
                    and numbers.

Each is a setting (diagnosis.other_edition_is_neutral, role_of_another_refutes,
contradiction_needs_name). The joint premise is never read for names: it is gated as a whole
(premises.joint_may_support).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmend.diagnosis.editions import editions, other_edition
from ragmend.diagnosis.premises import JOINT
from ragmend.diagnosis.roles import claimed_roles, credited_roles, role_of_another
from ragmend.diagnosis.spans import key_spans, names_any, normalise

Probs = tuple[float, float, float]  # entail, neutral, contradict


@dataclass(frozen=True)
class Checks:
    """Which checks run (diagnosis settings of the same names)."""

    contradiction_needs_name: bool
    other_edition_is_neutral: bool
    role_of_another_refutes: bool


@dataclass(frozen=True)
class ClaimFacts:
    """What one hypothesis names, read once for all its premises."""

    names: list[str]
    editions: dict[str, frozenset[str]]
    roles: dict[str, frozenset[str]]


class PremiseFacts:
    """What each premise names, read at most once per answer, and only when a check needs it."""

    def __init__(self, premises: Sequence[tuple[str, str]]):
        self._premises = premises
        self._plain: dict[int, str] = {}
        self._editions: dict[int, dict[str, frozenset[str]]] = {}
        self._credited: dict[int, dict[str, frozenset[str]]] = {}

    def is_joint(self, i: int) -> bool:
        return self._premises[i][0] == JOINT

    def plain(self, i: int) -> str:
        if i not in self._plain:
            self._plain[i] = normalise(self._premises[i][1])
        return self._plain[i]

    def editions(self, i: int) -> dict[str, frozenset[str]]:
        if i not in self._editions:
            self._editions[i] = editions(self._premises[i][1])
        return self._editions[i]

    def credited(self, i: int) -> dict[str, frozenset[str]]:
        if i not in self._credited:
            self._credited[i] = credited_roles(self._premises[i][1])
        return self._credited[i]


def claim_facts(hypothesis: str, checks: Checks) -> ClaimFacts:
    return ClaimFacts(
        contradiction_names(hypothesis) if checks.contradiction_needs_name else [],
        editions(hypothesis) if checks.other_edition_is_neutral else {},
        claimed_roles(hypothesis) if checks.role_of_another_refutes else {},
    )


def contradiction_names(hypothesis: str) -> list[str]:
    """The names a window must hold one of for its contradiction of the claim to count: for a
    claim that says what its subject is ("H. G. Wells was English.", "A is located in Michigan."),
    the subject, since a passage about another subject shares the nationality or the place and the
    NLI model reads it as a contradiction; for any other claim every name and number it holds
    ("Morrow Holdings bought Quenton Ltd." is contradicted by a passage on Quenton Ltd's buyer)."""
    spans = key_spans(hypothesis)
    opening = hypothesis.lstrip().lstrip("\"\u201c'")
    opening = opening[4:] if opening.startswith("The ") else opening
    if spans and not spans[0][:1].isdigit() and opening.startswith(spans[0]):
        after = opening[len(spans[0]) :].split(maxsplit=1)
        if after and after[0] in ("is", "was", "are", "were"):
            return spans[:1]
    return spans


def adjusted(probs: Probs, claim: ClaimFacts, premise: int, facts: PremiseFacts) -> Probs:
    """The premise's probabilities for the claim after the checks, in their order."""
    e, n, c = probs
    if claim.editions and other_edition(claim.editions, facts.editions(premise)):
        e, n, c = 0.0, e + n + c, 0.0
    if claim.roles and role_of_another(claim.roles, facts.credited(premise)):
        e, c = 0.0, c + e
    if claim.names and not facts.is_joint(premise) and not names_any(claim.names, facts.plain(premise)):
        n, c = n + c, 0.0
    return e, n, c
