"""Whether an answer is about what was asked: its subject, its relation, the kind of answer asked
for, the year the question set, the answers it offered, or only the question's own words
(`unaddressed`, one of the diagnosis' failure signals)."""

from __future__ import annotations

import re

from ragmend.diagnosis.choices import offered_choice, picked_alternative
from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.diagnosis.patterns import (
    AUXILIARIES,
    NUMBER,
    NUMBER_WORD,
    QUESTION_WORDS,
    QUOTED,
    TIME,
    YEAR_IN_TEXT,
    opening_word,
)
from ragmend.diagnosis.spans import (
    COMMON_WORDS,
    content_words,
    found_in,
    is_bare,
    key_spans,
    normalise,
)
from ragmend.diagnosis.types import OffQuestion
from ragmend.diagnosis.wordforms import has_verb, stem

# What a question asks a number of: a "how many" or a measure, as its question word or later on
# ("... has how many members?", "What was the population of the town ...?").
_MEASURES = (
    "height|length|elevation|altitude|distance|age|depth|population|speed|capacity|weight|area"
    "|temperature|percentage|size|width|amount"
)
_EXPECTS_NUMBER = re.compile(
    r"^\s*(how (many|much|old|long|tall|far|big|high|deep|wide|large|heavy|fast)"
    rf"|(?:(?:at|to|of|from|by)\s+)?what ({_MEASURES}))\b"
    r"|\bhow (many|much)\b"
    rf"|\bwhat (is|was|were) (the|its|his|her|their) ({_MEASURES})\b",
    re.I,
)
# "When" asks for a time only as a question word ("When did ...?"): "When you have a bowel
# movement, do you lose weight?" (a RAGTruth QA question) sets a condition and asks yes or no. A
# year, date, century or decade is asked anywhere ("... founded in what year?", "... served during
# what years?").
_EXPECTS_TIME = re.compile(
    r"^\s*(when\s+(is|was|were|are|did|does|do|will|would|could|can|has|have|had)|on what day)\b"
    r"|\b(what|which) (years?|date|century|decade)\b"
    r"|\bwhat (is|was) (the|his|her|their) (birthday|birth date|date of birth)\b",
    re.I,
)


# A task over text the request itself gives ("Summarize the following news.", "Write an overview
# of the local business in the provided JSON data."): its subject is that text, and the words
# that are capitalised in it ("Summarize", "JSON") name nothing the answer must restate. Without
# this, nearly every summary and data-to-text answer read as "off the question", whatever its
# support.
_GIVEN_TEXT = re.compile(
    r"\b(?:the\s+(?:following|provided|given|above|below|attached)"
    r"|th(?:is|ese)\s+(?:article|text|passage|document|news|data|record|review|story|report|email)s?)\b",
    re.I,
)


def is_instruction(query: str) -> bool:
    """The request is a task over text it gives (no question mark, and it points at "the
    following", "the provided", "this article" ...), not a question about a named subject."""
    return "?" not in query and bool(_GIVEN_TEXT.search(query))


def asked_spans(question: str) -> list[str]:
    """The names and numbers a question asks about: its key spans, none for a task over a given
    text (its capitalised words, "Summarize", "JSON", name nothing an answer must restate)."""
    return [] if is_instruction(question) else key_spans(question)


def has_kind_asked(question: str, response: str) -> bool:
    """The response has the kind of answer the question asks for: a date or year for "when", a
    number for "how many"; True when the question asks for no kind. A sentence's date or number
    counts only when the question does not already hold it: "When did the tour begin for the
    album released on October 22, 2012?" is not answered by "The tour began for the album
    released on October 22, 2012." (a bare span is the answer, whatever it repeats)."""
    patterns: tuple[re.Pattern[str], ...]
    if _EXPECTS_TIME.search(question):
        patterns = (TIME,)
    elif _EXPECTS_NUMBER.search(question):
        patterns = (NUMBER, NUMBER_WORD)
    else:
        return True
    bare = is_bare(response)
    for pattern in patterns:
        asked = set() if bare else {m.group(0).lower() for m in pattern.finditer(question)}
        if any(m.group(0).lower() not in asked for m in pattern.finditer(response)):
            return True
    return False


def other_year(question: str, response: str) -> bool:
    """The answer dates what the question dated otherwise: the question holds a year as a
    condition ("what 2016 Punjabi film directed by Smeep Kang?", "born in 1984 and played as a
    rookie ... in 2007") and does not ask for a time, and the sentence answering it names a year
    that is not the question's where it names none of the question's ("... Chak De Phatte
    (2008)."), or puts another year in the question's own words ("born in 1946"). An answer about
    another film, season or person often shows itself this way first. A choice question's years
    date its alternatives, not a condition, and a bare answer has no years to compare."""
    if _EXPECTS_TIME.search(question) or offered_choice(question) is not None or is_bare(response):
        return False
    asked = {m.group(0) for m in YEAR_IN_TEXT.finditer(question)}
    said = {m.group(0) for m in YEAR_IN_TEXT.finditer(response)}
    if not asked or not said - asked:
        return False
    if not said & asked:
        return True
    # A year in the question's own words: the two words before it ("born in").
    before_asked = {_words_before(question, m.start()) for m in YEAR_IN_TEXT.finditer(question)}
    return any(
        m.group(0) not in asked and _words_before(response, m.start()) in before_asked
        for m in YEAR_IN_TEXT.finditer(response)
    )


def _words_before(text: str, at: int, n: int = 2) -> tuple[str, ...]:
    return tuple(w.lower() for w in re.findall(r"[A-Za-z]+", text[:at])[-n:])


# A quoted title a relation is placed in: "in \"Baby Driver\"", "in the highly rated comedy-drama
# television series \"Death in Paradise\"" (up to six words between "in" and the title).
_IN_TITLE = re.compile(rf"\bin\s+(?:[\w'-]+\s+){{0,6}}?{QUOTED}")


def other_work(question: str, response: str) -> bool:
    """The answer places what the question asks in another work: the question asks about a role,
    a song or a season in one quoted title, the answer states it in another and never names the
    question's ("What is the profession of Ansel Elgort's character in \"Baby Driver\"?" ->
    "Ansel Elgort played Tommy Ross in the horror film \"Carrie\"."): an answer about something
    else that the subject check misses, since it restates the question's person."""
    asked = [t.strip(" ?.,").lower() for t in _IN_TITLE.findall(question)]
    said = [t.strip(" ?.,").lower() for t in _IN_TITLE.findall(response)]
    text = response.lower()
    return bool(asked and said) and not any(t in text for t in asked) and not any(t in asked for t in said)


def answer_relevance(question: str, response: str) -> tuple[float, float]:
    """(entity overlap, type match) of a response to a question.

    Entity overlap: the share of the question's key spans the response names (a sentence answer
    restates its subject; one about another person, place or work does not). 1.0 when the
    question names nothing or the response is a bare span (a bare "Canberra" answers "What is the
    capital of Australia?" without naming Australia).
    Type match: 1.0 when the response has the kind of answer asked for (a number for "how many",
    a date or year for "when"), 0.0 when it lacks it, 1.0 when the question asks for no kind.
    An instruction over a given text asks about no name (asked_spans): overlap 1.0."""
    spans = asked_spans(question)
    bare = is_bare(response)
    overlap = 1.0
    if spans and not bare:
        said = normalise(response)
        overlap = sum(found_in(s, said) for s in spans) / len(spans)
    return overlap, float(has_kind_asked(question, response))


_PRONOUNS = frozenset(["he", "she", "it", "they", "his", "her", "its", "their", "this", "these", "those"])


def off_topic(question: str, response: str) -> bool:
    """The response is about something else: the question names things, the response (a sentence,
    not a bare span) names none of them and names other things instead ("When was Marie Curie
    born?" -> "Marsha Albert was born 1948."). A response naming nothing ("He was born in 1867.")
    or one opening with a pronoun ("She was born in Warsaw.") is not judged here: the pronoun
    may stand for the question's subject. Nor is an instruction over a given text (asked_spans)."""
    asked = asked_spans(question)
    words = response.split()
    if not asked or is_bare(response) or words[0].lower().strip(",") in _PRONOUNS:
        return False
    # A name or a list of names with no verb ("Nebraska Cornhuskers women's basketball team.",
    # "In Japan and Hong Kong.") answers a question asking for a name: it is an answer span, not
    # a sentence about something else. Asked for a time or a number, names beside one still are
    # ("When did Andrew Jaspan found The Conversation?" -> "Richard Hornsby Elsham in
    # Lincolnshire 4 June 1790.").
    asks_kind = bool(_EXPECTS_TIME.search(question) or _EXPECTS_NUMBER.search(question))
    if not asks_kind and not has_verb([w.strip('.,;:!?"()') for w in words]):
        return False
    said = normalise(response)
    if any(found_in(s, said) or _leading_part(s, said) for s in asked):
        return False
    # A number or a month is no name: "The tour began on March 13, 2013." names no one else.
    return any(not NUMBER.fullmatch(s) and not TIME.fullmatch(s) for s in key_spans(response))


def _leading_part(span: str, said: str) -> bool:
    """A long name's first two words, as a shortened name ("VMF-213" for "VMF-213 Marine
    Fighting Squadron"; _found's "most of its words" asks for more)."""
    words = normalise(span).split()
    return len(words) >= 3 and f" {words[0]} {words[1]} " in f" {said} "


# Relations a question asks about and an answer can state instead, each as the word forms that
# name it. Only relations with few synonyms outside their own family are listed: "lives in" vs
# "population" would be a different family for the same fact, so places and sizes are left out.
_RELATION_FORMS = {
    "birth": "born birth births birthday birthplace",
    "death": "died die dies dying death deaths dead killed",
    "founding": "found founded founder founders founding cofounded cofounder establish established "
    "establishes establishment launched launch formed formation incorporated",
    "discovery": "find finds found discover discovered discovers discovery discoverer",
    "marriage": "married marry marries marriage wife husband spouse wed wedding",
    "release": "released release releases premiered premiere published publish publication aired "
    "debuted debut",
    "authorship": "wrote written write writes writer writers author authored penned",
    "direction": "directed direct directs director",
    "composition": "composed compose composes composer",
    "education": "studied study studies graduated graduate attended attend educated education alumnus "
    "alumna alumni",
    "award": "won win wins awarded award awards prize",
}
_RELATION_OF: dict[str, frozenset[str]] = {}
for _family, _forms in _RELATION_FORMS.items():
    for _form in _forms.split():
        _RELATION_OF[_form] = _RELATION_OF.get(_form, frozenset()) | {_family}


def relations(text: str) -> frozenset[str]:
    """The relations (_RELATION_FORMS families) a text names, outside its names: "Ford Founders
    Hall" names no founding."""
    names = {w for s in key_spans(text) for w in normalise(s).split()}
    words = [w for w in normalise(text).split() if w not in names]
    return frozenset().union(*(_RELATION_OF.get(w, frozenset()) for w in words))


def other_relation(question: str, response: str) -> bool:
    """The response states another relation than the one asked: the question names relations,
    the response (a sentence, not a bare span) names none of them and names another ("When did
    Andrew Jaspan found it?" -> "Andrew Jaspan was born on April 20, 1952."). A response naming
    no listed relation ("It started in 2011.") is not judged here, nor an instruction over a
    given text."""
    if is_bare(response) or is_instruction(question):
        return False
    asked, said = relations(question), relations(response)
    return bool(asked) and bool(said) and not asked & said


def wrong_kind(question: str, response: str) -> bool:
    """The question asks for a time or a number and the response gives none ("How long is the
    bridge ...?" -> "The bridge ... connects Copenhagen and Malmo."): whatever a passage says of
    it, it is not the kind of answer asked for. An abstention gives no answer to judge."""
    return not has_kind_asked(question, response) and not is_abstention(response)


# A question that asks yes or no, or offers its answers ("Which is older, A or B?"), is answered
# in its own words; any other is not answered by a sentence made only of them.
_CHOICE = re.compile(r"\bor\b", re.I)
_POSSESSIVE = re.compile(r"['\u2019]s\b")


def _is_question(text: str) -> bool:
    """It asks: a question mark, or a question word first (HotpotQA drops some marks); a claim to
    verify does not."""
    return "?" in text or opening_word(text) in QUESTION_WORDS


def asks_question(query: str) -> bool:
    """The request asks a question (a question mark, or a question word first), and is no task
    over a text it gives."""
    return _is_question(query) and not is_instruction(query)


def asks_yes_no(question: str) -> bool:
    """The question opens with an auxiliary verb ("Are both ...", "Did ..."): yes or no answers it."""
    return opening_word(question) in AUXILIARIES


def restates_question(question: str, response: str) -> bool:
    """The response only restates the question: a sentence whose every content word the question
    already holds and which names nothing the question does not ("... represented what public
    research university in Lubbock, Texas?" -> "The 1974 Texas Tech Raiders football team
    represented Lubbock, Texas."; "... as which father of Malcolm and Donalbain?" -> "... as
    Malcolm's father."). Not judged: a bare span, a yes or no (said, or a yes/no question's
    restatement, which asserts it), a choice among the alternatives the question offers, a name
    the answer composes from the question's words ("Indooroopilly Shopping Centre" for "which
    shopping centre in Indooroopilly"), and an instruction over a given text."""
    words = response.split()
    if is_bare(response) or not _is_question(question):
        return False  # a claim given to check (FEVER's) is its own response
    if asks_yes_no(question) or _CHOICE.search(question) or words[0].lower().strip(",.!") in ("yes", "no"):
        return False
    asked = {stem(w) for w in content_words(question)}
    said = {stem(w) for w in content_words(_POSSESSIVE.sub("", response)) if w not in COMMON_WORDS}
    if not said or not said <= asked:
        return False
    # Each name whole (_found's "most of its words" is too lax), possessives off on both sides:
    # "FA Women's Cup Final" restated is the question's own.
    heard = f" {normalise(_POSSESSIVE.sub('', question))} "
    return all(f" {normalise(_POSSESSIVE.sub('', s))} " in heard for s in key_spans(response))


def unaddressed(query: str, response: str) -> OffQuestion | None:
    """What of the question a response does not address: its subject, its relation, the kind of
    answer asked for, the year it set, the answers it offered, or anything beyond the question's
    own words; None when it does."""
    if picked_alternative(query, response) == "neither":
        return "choice"
    if off_topic(query, response) or other_work(query, response):
        return "subject"
    if other_relation(query, response):
        return "relation"
    if wrong_kind(query, response):
        return "kind"
    if other_year(query, response):
        return "year"
    if restates_question(query, response):
        return "restated"
    return None
