"""NLI pairs in the shape the diagnosis judges, from the grounded-hallucination sets (corpora/
hallucination.py: people's labels of summaries, answers, dialogue responses and claims against
their sources) and from ragmend's edits of their supported responses (train/detector_data.py).

Each pair is one sentence of a response (or a whole claim) against a window of its source:

- a sentence of a response its source supports: entailment;
- a sentence holding a span the annotators (or an edit) marked unsupported: contradiction where
  the set says the source contradicts it (a refuted claim, a contract's Contradiction, a negation
  or an entity swap), else neutral;
- a sentence of an unsupported response whose spans are unknown: left out, but for a one-sentence
  response (it is the sentence);
- a sentence of an unsupported response outside every marked span: entailment where the spans
  mark the whole of what is wrong (the rest was read and let stand), else left out.

The window is what the diagnosis's premise would be: the source sentences that share most of the
hypothesis's content words, with their neighbours, to `PREMISE_WORDS` words, in document order.
A supported sentence whose window holds under `MIN_COVER` of its content words is left out: its
evidence is likely outside the window, and "entailment" would teach the model to entail what it
cannot see. Pairs keep their source group, so a split by group keeps one article on one side.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmend.corpora.grounded import Grounded
from ragmend.corpora.hallucination import read_all, sentences_of
from ragmend.corpora.nli_pairs import EntitySwapper
from ragmend.corpora.readers import NLI_LABELS, NLIPair, hotpotqa_paragraphs, load_hotpotqa
from ragmend.corpora.tasks import HOTPOTQA_FILE
from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.train.detector_data import content_words, edit_response

PREMISE_WORDS = 160  # about the diagnosis's passage: a retrieval chunk, with room for a neighbour
MIN_COVER = 0.5  # of a supported sentence's content words, inside its window
# Labels and edits that say the source contradicts the response, not merely that it is silent.
CONTRADICTING = frozenset({"refute", "Contradiction", "negation", "swap_in_source", "swap_outside"})
# Sets whose spans mark the whole of what is wrong: what they leave unmarked stands. (An edit's
# other sentences are its original's, already paired as the supported response.)
ANNOTATED_SPANS = frozenset({"xsum_hallucination", "wice", "summedits"})


@dataclass(frozen=True)
class GroundedPair:
    pair: NLIPair
    set: str  # the grounded set it comes from ("edit": ragmend's edit of a supported response)
    task: str  # the response's shape: summary, dialogue, qa, claim
    group: str  # the source document: what must stay in one split


def sentence_labels(g: Grounded) -> list[tuple[str, str]]:
    """Each sentence of the response whose label is known, with its NLI label."""
    unsupported_label = "contradiction" if g.kind in CONTRADICTING else "neutral"
    spans = _sentence_spans(g.response)
    if not g.unsupported:
        return [(g.response[a:b].strip(), "entailment") for a, b in spans]
    if g.spans is None:
        return [(g.response.strip(), unsupported_label)] if len(spans) <= 1 else []
    out = []
    for a, b in spans:
        marked = any(s < b and a < e for s, e in g.spans)
        if marked:
            out.append((g.response[a:b].strip(), unsupported_label))
        elif g.set in ANNOTATED_SPANS:
            out.append((g.response[a:b].strip(), "entailment"))
    return [(s, label) for s, label in out if len(s.split()) >= 3]


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """Each sentence's character range (diagnosis/hypotheses.py's split, which keeps initials and
    abbreviations inside their sentence)."""
    out, at = [], 0
    for sentence in split_sentences(text) or [text]:
        start = text.find(sentence, at)
        if start < 0:
            continue
        out.append((start, start + len(sentence)))
        at = start + len(sentence)
    return out


def window(source: str, hypothesis: str, words: int = PREMISE_WORDS) -> tuple[str, float]:
    """The source sentences that share most of the hypothesis's content words, grown by their
    neighbours to `words` words, in document order; and the share of its content words inside."""
    sentences = split_sentences(source) or [source]
    wanted = _content(hypothesis)
    gain = [len(wanted & _content(s)) for s in sentences]
    chosen: set[int] = set()
    covered: set[str] = set()
    size = 0
    for i in sorted(range(len(sentences)), key=lambda i: -gain[i]):
        new = (wanted & _content(sentences[i])) - covered
        if not new or size + len(sentences[i].split()) > words:
            continue
        chosen.add(i)
        covered |= new
        size += len(sentences[i].split())
    if not chosen:
        chosen = {0}
        size = len(sentences[0].split())
    for step in range(1, len(sentences)):  # neighbours of what was chosen, nearest first
        for i in sorted(chosen):
            for j in (i - step, i + step):
                if 0 <= j < len(sentences) and j not in chosen and size + len(sentences[j].split()) <= words:
                    chosen.add(j)
                    size += len(sentences[j].split())
    text = " ".join(sentences[i] for i in sorted(chosen))
    cover = len(wanted & _content(text)) / len(wanted) if wanted else 1.0
    return text, cover


def pairs_of(g: Grounded) -> list[GroundedPair]:
    out = []
    source = " ".join(g.source)
    for k, (sentence, label) in enumerate(sentence_labels(g)):
        premise, cover = window(source, sentence)
        if label == "entailment" and cover < MIN_COVER:
            continue
        pair = NLIPair(premise=premise, hypothesis=sentence, label=label, id=f"{g.id}-s{k}")
        out.append(GroundedPair(pair, g.set, g.task, g.group))
    return out


def build_grounded_pairs(root: Path, nlp: Any, seed: int = 0, limit: int | None = None) -> list[GroundedPair]:
    """Every set's pairs and those of one edit of each supported response (`limit`: rows read per
    set, a quick build). No row whose source shares a sentence with the HotpotQA evaluation corpus."""
    rng = random.Random(seed)
    evaluated = frozenset(
        s for p in hotpotqa_paragraphs(load_hotpotqa(root / HOTPOTQA_FILE)) for s in sentences_of(p.text)
    )
    rows = _capped(read_all(root, drop_sentences=evaluated), limit)
    pool: dict[str, list[str]] = {}
    for g in rows:
        pool.setdefault(g.set, []).extend(s for src in g.source for s in split_sentences(src)[:20])
    swapper = EntitySwapper(
        nlp, [s for g in rows[:3000] for s in split_sentences(g.source[0])[:5]], seed=seed
    )
    edited = [
        e for g in rows if not g.unsupported and (e := edit_response(g, swapper, pool, rng)) is not None
    ]
    return [p for g in [*rows, *edited] for p in pairs_of(g)]


def _capped(rows: Sequence[Grounded], limit: int | None) -> list[Grounded]:
    if limit is None:
        return list(rows)
    seen: Counter[str] = Counter()
    out = []
    for g in rows:
        if seen[g.set] < limit:
            seen[g.set] += 1
            out.append(g)
    return out


def card(pairs: Iterable[GroundedPair]) -> dict[str, Any]:
    """Counts per source set and per task shape, by label: what the data card states."""
    by_set: dict[str, Counter[str]] = {}
    by_task: dict[str, Counter[str]] = {}
    for p in pairs:
        by_set.setdefault(p.set, Counter())[p.pair.label] += 1
        by_task.setdefault(p.task, Counter())[p.pair.label] += 1
    return {
        "by_set": {k: dict(sorted(v.items())) for k, v in sorted(by_set.items())},
        "by_task": {k: dict(sorted(v.items())) for k, v in sorted(by_task.items())},
        "total": sum(sum(v.values()) for v in by_set.values()),
        "premise_words": PREMISE_WORDS,
        "min_cover": MIN_COVER,
    }


def card_markdown(summary: dict[str, Any]) -> str:
    lines = [
        "# Grounded NLI pairs: data card",
        "",
        "One sentence of a response (or a claim) against a window of its source, labelled from the",
        "sets' human annotations and ragmend's edits (train/grounded_pairs.py says how). No TEST row",
        "of any set; no RAGTruth test source; no source sharing a sentence with the HotpotQA corpus.",
        f"Premise window: {summary['premise_words']} words; a supported sentence needs "
        f"{summary['min_cover']:.0%} of its content words inside its window.",
        "",
    ]
    for title, key in (("source", "by_set"), ("task shape", "by_task")):
        lines += [f"| {title} | entailment | neutral | contradiction |", "|---|---:|---:|---:|"]
        for name, counts in summary[key].items():
            row = " | ".join(str(counts.get(label, 0)) for label in NLI_LABELS)
            lines.append(f"| {name} | {row} |")
        lines.append("")
    lines += [f"Total: {summary['total']} pairs.", ""]
    return "\n".join(lines)


def _content(text: str) -> set[str]:
    """Content words and numbers: what a window must hold for the sentence to rest on it."""
    return content_words(text) | set(re.findall(r"\d+", text))
