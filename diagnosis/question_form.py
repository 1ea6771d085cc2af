"""What a question is before any answer exists: its kind and its size, for the router.

The router chooses a first pass from what the question itself says (engine/router.py); the kind
is also the label its metrics count plans by. Kinds, first match wins:
  claim    a statement given to check (the claim prompt: FEVER-style verification)
  choice   a question offering its answers ("Who is older, A or B?")
  yes_no   a question opened by an auxiliary verb ("Were both ... ?")
  who, what, when, where, which, how   the question word it opens with (whom / whose: who)
  other    anything else (a request, a question word later in the sentence)
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmend.diagnosis.choices import offered_choice
from ragmend.diagnosis.off_question import asks_yes_no
from ragmend.diagnosis.patterns import QUESTION_WORDS, opening_word
from ragmend.diagnosis.spans import key_spans

QUESTION_KINDS = ("claim", "choice", "yes_no", "who", "what", "when", "where", "which", "how", "other")


@dataclass(frozen=True)
class QuestionForm:
    kind: str  # one of QUESTION_KINDS
    words: int
    names: int  # names and numbers it asserts (key_spans): a multi-hop question names more


def question_form(query: str, claim: bool = False) -> QuestionForm:
    """The form of `query`; `claim`: it is a statement to verify (the claim prompt)."""
    words = len(query.split())
    names = len(key_spans(query))
    if claim:
        return QuestionForm("claim", words, names)
    if offered_choice(query) is not None:
        return QuestionForm("choice", words, names)
    if asks_yes_no(query):
        return QuestionForm("yes_no", words, names)
    word = opening_word(query)
    if word not in QUESTION_WORDS or word == "why":
        return QuestionForm("other", words, names)
    return QuestionForm("who" if word in ("whom", "whose") else word, words, names)
