"""Word forms compared loosely: a crude suffix stem, and the past forms of common irregular verbs.

Why: an answer restates its question in another tense ("When did the tour begin ...?" -> "The
tour began ..."), and a suffix rule cannot see that "began" is "begin". Enough to compare words,
never shown."""

from __future__ import annotations

from typing import Literal

VerbForm = Literal["auxiliary", "past", "present"]

_SUFFIXES = ("ing", "ed", "es", "s", "ly")

# Base form, then its irregular past forms. Only verbs whose past forms are not also common
# nouns or adjectives of another sense ("found", "left", "saw" are left out).
_IRREGULAR_VERBS = """
begin began begun | win won | write wrote written | make made | take took taken | give gave given
become became | come came | go went gone | hold held | lead led | run ran | sing sang sung
speak spoke spoken | grow grew grown | know knew known | buy bought | sell sold | build built
meet met | tell told | teach taught | fight fought | choose chose chosen | draw drew drawn
fly flew flown | rise rose risen | fall fell fallen | break broke broken | stand stood
bring brought | think thought | see seen | do did done | have had | wear wore worn
strike struck | shoot shot | hang hung | eat ate eaten | drive drove driven | ride rode ridden
swim swam swum | throw threw thrown | forget forgot forgotten | sink sank sunk | steal stole stolen
"""
_BASE: dict[str, str] = {
    form: forms.split()[0] for forms in _IRREGULAR_VERBS.split("|") for form in forms.split()
}


# Verbs that make a sentence of a run of words (copulas, auxiliaries, modals).
_AUXILIARIES = frozenset(
    """is are was were be been being am has have had do does did will would can could shall should
    may might must""".split()  # noqa: SIM905 (a word list reads better as words)
)


def has_verb(words: list[str]) -> bool:
    """A crude test that normalised words make a sentence rather than a name or a list of them:
    an auxiliary, an irregular past form, or a lower-case word in -ed ("founded") or in -s
    ("leads"; possessives aside). "Nebraska Cornhuskers women's basketball team." and "In Japan
    and Hong Kong." have none; a plural noun may pass for a verb, which only keeps a response
    judged as a sentence."""
    return any(
        w in _AUXILIARIES
        or (w in _BASE and w != _BASE[w])
        or (w.islower() and len(w) > 3 and (w.endswith("ed") or (w.endswith("s") and not w.endswith("'s"))))
        for w in words
    )


def verb_form(word: str) -> VerbForm | None:
    """What finite verb a lower-case word may be: an auxiliary ("was", "has"), a past form
    ("founded", "wrote") or a present form in -s ("covers"); None for anything else. The same
    crude reading as `has_verb`: a plural noun passes for a present form."""
    if not word.islower():
        return None
    if word in _AUXILIARIES:
        return "auxiliary"
    if (word in _BASE and word != _BASE[word]) or (len(word) > 3 and word.endswith("ed")):
        return "past"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "'s")):
        return "present"
    return None


def stem(word: str) -> str:
    """A normalised word's comparable form: an irregular past form's base ("began" -> "begin"),
    else the word less one common suffix ("located" and "locate", "hotels" and "hotel" meet)."""
    if word in _BASE:
        return _BASE[word]
    for suffix in _SUFFIXES:
        if len(word) > 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word
