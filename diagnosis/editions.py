"""Editions of a name ("the 31st Golden Globe Awards"): a text about another edition of what a
claim names by its edition is about another subject (diagnosis/adjust.py reads it as neutral)."""

from __future__ import annotations

import re

from ragmend.diagnosis.patterns import (
    NAME,
)
from ragmend.diagnosis.spans import (
    normalise,
    within_sentence,
)

# A name qualified by its edition: an ordinal ("31st Golden Globe Awards", "2nd Battalion") or a
# year after "the" ("the 2010 Commonwealth Games"). A bare year before a name is left alone: "In
# 1998 Microsoft released ..." dates an event, it does not name an edition of Microsoft.
_EDITION = re.compile(rf"(?:\b(\d{{1,4}})(?:st|nd|rd|th)|\b(?i:the)\s+(\d{{4}}))\s+({NAME})")


def editions(text: str) -> dict[str, frozenset[str]]:
    """The editioned names a text holds, each with the editions it names: "The 31st Golden Globe
    Awards ..." -> {"golden globe awards": {"31"}}."""
    found: dict[str, set[str]] = {}
    for m in _EDITION.finditer(text):
        name = normalise(within_sentence(m.group(3)).rstrip(".,'"))
        if name:
            found.setdefault(name, set()).add(m.group(1) or m.group(2))
    return {name: frozenset(numbers) for name, numbers in found.items()}


def other_edition(claim: dict[str, frozenset[str]], text: dict[str, frozenset[str]]) -> bool:
    """Whether a text (its `editions`) is about another edition of something a claim names by its
    edition: it names the name, only with other numbers ("The 51st Golden Globe Awards ... were
    held on January 22, 1994." for a claim about the 31st). What it says is of another subject."""
    return any(name in text and not numbers & text[name] for name, numbers in claim.items())
