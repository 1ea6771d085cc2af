"""A question with its answer in its slot: the sentence a bare answer span asserts.

"Who directed Jaws?" + "Steven Spielberg" -> "Steven Spielberg directed Jaws.". The NLI model
judges this sentence against the passages, so it must be one a passage can entail: a template
around the whole question ('The answer to the question "..." is X.') is one none does, and every
bare span read through it is flagged, right or wrong. So the question's own words are kept and
only its question phrase is replaced:

- at the front, with an auxiliary after it: "What is the capital of France?" -> "The capital of
  France is Paris."; "Which musician is known for X?" -> "George Harrison is known for X.";
  "Which series did Celebrity Home Entertainment release?" -> "Celebrity Home Entertainment did
  release BraveStarr."; "What is Paris known for?" -> "Paris is known for its museums.";
- at the front, with a verb after it: "Which band released Y?" -> "The Beatles released Y.";
- inside the question: "Michelle Lewis has written songs for which actress?" -> "Michelle Lewis
  has written songs for Hilary Duff.";
- "When/Where/In what year AUX X VERB?": "X AUX VERB in A." ("Marie Curie was born in 1867.").

What fits none of these keeps the template.
"""

from __future__ import annotations

from ragmend.diagnosis.patterns import AUXILIARIES, NAME_LOOSE_CONNECTORS, QUOTE_MARKS
from ragmend.diagnosis.wordforms import verb_form

# Words that open a noun phrase: after an auxiliary, the subject follows ("What is the capital").
_DETERMINERS = frozenset(("the", "a", "an", "his", "her", "their", "its", "both", "this", "these", "those"))
_PREPOSITIONS = frozenset(("for", "in", "of", "by", "to", "from", "with", "on", "at", "about", "as", "after"))
_PARTICIPLES = frozenset(("born", "built", "made", "held", "written", "known", "found", "shot", "set", "run"))
_OPENING_QUOTES = '"\u201c\u2018'
_TRIM = QUOTE_MARKS + "(),;:"
MAX_PHRASE_WORDS = 6  # a question phrase's noun: "which American Space Western animated series"


def question_statement(question: str, answer: str) -> str:
    """The question with the answer in its slot; a template when no form fits (module docstring).
    A response that is already a full sentence restating the question's terms is the statement
    (the default prompt answers in one sentence)."""
    q = question.strip().rstrip("?").strip()
    a = _clean_answer(answer)
    if not a:
        return q
    if _restates(q, answer):
        return answer.strip()
    words = q.split()
    built = _when_where(words, a) or _asked_first(words, a) or _asked_inside(words, a)
    return built or f'The answer to the question "{q}?" is {a[:1].upper()}{a[1:]}.'


def _restates(q: str, answer: str) -> bool:
    def content(s: str) -> set[str]:
        return {w.lower().strip(".,;:!?\"'()") for w in s.split() if len(w.strip(".,;:!?\"'()")) > 3}

    asked = content(q)
    return len(answer.split()) >= 5 and len(asked & content(answer)) >= max(1, len(asked) // 3)


def _clean_answer(answer: str) -> str:
    """The answer less its full stop, as it was given: a span put inside a sentence keeps its case
    ("are documentary"; a capital there would read as a name that other passages also hold)."""
    return answer.strip().rstrip(".").strip()


def _when_where(words: list[str], a: str) -> str | None:
    """A question of time or place: "When was X born" -> "X was born in A"; "Where is X located"
    -> "X is located in A"."""
    low = [w.lower() for w in words]
    in_year = low[:3] in (["in", "what", "year"], ["in", "which", "year"])
    lead = 1 if low[0] in ("when", "where") else 3 if in_year else 0
    if not lead or len(words) < lead + 2 or low[lead] not in AUXILIARIES:
        return None
    if low[lead] in ("do", "does", "did"):  # "When did X die": no participle to place
        return None
    aux, rest = low[lead], words[lead + 1 :]
    last = rest[-1]
    if len(rest) > 1 and (last.endswith("ed") or last.lower() in _PARTICIPLES):
        rest = [*rest[:-1], aux, last]  # "X born" -> "X was born"
    else:
        rest = [*rest, aux]
    return as_sentence(*[*rest, "in", a])


def _asked_first(words: list[str], a: str) -> str | None:
    """The question phrase opens the question: "Who/What/Which N" then an auxiliary or a verb."""
    low = [w.lower() for w in words]
    if low[0] not in ("who", "whom", "what", "which"):
        return None
    after = _phrase_end(words, 0)
    if after >= len(words):
        return None
    rest = words[after + 1 :]
    if low[after] in AUXILIARIES:
        aux = low[after]
        if not rest:
            return None
        if aux in ("do", "does", "did"):  # "Which series did X release in Y" -> "X did release A in Y"
            end = _subject_end(rest)
            if not 0 < end < len(rest):
                return None
            if "year" in low[1:after]:  # "What year did X break up" -> "X did break up in A"
                return as_sentence(*[*rest[:end], aux, *rest[end:], "in", a])
            return as_sentence(*[*rest[:end], aux, rest[end], a, *rest[end + 1 :]])
        if _is_predicate(rest[0]):  # "Which musician is known for X" -> "A is known for X"
            return as_sentence(*[a, aux, *rest])
        end = _subject_end(rest)
        if rest[-1] in _PREPOSITIONS and 0 < end < len(rest):  # "What is X known for"
            return as_sentence(*[*rest[:end], aux, *rest[end:], a])
        return as_sentence(*[*rest, aux, a])  # "What is the capital of France" -> "... is A"
    if _takes_object(words, after) or verb_form(low[after]) == "past":  # "Which band released Y"
        return as_sentence(*[a, *words[after:]])
    return None


def _asked_inside(words: list[str], a: str) -> str | None:
    """The question phrase inside the question, not after a comma (a relative clause): "X has
    written songs for which actress" -> "X has written songs for A"."""
    low = [w.lower() for w in words]
    for i in range(1, len(words)):
        if low[i] in ("which", "what", "whom") and not words[i - 1].endswith(","):
            return as_sentence(*[*words[:i], a, *words[_phrase_end(words, i) :]])
    return None


def _phrase_end(words: list[str], start: int) -> int:
    """The index after the question phrase at words[start] ("which American Space Western
    animated series"): "who" alone; "what"/"which" with the words up to the next auxiliary, or up
    to a verb that takes what follows it ("released the album", "starred in"; not "animated
    series"), within MAX_PHRASE_WORDS; to the end where the question ends first."""
    low = [w.lower() for w in words]
    if low[start] in ("who", "whom"):
        return start + 1
    end = min(len(words), start + 1 + MAX_PHRASE_WORDS)
    for k in range(start + 1, end):
        if low[k] in AUXILIARIES or (k > start + 1 and _takes_object(words, k)):
            return k
    for k in range(start + 2, end):  # "which driver | in the 2009 season"
        if words[k] in _PREPOSITIONS:
            return k
    return end if end == len(words) else start + 1


def _takes_object(words: list[str], k: int) -> bool:
    """words[k] is a verb form followed by what it acts on: a determiner, a name or a preposition."""
    if verb_form(words[k].lower()) not in ("past", "present") or k + 1 >= len(words):
        return False
    after = words[k + 1]
    return after[:1].isupper() or after.lower() in _DETERMINERS or after.lower() in _PREPOSITIONS


def _subject_end(words: list[str]) -> int:
    """The index after the subject that opens `words`: a leading "the", then one name or two
    joined by "and" (0 where no name opens it)."""
    start = 1 if words and words[0].lower() == "the" else 0
    end = name_end(words, start)
    while start < end and end + 1 < len(words) and words[end] == "and" and is_name_word(words[end + 1]):
        end = name_end(words, end + 1)
    return end if end > start else 0


def name_end(words: list[str], i: int) -> int:
    """The index after the name that starts at words[i] (i where none does): capitalised words,
    digits, a quoted title, connectors between them ("Out of Place", "Gustave de Molinari")."""
    j = i
    while j < len(words):
        w = words[j]
        if w[:1] in _OPENING_QUOTES:
            close = next((k for k in range(j, len(words)) if _closes_quote(words[k], k == j)), None)
            if close is None:
                return i
            j = close + 1
        elif is_name_word(w) or (j > i and _connects(words, j)):
            j += 1
        else:
            break
    return j


def _connects(words: list[str], j: int) -> bool:
    return words[j].lower() in NAME_LOOSE_CONNECTORS and j + 1 < len(words) and is_name_word(words[j + 1])


def _closes_quote(word: str, first: bool) -> bool:
    body = word[1:] if first else word
    return any(q in body for q in QUOTE_MARKS)


def is_name_word(word: str) -> bool:
    """A word of a name: capitalised or a number, quotes and brackets aside."""
    core = word.strip(_TRIM)
    return bool(core) and (core[:1].isupper() or core[:1].isdigit())


def _is_predicate(word: str) -> bool:
    """A lower-case word that is no determiner begins a predicate ("known for", "located in",
    "older"), not a subject ("the capital")."""
    return word[:1].islower() and word.lower() not in _DETERMINERS


def as_sentence(*words: str) -> str:
    """Words (or phrases) as one sentence: single spaces, a capital first, one full stop."""
    text = " ".join(" ".join(words).split()).rstrip(" ,.")
    return f"{text[:1].upper()}{text[1:]}."
