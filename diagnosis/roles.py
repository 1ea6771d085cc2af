"""Roles credited to performers ("Charles Bronson as Captain Jack"): a passage that credits a
claim's role to someone else contradicts the claim (diagnosis/adjust.py)."""

from __future__ import annotations

import re

from ragmend.diagnosis.patterns import (
    FULL_NAME,
    NAME,
)
from ragmend.diagnosis.spans import (
    found_in,
    normalise,
    trimmed,
    within_sentence,
)

# A role credited to a performer. In a passage: a cast list's "Charles Bronson as Captain Jack",
# or "Captain Jack, played by Charles Bronson". In a claim, which credits a role only with a verb of
# performing (so "served as President" credits none): "Audrey Dalton played Captain Jack", "...
# starred as ...", "Captain Jack was played by ...".
_PERFORMED = (
    r"(?:play(?:s|ed)|portray(?:s|ed)|voic(?:es|ed)|star(?:s|red)\s+as|appear(?:s|ed)\s+as"
    r"|(?:was|is)\s+cast\s+as)"
)
_ROLE_THE = r"(?:(?:the\s+)?(?:role|part|character)\s+of\s+)?(?:the\s+)?"
_BY = r"(?:played|portrayed|voiced)\s+by"
_CREDIT = re.compile(
    rf"(?P<who>{NAME})\s+as\s+(?:the\s+)?(?P<role>{NAME})"
    rf"|(?P<role2>{NAME}),?\s+{_BY}\s+(?P<who2>{NAME})"
    # A cast in brackets, "Rachel Green (Jennifer Aniston), Phoebe Buffay (Lisa Kudrow), ...": a
    # name of two words or more alone in them (patterns.FULL_NAME), an item of a list ("(Missouri)",
    # "(born 1994)" and a title's "Joker (The Dark Knight):" credit nothing).
    rf"|(?P<role3>{NAME})\s+\((?P<who3>{FULL_NAME})\)(?=[,;]|\s+and\b)"
)
_CLAIMED_ROLE = re.compile(
    rf"(?P<who>{NAME})\s+{_PERFORMED}\s+{_ROLE_THE}(?P<role>{NAME})"
    rf"|(?P<role2>{NAME})\s+(?:was|is)\s+{_BY}\s+(?P<who2>{NAME})"
)


# A cast list is about a performance: "X as Y" credits a role only with one of these words near
# it, since elsewhere it names an office or a post ("named Smith as Arsenal captain"), and a
# claim that a team "played Arsenal" must not meet it as a role.
_CAST_CUE = re.compile(
    r"\b(?:(?:co-?)?star(?:s|red|ring)?|cast|film|movie|series|sitcom|show|musical|opera|role"
    r"|episodes?|drama|voiced|portray(?:s|ed)?)\b",
    re.I,
)


def _roles(pattern: re.Pattern[str], text: str, cue: bool = False) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for m in pattern.finditer(text):
        form = next(n for n in ("", "2", "3") if m.group("role" + n) is not None)
        # "Y, played by X" speaks of a performance itself; "X as Y" and "Y (X)" need a word that
        # does.
        if cue and form != "2" and not _CAST_CUE.search(text, max(0, m.start() - 200), m.end() + 100):
            continue
        role = normalise(trimmed(within_sentence(m.group("role" + form))))
        who = normalise(trimmed(within_sentence(m.group("who" + form))))
        if role and who and role != who:
            found.setdefault(role, set()).add(who)
    return {role: frozenset(names) for role, names in found.items()}


def claimed_roles(claim: str) -> dict[str, frozenset[str]]:
    """The roles a claim credits to performers: "Audrey Dalton played Captain Jack in Drum
    Beat." -> {"captain jack": {"audrey dalton"}}."""
    return _roles(_CLAIMED_ROLE, claim)


def credited_roles(text: str) -> dict[str, frozenset[str]]:
    """The roles a passage credits to performers where it speaks of a performance: "Ladd stars
    along with ... Charles Bronson as Captain Jack, and Hayden Rorke as President Ulysses S.
    Grant." -> {"captain jack": {"charles bronson"}, "president ulysses s grant": {"hayden
    rorke"}}."""
    return _roles(_CREDIT, text, cue=True)


def _same_name(a: str, b: str) -> bool:
    """Two normalised names for one bearer: equal, or one holds most of the other's words ("Grant"
    and "Ulysses S Grant", "Dalton" and "Audrey Dalton")."""
    return found_in(a, b) or found_in(b, a)


def role_of_another(claim: dict[str, frozenset[str]], text: dict[str, frozenset[str]]) -> bool:
    """Whether a passage (its `credited_roles`) credits a role the claim credits (its
    `claimed_roles`) to someone else, and not also to the claim's performer: the cast list's
    "Charles Bronson as Captain Jack" against "Audrey Dalton played Captain Jack"."""
    for role, performers in claim.items():
        credited = [names for r, names in text.items() if _same_name(role, r)]
        if credited and not any(_same_name(p, n) for names in credited for n in names for p in performers):
            return True
    return False
