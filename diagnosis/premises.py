"""The premises an answer is judged against: passages, their windows, and a claim's joint premise.

A premise is `"Title: text"`, the shape the NLI model was trained on. A long passage is read as
windows (a claim is supported by what one window says, not by the length of a paragraph), and
each claim meets only the windows that share most words with it on a long source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.spans import content_words, normalise, span_coverage
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
    windows sharing most content words with it. Word overlap, not a model: a window that names
    nothing of the claim can neither support nor contradict it."""
    if top <= 0 or len(premises) <= top:
        return list(range(len(premises)))
    words = content_words(hypothesis)
    overlap = {i: len(words & content_words(text)) for i, (_, text) in enumerate(premises)}
    return sorted(sorted(range(len(premises)), key=lambda i: -overlap[i])[:top])


@dataclass(frozen=True, kw_only=True)
class Source:
    """One passage as a joint premise reads it, read once per answer."""

    id: str
    title: str
    text: str
    plain: str  # the text normalised, padded with a space each side for whole-name search
    words: frozenset[str]  # the content words of its title and text

    @staticmethod
    def of(p: EvidencePassage) -> Source:
        return Source(
            id=p.id,
            title=p.title,
            text=p.text,
            plain=f" {normalise(p.text)} ",
            words=frozenset(content_words(f"{p.title} {p.text}")),
        )

    def names(self, other: Source) -> bool:
        """Whether this passage names the other's subject: its title whole, less a disambiguation
        ("Inception (film)"). Whole: most of a name's words ("Regional Airport") name another."""
        subject = normalise(other.title.partition(" (")[0])
        return bool(subject) and f" {subject} " in self.plain


def linked_pairs(sources: Sequence[Source]) -> tuple[tuple[int, int], ...]:
    """The passage pairs (i < j) one of which names the other's subject."""
    return tuple(
        (i, j)
        for i in range(len(sources))
        for j in range(i + 1, len(sources))
        if sources[i].names(sources[j]) or sources[j].names(sources[i])
    )


@dataclass(frozen=True)
class JointPremise:
    """Two passages read together for one hypothesis."""

    joined: tuple[str, str]  # the passages' ids, in passage order
    text: str


@dataclass(frozen=True, kw_only=True)
class Premises:
    """Every premise of one answer as (passage id, text), in passage order; `evidence` holds each
    whole passage as a premise, `sources` each passage as a joint premise reads it (none with
    diagnosis.joint_premise off)."""

    items: tuple[tuple[str, str], ...]
    evidence: tuple[str, ...]
    sources: tuple[Source, ...]
    links: tuple[tuple[int, int], ...]  # linked_pairs of the sources; empty: no joint premise
    top: int  # each hypothesis meets at most this many windows (0: every premise)

    @property
    def passage_ids(self) -> list[str]:
        """One id per passage (and the joint premise), in order: the scores are reported by them."""
        return [*dict.fromkeys(pid for pid, _ in self.items), JOINT]

    def for_hypothesis(self, hypothesis: str) -> list[int]:
        """The passage windows (indices into `items`) a hypothesis is scored against."""
        return select_premises(hypothesis, self.items, self.top)

    def joint_for(self, hypothesis: str) -> JointPremise | None:
        """The joint premise of a hypothesis whose words no single passage holds: of the passage
        pairs one of which names the other's subject (its title: the link a two-hop answer
        crosses, "directed by Christopher Nolan" on the film's page to Nolan's), the pair that
        holds most of its words, each passage read as its title and its (at most
        `JOINT_SENTENCES`) sentences sharing most words with the hypothesis or naming the other's
        title, in passage order. Read whole, two passages overrun the NLI model's length and lose
        the second fact. None where one passage holds as many of the words as any linked pair,
        or where the pair does not hold every name and number of the hypothesis: two passages
        that do not speak of each other bridge nothing, and side by side they draw entailment
        from the NLI model for any claim whose words they share out ("Elko Regional Airport is
        located in Michigan" from Elko's page and another airport's)."""
        words = content_words(hypothesis)
        if not words or not self.links:
            return None
        held = [words & s.words for s in self.sources]
        a, b = max(self.links, key=lambda ab: (len(held[ab[0]] | held[ab[1]]), -sum(ab)))
        if len(held[a] | held[b]) <= max(len(h) for h in held):
            return None
        first, second = self.sources[a], self.sources[b]
        text = " ".join(
            (
                _focused(first, words | content_words(second.title)),
                _focused(second, words | content_words(first.title)),
            )
        )
        if not joint_covers(hypothesis, text):
            return None
        return JointPremise((first.id, second.id), text)


JOINT_SENTENCES = 2  # sentences of each passage in a joint premise: two facts fit the NLI length


def _focused(source: Source, words: set[str]) -> str:
    """A passage's title and its sentences sharing most of `words`, in passage order."""
    sentences = split_sentences(source.text)  # only for the rare claim that gets a joint premise
    overlap = [len(words & content_words(s)) for s in sentences]
    ranked = sorted(range(len(overlap)), key=lambda i: -overlap[i])
    keep = sorted(i for i in ranked[:JOINT_SENTENCES] if overlap[i] > 0)
    text = " ".join(sentences[i] for i in keep)
    return f"{source.title}: {text}" if source.title else text


def build_premises(
    passages: Sequence[EvidencePassage],
    window_sentences: int,
    premise_words: int,
    joint_premise: bool,
    window_top: int,
) -> Premises:
    windows = [premise_windows(p, window_sentences, premise_words) for p in passages]
    items = [(p.id, text) for p, texts in zip(passages, windows, strict=True) for text in texts]
    evidence = tuple(premise_text(p) for p in passages)
    sources = tuple(Source.of(p) for p in passages) if joint_premise else ()
    links = linked_pairs(sources)
    # Each hypothesis meets every premise, or with window_top only the windows that share most
    # words with it: a long source is not scored window by window for every claim. Whole
    # passages, none of them split: every one.
    windowed = window_sentences > 0 or any(len(texts) > 1 for texts in windows)
    return Premises(
        items=tuple(items), evidence=evidence, sources=sources, links=links, top=window_top if windowed else 0
    )


def joint_may_support(scores: Sequence[PassageScores], t: Thresholds) -> bool:
    """A joint premise may only bridge what no passage outside it contradicts: otherwise its
    entailment is what two on-topic passages side by side draw from the NLI model for a claim
    another passage denies. The two it joins are read in it; alone, each holds half a bridge,
    which the model reads as another subject ("Nolan was born in Westminster" against "The
    director of Inception was born in Westminster")."""
    joined = {pid for s in scores for pid in s.joined}
    outside = [s for s in scores if s.passage != JOINT and s.passage not in joined]
    return not any(s.contradict >= t.contradict for s in outside)


def joint_covers(hypothesis: str, joint_text: str) -> bool:
    """Every name and number of the hypothesis occurs in the joint premise (or it names none)."""
    coverage = span_coverage(hypothesis, [joint_text])
    return coverage is None or coverage >= 1.0
