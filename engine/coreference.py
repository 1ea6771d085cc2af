"""A follow-up's pronouns resolved from the conversation's named entities, without a generator.

The small local generator condenses follow-ups unreliably: asked to make "When did it launch?"
standalone after an answer naming The Conversation, the 0.5B default repeated it unchanged, and
it rewrote "When did he found it?" as "When did Andrew Jaspan find it?" (a verb changed, a
pronoun left). Where every referring word of a follow-up is a personal pronoun and each names an
entity of the conversation that spaCy's recogniser finds, the pronouns are replaced and the
user's other words are kept; anything else ("the other one", "what about France?") is left to
the generator's condensing call. The turns are read as said: ragmend's own marks on an answer it
gave (citations, notes) are removed before they get here (engine/presentation.plain_text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ragmend.rag.types import Turn

# The pronouns resolved here, by the kind of entity they stand for; "they", "this", "that" and
# the other referring words are not (a group, a clause or a thing just said: the generator's job).
PERSON_PRONOUNS = frozenset({"he", "she", "him", "his", "her", "hers"})
THING_PRONOUNS = frozenset({"it", "its"})
PERSON = "PERSON"
PROPER_NOUN = "PROPER_NOUN"  # a run of proper nouns the recogniser left unlabelled
# Entity labels a thing pronoun may stand for (no dates, numbers or amounts).
THING_LABELS = frozenset(
    {"ORG", "WORK_OF_ART", "FAC", "GPE", "LOC", "PRODUCT", "EVENT", "LAW", "NORP", "LANGUAGE", PROPER_NOUN}
)
_PROPER_TAGS = frozenset({"NNP", "NNPS"})
_WORD = re.compile(r"\b\w+\b")

# What of a conversation a follow-up is read against, here and by the condensing call
# (engine/services.py): the latest turns, each from its start (an answer names its subject
# first); a follow-up refers to what was just said, the small generator's context is short, and
# spaCy's pass over a long conversation cannot be cancelled.
HISTORY_TURNS = 6
HISTORY_TURN_CHARS = 600
Parse = Callable[[str], Any]  # spaCy's Language: text -> Doc with .ents and tokens with .tag_


def candidates(history: Sequence[Turn], parse: Parse) -> list[tuple[str, str]]:
    """(text, label) of the conversation's entities, most salient first: what the last answer
    added to its question (the answer's subject), then the rest of that answer, then its
    question, then earlier turns, latest first."""
    latest = list(history)[-HISTORY_TURNS:]
    turns = [t.model_copy(update={"content": t.content[:HISTORY_TURN_CHARS]}) for t in latest]
    ordered: list[tuple[str, str]] = []
    if turns and turns[-1].role == "assistant":
        answer = entities(parse(turns[-1].content))
        question = turns[-2].content if len(turns) > 1 and turns[-2].role == "user" else ""
        new = [e for e in answer if e[0].lower() not in question.lower()]
        ordered += new + [e for e in answer if e not in new]
        turns = turns[:-1]
    for turn in reversed(turns):
        ordered += entities(parse(turn.content))
    return list(dict.fromkeys(ordered))


def entities(doc: Any) -> list[tuple[str, str]]:
    """(text, label) of a turn's named things: the recogniser's entities, then each run of proper
    nouns it left out (a leading capitalised "The" kept), labelled PROPER_NOUN. The small English
    model labels '"The Conversation"' quoted but nothing in "co-founder of The Conversation.";
    the tagger still calls "Conversation" a proper noun. Such a run may stand for "it", never for
    "he" or "she"."""
    found = [(e.text.strip('"'), e.label_) for e in doc.ents]
    labelled = {token.i for e in doc.ents for token in e}
    run: list[Any] = []
    for token in [*doc, None]:
        if token is not None and token.tag_ in _PROPER_TAGS and token.i not in labelled:
            run.append(token)
            continue
        # A run right before or after a recognised name is a title or a part of it ("Judge"
        # Andrew Napolitano, "Dr." Ulf Merbold), not a thing of its own.
        if run and run[0].i - 1 not in labelled and run[-1].i + 1 not in labelled:
            start = run[0].i - 1 if run[0].i > 0 and doc[run[0].i - 1].text == "The" else run[0].i
            found.append((doc[start : run[-1].i + 1].text, PROPER_NOUN))
        run = []
    return found


def resolve_pronouns(
    question: str, history: Sequence[Turn], parse: Parse, refers_back: Callable[[str], bool]
) -> str | None:
    """The question with its pronouns replaced by the entities they stand for, or None when it
    has none, when a referring word is not a pronoun handled here, or when one finds no entity."""
    words = [m.group(0).lower() for m in _WORD.finditer(question)]
    pronouns = [w for w in words if w in PERSON_PRONOUNS | THING_PRONOUNS]
    if not pronouns:
        return None
    # Every other referring word must be absent: "When did that happen to him?" needs more.
    rest = _WORD.sub(
        lambda m: "" if m.group(0).lower() in PERSON_PRONOUNS | THING_PRONOUNS else m.group(0), question
    )
    if refers_back(rest):
        return None
    ents = candidates(history, parse)
    person = next((text for text, label in ents if label == PERSON), None)
    thing = next((text for text, label in ents if label in THING_LABELS), None)
    if thing is None:
        # The small model calls many titles persons ("Freedom Watch" in "Who hosts Freedom
        # Watch?"): with no thing named, "it" may stand for what the user's last question asked
        # about, never for the person the answer named.
        asked = next((t.content for t in reversed(history) if t.role == "user"), "")
        thing = next(
            (text for text, label in ents if label == PERSON and text != person and text in asked), None
        )
    out = []
    for token in parse(question):
        low = token.lower_
        name = person if low in PERSON_PRONOUNS else thing if low in THING_PRONOUNS else None
        if low in PERSON_PRONOUNS | THING_PRONOUNS:
            if name is None:
                return None
            # Possessive ("his", "its", "her" before a noun): the name's possessive.
            possessive = low in ("his", "its", "hers") or token.tag_ == "PRP$"
            out.append((f"{name}'s" if possessive else name) + token.whitespace_)
        else:
            out.append(token.text_with_ws)
    return "".join(out)
