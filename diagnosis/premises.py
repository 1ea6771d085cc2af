"""The premises an answer is judged against: passages, their windows, and the joint premise.

A premise is `"Title: text"`, the shape the NLI model was trained on. A long passage is read as
windows (a claim is supported by what one window says, not by the length of a paragraph), and
each claim meets only the windows that share most words with it on a long source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.spans import content_words, span_coverage
from ragmend.diagnosis.types import PassageScores, Thresholds

JOINT = "joint"  # the passage id of the joint premise


class EvidencePassage(Protocol):
    """What diagnosis reads of a retrieved passage (rag.types.Passage has these).

    Read-only properties, so a frozen dataclass such as rag.types.Passage satisfies the protocol.
    """

    @property
    def id(self) -> str: ...

    @property
    def doc_id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def retriever(self) -> str: ...

    @property
    def trust(self) -> float | None: ...


def premise_text(p: EvidencePassage) -> str:
    return f"{p.title}: {p.text}" if p.title else p.text


def premise_windows(p: EvidencePassage, sentences: int, max_words: int = 0) -> list[str]:
    """The premises one passage is judged by: the whole passage, or its windows of `sentences`
    sentences (stride sentences - 1, so a fact split across a sentence boundary stays in one
    window), or, for a whole passage over `max_words` words, consecutive runs of sentences within
    that many (each after the first opening with the previous one's last sentence); each led by
    the title, which names the subject a window's pronouns refer to."""
    if sentences > 0:
        parts = split_sentences(p.text)
        if len(parts) > sentences:
            stride = max(1, sentences - 1)
            starts = range(0, len(parts) - sentences + stride, stride)
            return _titled(p, [" ".join(parts[i : i + sentences]) for i in starts if i < len(parts)])
    elif max_words > 0 and len(p.text.split()) > max_words:
        return _titled(p, _word_windows(split_sentences(p.text), max_words))
    return [premise_text(p)]


def _titled(p: EvidencePassage, windows: list[str]) -> list[str]:
    return [f"{p.title}: {w}" if p.title else w for w in windows]


def _word_windows(sentences: list[str], max_words: int) -> list[str]:
    """Consecutive runs of whole sentences of at most `max_words` words (a longer sentence alone),
    each after the first opening with the previous run's last sentence where both fit."""
    windows: list[str] = []
    run: list[tuple[str, int]] = []  # (sentence, its words)
    for sentence in sentences:
        n = len(sentence.split())
        if run and sum(w for _, w in run) + n > max_words:
            windows.append(" ".join(t for t, _ in run))
            run = run[-1:] if len(run) > 1 and run[-1][1] + n <= max_words else []
        run.append((sentence, n))
    if run:  # it holds the last sentence: a flush is always followed by one
        windows.append(" ".join(t for t, _ in run))
    return windows


def select_premises(hypothesis: str, premises: Sequence[tuple[str, str]], top: int) -> list[int]:
    """The premises (indices) one hypothesis is scored against: all of them, or the `top` passage
    windows sharing most content words with it, plus the joint premise. Word overlap, not a model:
    a window that names nothing of the claim can neither support nor contradict it."""
    windows = [i for i, (pid, _) in enumerate(premises) if pid != JOINT]
    if top <= 0 or len(windows) <= top:
        return list(range(len(premises)))
    words = content_words(hypothesis)
    overlap = {i: len(words & content_words(premises[i][1])) for i in windows}
    keep = sorted(sorted(windows, key=lambda i: -overlap[i])[:top])
    return keep + [i for i, (pid, _) in enumerate(premises) if pid == JOINT]


@dataclass(frozen=True)
class Premises:
    """Every premise of one answer as (passage id, text), in passage order, the joint premise
    last; `evidence` holds each whole passage as a premise."""

    items: tuple[tuple[str, str], ...]
    evidence: tuple[str, ...]
    joint_text: str  # the top passages read together (whether or not it is a premise)
    top: int  # each hypothesis meets at most this many windows (0: every premise)

    @property
    def passage_ids(self) -> list[str]:
        """One id per passage (and the joint premise), in order: the scores are reported by them."""
        return list(dict.fromkeys(pid for pid, _ in self.items))

    def for_hypothesis(self, hypothesis: str, single_windows_only: bool = False) -> list[int]:
        """The premises (indices) a hypothesis is scored against. The joint premise is read only
        for a hypothesis whose names and numbers it all holds: for any other, its score would be
        dropped anyway (`joint_may_support`), and it is the longest pair of the batch."""
        covers = not single_windows_only and joint_covers(hypothesis, self.joint_text)
        return [
            i
            for i in select_premises(hypothesis, self.items, self.top)
            if self.items[i][0] != JOINT or covers
        ]


def build_premises(
    passages: Sequence[EvidencePassage],
    window_sentences: int,
    premise_words: int,
    joint_premise: bool,
    joint_passages: int,
    window_top: int,
) -> Premises:
    windows = [premise_windows(p, window_sentences, premise_words) for p in passages]
    items = [(p.id, text) for p, texts in zip(passages, windows, strict=True) for text in texts]
    if joint_premise and len(passages) > 1:
        items.append((JOINT, " ".join(premise_text(p) for p in passages[:joint_passages])))
    evidence = tuple(premise_text(p) for p in passages)
    # Each hypothesis meets every premise, or with window_top only the windows that share most
    # words with it (and the joint premise): a long source is not scored window by window for
    # every claim. Whole passages, none of them split: every one.
    windowed = window_sentences > 0 or any(len(texts) > 1 for texts in windows)
    return Premises(
        tuple(items), evidence, " ".join(evidence[:joint_passages]), window_top if windowed else 0
    )


def joint_may_support(
    hypothesis: str, joint_text: str, scores: Sequence[PassageScores], t: Thresholds
) -> bool:
    """The joint premise (top passages read together) may only bridge facts the passages state:
    every name and number of the hypothesis occurs in it, and no single passage contradicts the
    hypothesis. Otherwise its entailment is what a long, on-topic premise draws from the NLI
    model for any claim (a capital entailed by passages that never name it), and it is left out."""
    if any(s.contradict >= t.contradict for s in scores if s.passage != JOINT):
        return False
    return joint_covers(hypothesis, joint_text)


def joint_covers(hypothesis: str, joint_text: str) -> bool:
    """Every name and number of the hypothesis occurs in the joint premise (or it names none)."""
    coverage = span_coverage(hypothesis, [joint_text])
    return coverage is None or coverage >= 1.0
