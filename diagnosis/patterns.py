"""The text patterns the diagnosis reads with, each written once: names, numbers, years and dates,
the abbreviations whose full stop ends no sentence, and where a sentence ends.

The surface checks (spans.py), the claim splitter (compound.py), the sentence splitter
(hypotheses.py) and the date reader (comparison.py) read these. Where two of them read the same
kind of thing differently, both readings are here side by side, each named and documented with how
and why it differs: each was fitted to what its caller does with the match, and merging them would
change what that caller reports (a key span, a split claim, a sentence, a date). tests/test_patterns.py
pins each pattern, and each difference between two variants.

Names are regular-expression source strings (to be composed into a caller's pattern); the ones a
caller uses as they are are compiled.
"""

from __future__ import annotations

import re

# -- names ----------------------------------------------------------------------------------------

# Lower-case words that may join the capitalised words of one name ("Bank of America", "Vincent van
# Gogh", "Center for Disease Control"). Never "and", which joins two names.
NAME_CONNECTORS = ("of", "de", "la", "von", "van", "du", "for")
_NAME_WORD = r"[A-Z][\w'\-.]*"

# The most words one name runs to. Bounded, so that a search over a long capitalised text tries a
# few words at each start, not the rest of the text (which made a 24k-character input take 20 s).
NAME_MAX_WORDS = 10

# A name: a run of capitalised words joined by spaces and at most one connector between two of them
# ("Gerald R. Ford International Airport"). The surface checks find every run in a text and look
# each up in the evidence, so a run stops at "the", "&" and a curly apostrophe: "Simon & Garfunkel"
# is two names, each to be found, not one span the evidence must state whole. Full stops are part
# of a word (initials, "St."), so a run may go on over a sentence end: spans cuts it there.
NAME = rf"{_NAME_WORD}(?:\s+(?:(?:{'|'.join(NAME_CONNECTORS)})\s+)?{_NAME_WORD}){{0,{NAME_MAX_WORDS - 1}}}"

# A person's full name as a cast list writes it in brackets after a role ("Rachel Green (Jennifer
# Aniston)"): two capitalised words or more, no connector, so that a one-word place ("(Missouri)")
# or a phrase ("(born 1994)", "(Bank of America)") is no performer.
FULL_NAME = rf"{_NAME_WORD}(?:\s+{_NAME_WORD}){{1,{NAME_MAX_WORDS - 1}}}"

# The connectors of NAME_LOOSE: NAME's less "for", with "le", "the" and "&".
NAME_LOOSE_CONNECTORS = ("of", "de", "la", "le", "von", "van", "du", "the", "&")
_NAME_LOOSE_WORD = r"[A-Z][\w'\u2019.\-]*"

# A name as the claim splitter reads a sentence's subject ("Ben & Jerry's and Simon & Schuster are
# ...", "John le Carré"). It differs from NAME where a name holds "the", "le", "&" or a curly
# apostrophe, and where "for" joins two capitalised runs (not joined here). The splitter matches the
# whole subject from the sentence's start to its verb, so a name this does not cover leaves the
# claim whole, the cautious outcome; NAME, searched anywhere, must instead not fuse two names.
NAME_LOOSE = (
    rf"{_NAME_LOOSE_WORD}(?:\s+(?:(?:{'|'.join(NAME_LOOSE_CONNECTORS)})\s+)?{_NAME_LOOSE_WORD})"
    rf"{{0,{NAME_MAX_WORDS - 1}}}"
)

# A title in double quotes, straight or curly ("Baby Driver"), its text captured: a name of a work
# whatever its case.
# The quotation marks a title or a name may be set in, straight and curly.
QUOTE_MARKS = "\"'\u201c\u201d\u2018\u2019"
QUOTED = r"[\"\u201c]([^\"\u201d]{2,80})[\"\u201d]"

# -- numbers --------------------------------------------------------------------------------------

# A number as a key span: a digit, or digits with commas and points inside ("1,200", "3.5"), never
# ending on one ("1990." is "1990"). No word boundary: it is an alternative of a run of names, which
# takes a word that starts capitalised ("F16") first; "x12" holds the number "12".
NUMBER_RUN = r"\d[\d,.]*\d|\d"

# A number as a word: a text's numbers (has a response the number asked for?) and whether a whole
# span is one (spans that are numbers name no one). It starts and ends at word boundaries, so it
# does not see "12" in "x12", and a point or comma before a letter stays in it ("1.a").
NUMBER = re.compile(r"\b\d[\d,.]*\b")

# A number in words ("three", "dozens", "a million"), which answers "how many" as digits do.
NUMBER_WORD = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
    r"|dozens?|hundreds?|thousands?|millions?|billions?)\b",
    re.I,
)

# -- years, months, dates -------------------------------------------------------------------------

# A year from 1000 to 2099, ASCII digits.
YEAR = r"1[0-9]{3}|20[0-9]{2}"
# The same years, the digits after the leading "1" or "20" in any script (Python's \d): the date
# reader's. The two differ only where those digits are of another script ("1٩٧١", which int()
# reads as 1971); kept apart so neither the date reader nor the year check changes what it takes.
YEAR_ANY_DIGITS = r"1\d{3}|20\d{2}"

# A year in a text, not inside a longer run of digits; captured. The question and the answer are
# read alike, so a year is any such run ("$1999" and "1,2005" hold one), unlike DATE's bare year.
YEAR_IN_TEXT = re.compile(rf"(?<!\d)({YEAR})(?!\d)")

MONTHS = (
    *("january", "february", "march", "april", "may", "june"),
    *("july", "august", "september", "october", "november", "december"),
)
# A month's abbreviations as written before a day or year ("Apr. 9, 1865"); "May" has none.
MONTH_ABBREVIATIONS = ("Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec")

# A mention of a time, as an answer to "when" gives one: a year or decade ("1990", "1990s"), a
# century ("19th century", "nineteenth century"), a month or a season. Any case.
TIME = re.compile(
    r"\b(\d{3,4}s?|(\d{1,2}|\w+)(st|nd|rd|th)?\s+century|"
    + "|".join(MONTHS)
    + r"|spring|summer|autumn|fall|winter)\b",
    re.I,
)


def _month(group: str) -> str:
    """A month's name or abbreviation, capitalised (a full stop after it allowed), as `group`."""
    return f"(?P<{group}>{'|'.join([*(m.capitalize() for m in MONTHS), *MONTH_ABBREVIATIONS])})" + r"\.?"


def _year(group: str) -> str:
    return f"(?P<{group}>{YEAR_ANY_DIGITS})"


# A date as precise as a text gives it, the first alternative that fits at the first place one
# does: month day year, day month year, month year, or a bare year. Groups m1-m3, d1-d2, y1-y4. A
# bare year is no part of a number or an amount: not after a digit, comma, point or "$", nor before
# a digit or a comma and a digit ("1,971,000", "$1971").
DATE = re.compile(
    "|".join(
        [
            _month("m1") + r"\s+(?P<d1>\d{1,2}),?\s+" + _year("y1"),  # June 20, 1941
            r"(?P<d2>\d{1,2})\s+" + _month("m2") + r",?\s+" + _year("y2"),  # 7 April 1941
            _month("m3") + r",?\s+" + _year("y3"),  # April 1941
            r"(?<![\d,.$])" + _year("y4") + r"(?![\d,]\d)",  # a 1971 film
        ]
    )
)

# -- abbreviations --------------------------------------------------------------------------------

# Titles before a name, whose full stop ends no sentence ("Mr. Spock", "Dr. McCoy", "Martin Luther
# King Jr."): all three readings of a sentence end below know these.
TITLES = ("Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr")
# Ranks and offices before a name ("Gen. Lee", "Sen. Smith", "Prof. Higgins").
RANKS = ("Gen", "Gov", "Sen", "Rep", "Col", "Capt", "Lt", "Sgt", "Prof", "Rev", "Hon")

# What split_sentences does not end a sentence after (a single capital, an initial, too): the
# widest list, since it splits whole answers and passages into the claims and windows that are
# judged one by one, and a sentence cut after "Vol." or "Inc." is two claims neither of which says
# what the sentence does. Case as written.
SENTENCE_ABBREVIATIONS = (
    *TITLES,
    *("Inc", "Ltd", "Co", "Corp", "Bros"),  # companies
    *("vs", "No", "Nos", "Mt", "Ft", "U.S"),
    *("Vol", "Vols", "Op", "Pt", "Ch", "Fig"),  # volumes and parts of works
    *RANKS,
    *("Cpl", "Adm"),
    *("Ave", "Blvd", "Dept", "Univ"),  # addresses and institutions
    *MONTH_ABBREVIATIONS,
    *("approx", "ca", "cf", "pp", "e.g", "i.e"),
)

# What a passage's opening sentence (comparison.opening_sentence) does not end after (an initial of
# either case, too: "c." is circa): the titles, circa and "No.", "vs." before the date an
# encyclopaedic opening gives ("Dr. Ulf Merbold (born June 20, 1941)", "Zbigniew Firlej (c.
# 1613-1649)"). A shorter list than SENTENCE_ABBREVIATIONS: the opening sentence is where a date is
# read from, and a longer list would move that sentence's end.
OPENING_ABBREVIATIONS = (*TITLES, "c", "ca", "No", "vs")

# What ends no name run (spans' cut of a capitalised run at its sentence's end), compared in lower
# case: titles and ranks before a name, "Fr." (Father), "Mt.", "Ft.", "No.", "vs.". A letter and
# its full stop ("R.") never ends a run there, so no initial is listed.
NAME_ABBREVIATIONS = frozenset(a.lower() for a in (*TITLES, *RANKS, "Mt", "Ft", "No", "vs", "Fr"))


def _ending_in(abbreviations: tuple[str, ...], initial: str) -> re.Pattern[str]:
    """A text that ends in an initial (one of the characters `initial`) or one of `abbreviations`,
    with its full stop."""
    words = "|".join(re.escape(a) for a in abbreviations)
    return re.compile(rf"(?:\b[{initial}]|\b(?:{words}))\.$")


# -- sentence ends --------------------------------------------------------------------------------

# Where split_sentences may end a sentence: after . ! ? and space, before a capital, a digit, a
# quote or a bracket; and at any line break, since chat answers put a preamble ("Here is an
# overview:"), paragraphs and list items on lines of their own. A piece before it that ends in
# ABBREVIATION_END is no sentence yet.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\s*\n\s*")
ABBREVIATION_END = _ending_in(SENTENCE_ABBREVIATIONS, "A-Z")

# Where a passage's opening sentence may end: only after a full stop and space, before a capital
# or a double quote: never before a digit ("born c. 1613", "No. 5"), nor at "!", "?" or a line
# break without a full stop. The first sentence of an encyclopaedic passage is read for its date,
# which often follows such an abbreviation, and a cut there loses the date. A text before it that
# ends in OPENING_ABBREVIATION_END goes on.
OPENING_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z\"\u201c])")
OPENING_ABBREVIATION_END = _ending_in(OPENING_ABBREVIATIONS, "A-Za-z")


def ends_name_run(word: str) -> bool:
    """Whether a word of a capitalised run (NAME) ends its sentence, so the name with it: a word
    of three characters or more, its full stop the last, that is no NAME_ABBREVIATIONS
    ("President." ends "Vice President. Obama"; "R." in "Gerald R. Ford" and "Mr." in "Mr. Spock"
    do not). A run holds no "!" or "?", so a word's full stop is the only end read."""
    return word.endswith(".") and len(word) > 2 and word[:-1].lower() not in NAME_ABBREVIATIONS


# -- a question's opening word --------------------------------------------------------------------

# The words that open a question asking for something, and the auxiliary verbs that open one asked
# yes or no ("Were both ...?"). What a question asks is read from its first word, in one place.
QUESTION_WORDS = frozenset(("who", "whom", "whose", "what", "when", "where", "which", "why", "how"))
AUXILIARIES = frozenset(
    (
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "has",
        "have",
        "had",
        "will",
        "would",
        "should",
    )
)


def opening_word(text: str) -> str:
    """A text's first word in lower case, as a regular expression's `^\\s*(\\w+)\\b` reads it
    ("Who's" -> "who", "Whoever" -> "whoever"); "" when it opens with no word character."""
    rest = text.lstrip()
    end = 0
    while end < len(rest) and (rest[end].isalnum() or rest[end] == "_"):
        end += 1
    return rest[:end].lower()
