"""Surface checks the NLI model cannot be trusted with: which names and numbers a text asserts,
whether the evidence states them, whether an answer is about what was asked (compound claims
split into the atomic claims they join are in diagnosis/compound.py).

An NLI model scores a hypothesis against a premise; it does not notice that "Canberra" occurs
nowhere in the evidence when the premise is long and on topic, nor that an answer about "Marsha
Albert" does not answer a question about Marie Curie. These checks are exact, cheap (no model) and
feed the verdict (diagnosis/verdict.py) beside the NLI scores.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.diagnosis.patterns import (
    FULL_NAME,
    NAME,
    NAME_CONNECTORS,
    NUMBER,
    NUMBER_RUN,
    NUMBER_WORD,
    QUOTED,
    TIME,
    YEAR_IN_TEXT,
    ends_name_run,
)
from ragmend.diagnosis.types import OffQuestion
from ragmend.diagnosis.wordforms import has_verb, stem

# A key span: a name (patterns.NAME: a run of capitalised words, joined by a few lower-case
# connectors, never by "and"), a number, or a quoted title.
_CAP_RUN = re.compile(rf"{NAME}|{NUMBER_RUN}")
_QUOTED = re.compile(QUOTED)
# Capitalised words that start sentences or questions and name nothing.
_STOP_CAPS = frozenset(
    """a an the this that these those it its he she they his her their there here yes no not who whom
    whose what which when where why how is are was were do does did has have had can could will
    would should may might in on at of for from by with to as and or but if both either neither i we
    you our my your also however according based""".split()  # noqa: SIM905 (a word list reads better as words)
)
# Words that join a name's words, and "the" before one: no name alone, trimmed off a span's ends
# and not counted among a name's words when it is looked up.
_CONNECTORS = frozenset({*NAME_CONNECTORS, "the"})


# A response shorter than this is an answer span ("Canberra", "23 May 1990"), not a sentence: it
# restates nothing of the question and is judged as the question's statement with it in its slot.
BARE_ANSWER_WORDS = 4


def is_bare(response: str) -> bool:
    """Whether a response is a bare answer span (under BARE_ANSWER_WORDS words)."""
    return len(response.split()) < BARE_ANSWER_WORDS


def normalise(text: str) -> str:
    """Lower case, accents stripped, punctuation as spaces: how spans are compared."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


_FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from by with and or but is are was were be been being has have had
    do does did it its this that these those as which who whom what when where how not no than then
    there their they he she his her him we you i""".split()  # noqa: SIM905 (a word list reads better as words)
)


def content_words(text: str) -> set[str]:
    """The normalised words of a text that carry content (no function words)."""
    return {w for w in normalise(text).split() if w not in _FUNCTION_WORDS}


# Words too common to say anything new when an answer uses them and the evidence does not.
_COMMON_WORDS = _FUNCTION_WORDS | frozenset(
    """also very just only own same too so such can could will would should may might into about
    over after before during all any each other more most some s t were while both however""".split()  # noqa: SIM905
)


def novel_words(text: str, evidence: Sequence[str], exclude: str = "") -> tuple[float, int]:
    """(share, count) of `text`'s content words, repeats counted, that neither the evidence nor
    `exclude` (the question) holds. Content a response adds beyond its sources is where RAG
    hallucinations live (RAGTruth's "baseless info"), and an NLI model reading a long on-topic
    premise does not see it; (0.0, 0) for a text with no content word."""
    words = [w for w in normalise(text).split() if w not in _COMMON_WORDS]
    if not words:
        return 0.0, 0
    known = {stem(w) for w in normalise(" ".join([*evidence, exclude])).split()}
    novel = sum(stem(w) not in known for w in words)
    return novel / len(words), novel


def _trimmed(run: str) -> str:
    """A capitalised run less its leading stop words and its trailing connectors and punctuation:
    "The Joker." -> "Joker"."""
    words = run.rstrip(".,'").split()
    while words and (words[0].lower() in _STOP_CAPS or words[0].lower() in _CONNECTORS):
        words = words[1:]
    while words and words[-1].lower() in _CONNECTORS:
        words = words[:-1]
    return " ".join(words)


def key_spans(text: str) -> list[str]:
    """Names and numbers a text asserts: capitalised runs (leading stop words dropped), numbers
    and quoted titles, each once, in order."""
    spans = [span for m in _CAP_RUN.finditer(text) if (span := _trimmed(m.group(0)))]
    spans += [m.group(1) for m in _QUOTED.finditer(text)]
    seen: dict[str, str] = {}
    for s in spans:
        key = normalise(s)
        if key and key not in seen and not (len(key) == 1 and not key.isdigit()):
            seen[key] = s
    return list(seen.values())


def _found(span: str, haystack: str) -> bool:
    """A span occurs in normalised text: whole, or (for a multi-word name) most of its words."""
    key = normalise(span)
    if not key:
        return True
    if f" {key} " in f" {haystack} ":
        return True
    words = [w for w in key.split() if w not in _CONNECTORS]
    if len(words) < 2 or any(w.isdigit() for w in words):
        return False
    hits = sum(f" {w} " in f" {haystack} " for w in words)
    return hits >= max(2, (len(words) * 2 + 2) // 3)  # "Gerald Ford Airport" for the full name


def names_any(spans: Sequence[str], normalised: str) -> bool:
    """Whether a text (`normalised` by `normalise`) names one of `spans` (key_spans of a claim),
    or there is none to name."""
    return not spans or any(_found(s, normalised) for s in spans)


# A name qualified by its edition: an ordinal ("31st Golden Globe Awards", "2nd Battalion") or a
# year after "the" ("the 2010 Commonwealth Games"). A bare year before a name is left alone: "In
# 1998 Microsoft released ..." dates an event, it does not name an edition of Microsoft.
_EDITION = re.compile(rf"(?:\b(\d{{1,4}})(?:st|nd|rd|th)|\b(?i:the)\s+(\d{{4}}))\s+({NAME})")


def _within_sentence(run: str) -> str:
    """A capitalised run up to the end of its sentence: NAME runs on over a full stop ("Vice
    President. Obama"), which a word of three letters or more ends (not an initial, "R.", nor a
    title, "Mr. Spock": patterns.ends_name_run)."""
    words: list[str] = []
    for word in run.split():
        words.append(word)
        if ends_name_run(word):
            break
    return " ".join(words)


def editions(text: str) -> dict[str, frozenset[str]]:
    """The editioned names a text holds, each with the editions it names: "The 31st Golden Globe
    Awards ..." -> {"golden globe awards": {"31"}}."""
    found: dict[str, set[str]] = {}
    for m in _EDITION.finditer(text):
        name = normalise(_within_sentence(m.group(3)).rstrip(".,'"))
        if name:
            found.setdefault(name, set()).add(m.group(1) or m.group(2))
    return {name: frozenset(numbers) for name, numbers in found.items()}


def other_edition(claim: dict[str, frozenset[str]], text: dict[str, frozenset[str]]) -> bool:
    """Whether a text (its `editions`) is about another edition of something a claim names by its
    edition: it names the name, only with other numbers ("The 51st Golden Globe Awards ... were
    held on January 22, 1994." for a claim about the 31st). What it says is of another subject."""
    return any(name in text and not numbers & text[name] for name, numbers in claim.items())


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
        role = normalise(_trimmed(_within_sentence(m.group("role" + form))))
        who = normalise(_trimmed(_within_sentence(m.group("who" + form))))
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
    return _found(a, b) or _found(b, a)


def role_of_another(claim: dict[str, frozenset[str]], text: dict[str, frozenset[str]]) -> bool:
    """Whether a passage (its `credited_roles`) credits a role the claim credits (its
    `claimed_roles`) to someone else, and not also to the claim's performer: the cast list's
    "Charles Bronson as Captain Jack" against "Audrey Dalton played Captain Jack"."""
    for role, performers in claim.items():
        credited = [names for r, names in text.items() if _same_name(role, r)]
        if credited and not any(_same_name(p, n) for names in credited for n in names for p in performers):
            return True
    return False


def span_coverage(text: str, evidence: Sequence[str], exclude: str = "") -> float | None:
    """The share of `text`'s key spans that occur in the evidence (spans also in `exclude`, the
    question, are left out: restating the question asserts nothing new). None: no key span."""
    excluded = normalise(exclude)
    spans = [s for s in key_spans(text) if not (excluded and _found(s, excluded))]
    if not spans:
        return None
    haystack = normalise(" ".join(evidence))
    return sum(_found(s, haystack) for s in spans) / len(spans)


def best_passage_coverage(question: str, evidence: Sequence[str]) -> float | None:
    """Answerability from the surface: the largest share of the question's key spans that ONE
    passage holds (a question about two entities is answerable from passages that name both)."""
    spans = key_spans(question)
    if not spans or not evidence:
        return None if not spans else 0.0
    texts = [normalise(e) for e in evidence]
    return max(sum(_found(s, t) for s in spans) / len(spans) for t in texts)


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
# this, every summary and data-to-text answer was "off the question" (RAGTruth TEST: 824 of 828
# Summary and 842 of 900 Data2txt responses, all judged WR whatever their support).
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
        overlap = sum(_found(s, said) for s in spans) / len(spans)
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
    if any(_found(s, said) or _leading_part(s, said) for s in asked):
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


def anchored_passages(question: str, passages: Sequence[tuple[str, str]]) -> list[bool] | None:
    """For each passage (title, text): whether it is about what the question asks, i.e. it names
    one of the question's key spans, or a passage that does names it by its title (the bridge of a
    two-hop question: "the county where East Lempster is" leads to the county's own page). None
    when there is nothing to anchor to: the question names nothing, or it is an instruction over
    a given text."""
    asked = asked_spans(question)
    if not asked:
        return None
    texts = [normalise(f"{title} {text}") for title, text in passages]
    direct = [any(_found(s, t) for s in asked) for t in texts]
    titles = [normalise(title) for title, _ in passages]
    return [
        direct[i]
        or (
            bool(titles[i])
            and any(direct[j] and f" {titles[i]} " in f" {texts[j]} " for j in range(len(texts)) if j != i)
        )
        for i in range(len(texts))
    ]


def wrong_kind(question: str, response: str) -> bool:
    """The question asks for a time or a number and the response gives none ("How long is the
    bridge ...?" -> "The bridge ... connects Copenhagen and Malmo."): whatever a passage says of
    it, it is not the kind of answer asked for. An abstention gives no answer to judge."""
    return not has_kind_asked(question, response) and not is_abstention(response)


# A question: it asks (a question mark, or a question word first: HotpotQA drops some marks); a
# claim to verify or an instruction over a given text does not.
_QUESTION = re.compile(r"\?|^\s*(who|whom|whose|what|when|where|which|why|how)\b", re.I)
# A question that asks yes or no, or offers its answers ("Which is older, A or B?"), is answered
# in its own words; any other is not answered by a sentence made only of them.
_YES_NO = re.compile(r"^\s*(is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b", re.I)
_CHOICE = re.compile(r"\bor\b", re.I)
_POSSESSIVE = re.compile(r"['\u2019]s\b")


def asks_question(query: str) -> bool:
    """The request asks a question (a question mark, or a question word first), and is no task
    over a text it gives."""
    return bool(_QUESTION.search(query)) and not is_instruction(query)


def asks_yes_no(question: str) -> bool:
    """The question opens with an auxiliary verb ("Are both ...", "Did ..."): yes or no answers it."""
    return bool(_YES_NO.match(question))


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
    if is_bare(response) or not _QUESTION.search(question):
        return False  # a claim given to check (FEVER's) is its own response
    if _YES_NO.match(question) or _CHOICE.search(question) or words[0].lower().strip(",.!") in ("yes", "no"):
        return False
    asked = {stem(w) for w in content_words(question)}
    said = {stem(w) for w in content_words(_POSSESSIVE.sub("", response)) if w not in _COMMON_WORDS}
    if not said or not said <= asked:
        return False
    # Each name whole (_found's "most of its words" is too lax), possessives off on both sides:
    # "FA Women's Cup Final" restated is the question's own.
    heard = f" {normalise(_POSSESSIVE.sub('', question))} "
    return all(f" {normalise(_POSSESSIVE.sub('', s))} " in heard for s in key_spans(response))


# -- choice questions: "Who is older, Steven Tyler, or Elizabeth Fraser?" ------------------------

# A question that offers its answers opens with a question word and ends in "A or B".
_CHOICE_QUESTION = re.compile(r"^\s*(which|who|whom|whose|what)\b", re.I)
_OR = re.compile(r"\s+or\s+", re.I)
_MAX_ALTERNATIVE_WORDS = 12
_QUOTES = "\"'\u201c\u201d\u2018\u2019"
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
    if not _CHOICE_QUESTION.match(q):
        return None
    parts = _OR.split(q)
    if len(parts) != 2:
        return None
    before, b = parts[0].rstrip(" ,"), parts[1]
    # "A or B, have a campus abroad?": the question goes on after B ("McFarland, USA" does not).
    b, *rest = _CLAUSE_AFTER.split(b, 1)
    b = b.strip(" ,.:;" + _QUOTES)
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
    a = a.strip(" " + _QUOTES)
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
        at = [f" {said} ".find(f" {w} ") for w in last if len(w) > 3 and w not in _COMMON_WORDS]
    else:
        at = [said.find(normalise(s).split()[0]) for s in spans if _found(s, said)]
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


def names_unasked(text: str, asked: str) -> bool:
    """The text names something (not a number) that the normalised question does not."""
    return any(not NUMBER.fullmatch(s) and not _found(s, asked) for s in key_spans(text))


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
