"""The names and numbers a text asserts, and whether other text states them: the surface checks
the NLI model cannot be trusted with (it does not notice that "Canberra" occurs nowhere in a long,
on-topic premise). Exact, cheap (no model), read by the verdict (diagnosis/verdict.py) beside the
NLI scores. Beside this module: editions.py and roles.py (what a name's edition or a credited role
rules out), choices.py (the answers a question offers), off_question.py (whether an answer is
about what was asked); compound claims split into atomic ones: compound.py.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from ragmend.diagnosis.patterns import (
    NAME,
    NAME_CONNECTORS,
    NUMBER,
    NUMBER_RUN,
    QUOTED,
    ends_name_run,
)
from ragmend.diagnosis.wordforms import stem

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
COMMON_WORDS = _FUNCTION_WORDS | frozenset(
    """also very just only own same too so such can could will would should may might into about
    over after before during all any each other more most some s t were while both however""".split()  # noqa: SIM905
)


def novel_words(text: str, evidence: Sequence[str], exclude: str = "") -> tuple[float, int]:
    """(share, count) of `text`'s content words, repeats counted, that neither the evidence nor
    `exclude` (the question) holds. Content a response adds beyond its sources is where RAG
    hallucinations live (RAGTruth's "baseless info"), and an NLI model reading a long on-topic
    premise does not see it; (0.0, 0) for a text with no content word."""
    words = [w for w in normalise(text).split() if w not in COMMON_WORDS]
    if not words:
        return 0.0, 0
    known = {stem(w) for w in normalise(" ".join([*evidence, exclude])).split()}
    novel = sum(stem(w) not in known for w in words)
    return novel / len(words), novel


def trimmed(run: str) -> str:
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
    spans = [span for m in _CAP_RUN.finditer(text) if (span := trimmed(m.group(0)))]
    spans += [m.group(1) for m in _QUOTED.finditer(text)]
    seen: dict[str, str] = {}
    for s in spans:
        key = normalise(s)
        if key and key not in seen and not (len(key) == 1 and not key.isdigit()):
            seen[key] = s
    return list(seen.values())


def found_in(span: str, haystack: str) -> bool:
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
    return not spans or any(found_in(s, normalised) for s in spans)


def span_coverage(text: str, evidence: Sequence[str], exclude: str = "") -> float | None:
    """The share of `text`'s key spans that occur in the evidence (spans also in `exclude`, the
    question, are left out: restating the question asserts nothing new). None: no key span."""
    excluded = normalise(exclude)
    spans = [s for s in key_spans(text) if not (excluded and found_in(s, excluded))]
    if not spans:
        return None
    haystack = normalise(" ".join(evidence))
    return sum(found_in(s, haystack) for s in spans) / len(spans)


def best_passage_coverage(question: str, evidence: Sequence[str]) -> float | None:
    """Answerability from the surface: the largest share of the question's key spans that ONE
    passage holds (a question about two entities is answerable from passages that name both)."""
    spans = key_spans(question)
    if not spans or not evidence:
        return None if not spans else 0.0
    texts = [normalise(e) for e in evidence]
    return max(sum(found_in(s, t) for s in spans) / len(spans) for t in texts)


def names_unasked(text: str, asked: str) -> bool:
    """The text names something (not a number) that the normalised question does not."""
    return any(not NUMBER.fullmatch(s) and not found_in(s, asked) for s in key_spans(text))


def within_sentence(run: str) -> str:
    """A capitalised run up to the end of its sentence: NAME runs on over a full stop ("Vice
    President. Obama"), which a word of three letters or more ends (not an initial, "R.", nor a
    title, "Mr. Spock": patterns.ends_name_run)."""
    words: list[str] = []
    for word in run.split():
        words.append(word)
        if ends_name_run(word):
            break
    return " ".join(words)
