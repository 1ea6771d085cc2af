"""The evidence the generator reads: the retrieved passages' sentences that bear on the question,
within a token budget, instead of the passages whole.

Why: on CPU the prompt's evaluation is most of an answer's wait (about 510 tokens for five whole
passages), and a small generator reads a short prompt better than a long one. The diagnosis still
judges the answer against the whole passages; only the prompt is compact.

How: each sentence of each passage, led by its passage's title (the subject its pronouns name), is
scored by cosine similarity to the question with the embedding model the index already uses. The
best sentences are taken until the budget is spent, then written back per passage in the order
retrieval ranked them, each sentence in its place in the passage; a gap between two taken
sentences is marked "...". Every passage keeps its number, so a citation [3] still points at the
third retrieved passage, and a passage with no sentence taken is left out of the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ragmend.rag.types import Passage

# Characters per generator token, for the budget: about 4 for English prose under the BPE
# vocabularies of the bundled and common generators. An estimate: the request's usage reports
# the tokens the generator counted.
CHARS_PER_TOKEN = 4

Splitter = Callable[[str], list[str]]
Embedder = Callable[[list[str]], np.ndarray]  # unit-length rows, one per text
Scorer = Callable[[str, list[str]], list[float]]  # a cross-encoder: relevance of each text to a query


@dataclass(frozen=True)
class Sentence:
    passage: int  # the passage's rank, from 0
    position: int  # the sentence's place in its passage
    text: str


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def compact_context(
    question: str,
    passages: Sequence[Passage],
    budget_tokens: int,
    split: Splitter,
    embed: Embedder,
) -> str:
    """The numbered context block of the sentences that bear on `question`, within
    `budget_tokens` (estimated) of sentence text; titles and numbers come on top of it."""
    sentences = _sentences(passages, split)
    if not sentences:
        return ""
    if sum(estimate_tokens(s.text) for s in sentences) <= budget_tokens:
        return _render(passages, sentences)  # all of it fits: nothing to choose, nothing to embed
    titled = [_titled(passages[s.passage], s.text) for s in sentences]
    vectors = embed([question, *titled])
    scores = vectors[1:] @ vectors[0]
    chosen = _within_budget(sentences, scores, budget_tokens)
    return _render(passages, chosen)


def focused_context(
    question: str,
    passages: Sequence[Passage],
    budget_tokens: int,
    split: Splitter,
    score: Scorer,
) -> str:
    """The focus repair's evidence: the passages' sentences scored against `question` by a
    cross-encoder (it reads the pair together, so it ranks the sentence holding the answer above
    one that merely shares the question's words), the best FIRST, one numbered line each, within
    `budget_tokens`. A small generator answers from what it reads first; the retrieval order that
    `compact_context` keeps is what a wrong first answer followed."""
    sentences = _sentences(passages, split)
    if not sentences:
        return ""
    scores = np.asarray(score(question, [_titled(passages[s.passage], s.text) for s in sentences]))
    chosen = _within_budget(sentences, scores, budget_tokens)  # already in the order of scores
    return "\n".join(numbered(s.passage + 1, passages[s.passage].title, s.text) for s in chosen)


def best_sentence(
    question: str, passages: Sequence[Passage], split: Splitter, score: Scorer
) -> tuple[int, str]:
    """The passage rank and text of the sentence a cross-encoder finds most relevant to
    `question` (titled, so its subject is named): the bridge a second retrieval hop starts from."""
    sentences = _sentences(passages, split)
    if not sentences:
        return 0, ""
    titled = [_titled(passages[s.passage], s.text) for s in sentences]
    best = int(np.argmax(score(question, titled)))
    return sentences[best].passage, titled[best]


def numbered(n: int, title: str, text: str) -> str:
    """One passage as the prompt shows it: its number (citations point at it), title and text."""
    return f"[{n}] {title}: {text}" if title else f"[{n}] {text}"


def _sentences(passages: Sequence[Passage], split: Splitter) -> list[Sentence]:
    return [
        Sentence(i, j, s) for i, p in enumerate(passages) for j, s in enumerate(split(p.text)) if s.strip()
    ]


def _titled(p: Passage, sentence: str) -> str:
    return f"{p.title}: {sentence}" if p.title else sentence


def _within_budget(sentences: list[Sentence], scores: np.ndarray, budget_tokens: int) -> list[Sentence]:
    """The best-scored sentences while they fit; the best one always (cut to the budget), so the
    prompt never comes out empty. A sentence that does not fit is skipped for a shorter one."""
    chosen: list[Sentence] = []
    spent = 0
    for i in np.argsort(-scores, kind="stable"):
        s = sentences[int(i)]
        cost = estimate_tokens(s.text)
        if spent + cost <= budget_tokens:
            chosen.append(s)
            spent += cost
        elif not chosen:
            chosen.append(Sentence(s.passage, s.position, s.text[: budget_tokens * CHARS_PER_TOKEN]))
            spent = budget_tokens
        if spent >= budget_tokens:
            break
    return chosen


def _render(passages: Sequence[Passage], chosen: list[Sentence]) -> str:
    blocks: list[str] = []
    for rank, p in enumerate(passages):
        mine = sorted((s for s in chosen if s.passage == rank), key=lambda s: s.position)
        if not mine:
            continue
        text = mine[0].text
        for before, s in pairwise(mine):
            text += (" " if s.position == before.position + 1 else " ... ") + s.text
        blocks.append(numbered(rank + 1, p.title, text))
    return "\n\n".join(blocks)
