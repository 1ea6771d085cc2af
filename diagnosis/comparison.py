"""Comparisons in time ("Who is older, A or B?", "Which came out first, A or B"), checked hop by hop.

Such a question is answered by two facts in two passages (each alternative's date) and one step
of reasoning the NLI model does not take: "The Muppet Christmas Carol is older." is neutral to a
passage saying it is a 1992 film and to one saying Bedknobs and Broomsticks is a 1971 film, and
the joint premise cannot be trusted to compare years. Here each alternative's date is read from
the opening sentence of its own passage (where an encyclopaedic text gives a birth date, a
release or founding year), the two are compared, and the result is set against the alternative
the answer picks (choices.picked_alternative): the passages' dates agree with the pick, disagree,
or do not decide (a passage or a date missing, two dates of the same year without months).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from ragmend.diagnosis.choices import offered_choice, picked_alternative
from ragmend.diagnosis.patterns import (
    DATE,
    MONTHS,
    OPENING_ABBREVIATION_END,
    OPENING_SENTENCE_END,
    opening_word,
)
from ragmend.diagnosis.spans import key_spans, names_unasked, normalise
from ragmend.diagnosis.types import ComparisonCheck, Date, Direction, Outcome

# A name -> the corpus's passages (title, text) titled by it (title_key): each document's opening
# passage, so an alternative the retrieval missed can still be dated.
TitleLookup = Callable[[str], Sequence[tuple[str, str]]]

# What a question asks of the two alternatives' dates. "older" needs no verb; "first" does (a
# "first" that is a rank, "Which came first in the race", is not a date); a question about a
# death, an end, an age at some time or a rank compares something else than the opening date.
_SELF_TEMPORAL: dict[str, Direction] = {
    **dict.fromkeys(["older", "oldest", "elder"], "earlier"),
    **dict.fromkeys(["younger", "youngest", "newer", "newest"], "later"),
}
_ORDER_WORDS = re.compile(
    r"\b(?P<earlier>first|earlier|earliest|sooner)\b"
    r"|\b(?P<later>later|latest|last|more recent(?:ly)?|most recent(?:ly)?)\b",
    re.I,
)
_TEMPORAL_VERB = re.compile(
    r"\b(born|found(?:ed)?|establish(?:ed)?|formed|form|created?|released?|came|come|publish(?:ed)?|"
    r"opened|built|started|began|begun|premiered|debuted|aired|launched|introduced|made|produced|"
    r"completed|incorporated|occurred|happened|took place|fought|signed|discovered|invented|written|"
    r"wrote|erected|constructed|developed|recorded|composed|held|named|designed)\b",
    re.I,
)
_OTHER_TIME = re.compile(
    r"\b(died|die|death|dead|retired?|ended|end|closed|disbanded|dissolved|when they|at the time"
    r"|race|place|placed|rank|ranked|position|finish|finished|alphabetical(?:ly)?)\b",
    re.I,
)

_OPENING_CHARS = 400
_PAREN = re.compile(r"\s*\([^)]*\)")
_WORK = re.compile(
    r"\b(album|song|single|film|movie|novel|book|play|band|group|series|show|ep|magazine|game|ship|opera)\b",
    re.I,
)


def time_direction(ask: str) -> Direction | None:
    """Whether a choice question asks for the earlier or the later date, None when it asks
    something else ("Which band has more members", "Who died first")."""
    if _OTHER_TIME.search(ask):
        return None
    words = normalise(ask).split()
    for w in words:
        if w in _SELF_TEMPORAL:
            return _SELF_TEMPORAL[w]
    m = _ORDER_WORDS.search(ask)
    if m is None or not _TEMPORAL_VERB.search(ask):
        return None
    return "earlier" if m.group("earlier") else "later"


def opening_sentence(text: str) -> str:
    """A passage's first sentence (at most _OPENING_CHARS characters): it ends at a full stop
    before a capital, not after an initial or a title ("Dr. Ulf Merbold", "c. 1613", "Gerald R.
    Ford": patterns.OPENING_SENTENCE_END, OPENING_ABBREVIATION_END)."""
    head = text[:_OPENING_CHARS]
    for m in OPENING_SENTENCE_END.finditer(head):
        if not OPENING_ABBREVIATION_END.search(head[: m.start()]):
            return head[: m.start()]
    return head


def first_date(text: str) -> Date | None:
    """The first date a text gives, as precise as it gives it (patterns.DATE)."""
    m = DATE.search(text)
    if m is None:
        return None
    g = {k: v for k, v in m.groupdict().items() if v}
    year = int(next(v for k, v in g.items() if k.startswith("y")))
    month_name = next((v.lower()[:3] for k, v in g.items() if k.startswith("m")), None)
    month = (
        next((i + 1 for i, name in enumerate(MONTHS) if name.startswith(month_name)), 0) if month_name else 0
    )
    day = int(next((v for k, v in g.items() if k.startswith("d")), "0"))
    return Date(year, month, day if 0 < day <= 31 else 0)


def _is_about(alternative: str, title: str, opening: str, person: bool) -> bool:
    """The passage is the alternative's own: its title (a "(film)" qualifier aside) is the
    alternative or a whole name within it, and its opening sentence names it. Asked about people
    ("Who is younger"), a title qualified as a work is not the person's ("Lionel Richie (album)")."""
    if person and (q := _PAREN.search(title)) and _WORK.search(q.group(0)):
        return False
    t = title_key(title)
    # The alternative's own name, or one whole name within it ("Doris Lessing" in "British
    # novelist Doris Lessing"); part of a name is another's ("William Henry" for "John William
    # Henry II").
    if not t or t not in {normalise(k) for k in lookup_keys(alternative)}:
        return False
    said = f" {normalise(opening)} "
    words = t.split()
    return sum(f" {w} " in said for w in words) * 2 > len(words)  # "Dr. Ulf Dietrich Merbold"


def title_key(title: str) -> str:
    """How a passage's title is looked up: normalised, its "(film)" qualifier dropped."""
    return normalise(_PAREN.sub("", title))


def title_lookup(pages: Iterable[tuple[str, str]]) -> TitleLookup:
    """A TitleLookup over (title, opening text) pages: a name finds the pages its title_key titles."""
    table: dict[str, list[tuple[str, str]]] = {}
    for title, text in pages:
        table.setdefault(title_key(title), []).append((title, text))
    return lambda name: table.get(title_key(name), [])


def lookup_keys(alternative: str) -> list[str]:
    """The names an alternative's own page may be titled by, its whole text first, then each
    whole name in it (the lookup and _is_about normalise them with title_key)."""
    return list(dict.fromkeys(k for k in (alternative, *key_spans(alternative)) if normalise(k)))


def date_of(alternative: str, passages: Sequence[tuple[str, str]], person: bool = False) -> Date | None:
    """The date an alternative's own passage opens with (a birth date, a release or founding
    year), None when no passage retrieved is its own or its opening gives no date."""
    for title, text in passages:
        opening = opening_sentence(text)
        if _is_about(alternative, title, opening, person) and (date := first_date(opening)):
            return date
    return None


def _order(a: Date, b: Date) -> int | None:
    """-1, 0 or 1 as a is before, the same as or after b; None where precision runs out."""
    for x, y in ((a.year, b.year), (a.month, b.month), (a.day, b.day)):
        if not x or not y:
            return None
        if x != y:
            return -1 if x < y else 1
    return 0


def check_comparison(
    question: str,
    response: str,
    passages: Sequence[tuple[str, str]],
    titled: TitleLookup | None = None,
) -> ComparisonCheck | None:
    """The passages' dates against the answer's pick, for a choice question in time that the
    answer answers by naming one alternative; None for any other question or answer. With
    `titled` (the corpus's passages titled by a name), an alternative whose own page was not
    retrieved is dated from the corpus: the second hop is looked up, as a person checking the
    answer would."""
    choice = offered_choice(question)
    direction = time_direction(choice.ask) if choice else None
    picked = picked_alternative(question, response) if direction else None
    if choice is None or direction is None or not isinstance(picked, int):
        return None
    if _answer_direction(response) not in (None, direction):  # "A is younger than B" asked "older"
        picked = 1 - picked
    person = opening_word(question) in ("who", "whom")
    dates_found, looked_up = [], []
    for alt in choice.alternatives:
        date = date_of(alt, passages, person)
        from_corpus = False
        if date is None and titled is not None:
            # Its whole name first: a name within it ("Bedknobs" of "Bedknobs and Broomsticks")
            # may title another page.
            pages = next((found for key in lookup_keys(alt) if (found := titled(key))), [])
            date = date_of(alt, pages, person)
            from_corpus = date is not None
        dates_found.append(date)
        looked_up.append(from_corpus)
    dates = (dates_found[0], dates_found[1])
    order = _order(dates[0], dates[1]) if dates[0] and dates[1] else None
    expected = None if not order else (0 if (order < 0) == (direction == "earlier") else 1)
    outcome: Outcome = "undecided" if expected is None else "agrees" if expected == picked else "disagrees"
    return ComparisonCheck(
        alternatives=choice.alternatives,
        direction=direction,
        dates=dates,
        expected=expected,
        picked=picked,
        outcome=outcome,
        from_corpus=(looked_up[0], looked_up[1]),
    )


def _answer_direction(response: str) -> Direction | None:
    """The direction an answer's own words state ("older", "came out first"), if one."""
    said = normalise(response).split()
    found: set[Direction] = {_SELF_TEMPORAL[w] for w in said if w in _SELF_TEMPORAL}
    m = _ORDER_WORDS.search(response)
    if m:
        found.add("earlier" if m.group("earlier") else "later")
    return next(iter(found)) if len(found) == 1 else None


def only_the_pick(query: str, claims: Sequence[str]) -> bool:
    """An answer that is its pick alone: at most one claim, naming nothing the question does not
    (a number aside: "born first, in 1881")."""
    return len(claims) <= 1 and not any(names_unasked(c, normalise(query)) for c in claims)
