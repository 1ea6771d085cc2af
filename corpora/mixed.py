"""One stream as one server sees it: HotpotQA questions, FEVER claims and questions the corpus
does not answer, interleaved, over one corpus.

The corpus is the unanswerable task's (corpora/unanswerable.py: the pooled HotpotQA paragraphs
without the gold titles of its held-out questions) plus FEVER's evidence documents (corpora/tasks.py;
a NOT ENOUGH INFO claim whose removed fact any HotpotQA paragraph of the pool states keeps its
original evidence and label). Streams, answered in turn (hotpotqa, fever, unanswerable), each in
the fixed pseudo-random order of `tasks.split_sample` (the unanswerable one takes its two kinds in turn):

- `hotpotqa`: an answerable HotpotQA question, asked as a chat client asks it (the server's own
  prompt); right when the answer the user reads holds the gold answer (a choice question: when
  it picks the gold alternative);
- `fever`: a FEVER claim, checked with the claim prompt; right when the label the user reads (the
  evidence-gated one where the method gates) is the gold label;
- `unanswerable`: a held-out HotpotQA question whose gold paragraphs are gone, or a TruthfulQA
  question (kinds `gold_removed`, `out_of_corpus` in the item's `kind`); right when the user reads
  that the sources do not answer (the abstain action's or the answer policy's statement, or the
  answer saying it does not know).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragmend.corpora.readers import Split
from ragmend.corpora.tasks import TASKS, Corpus, EvalItem, Task, answer_in_passages, fever_with, split_sample
from ragmend.corpora.unanswerable import build_unanswerable, correct_answer
from ragmend.diagnosis.hypotheses import is_abstention

STREAMS = ("hotpotqa", "fever", "unanswerable")
CLAIM_TOKENS = TASKS["fever"].max_tokens


def stream_of(item: EvalItem) -> str:
    return stream_of_id(item.id)


def stream_of_id(item_id: str) -> str:
    """The stream an item's id belongs to (its prefix: hotpotqa, fever, unanswerable)."""
    return item_id.split(":", 1)[0]


def build_mixed(root: Path) -> tuple[list[EvalItem], Corpus]:
    unanswerable_items, pool = build_unanswerable(root)
    claims, fever_corpus = fever_with(root, list(pool.paragraphs))
    evidence = [p for p in fever_corpus.paragraphs if p.id.startswith("fever:")]
    items = [
        replace(i, id=f"{'hotpotqa' if i.kind == 'answerable' else 'unanswerable'}:{i.id}")
        for i in unanswerable_items
    ]
    items += [
        EvalItem(id=f"fever:{c.id}", query=c.query, gold=c.gold, split=c.split, kind="claim") for c in claims
    ]
    description = (
        f"{len(pool.paragraphs)} HotpotQA paragraphs (the unanswerable task's: {pool.description}) and "
        f"{len(evidence)} FEVER evidence documents"
    )
    return items, Corpus(tuple(pool.paragraphs) + tuple(evidence), description)


def interleaved(items: list[EvalItem], split: Split) -> list[EvalItem]:
    """hotpotqa, fever, unanswerable in turn, each stream in `split_sample`'s order; the unanswerable
    stream takes gold_removed and out_of_corpus questions in turn."""
    unanswerable = _alternate(
        [
            split_sample([i for i in items if i.kind == kind], split)
            for kind in ("gold_removed", "out_of_corpus")
        ]
    )
    streams = [split_sample([i for i in items if stream_of(i) == s], split) for s in STREAMS[:2]]
    return _alternate([*streams, unanswerable])


def _alternate(streams: list[list[EvalItem]]) -> list[EvalItem]:
    out: list[EvalItem] = []
    for row in range(max(len(s) for s in streams)):
        out += [s[row] for s in streams if row < len(s)]
    return out


def _overrides(item: EvalItem) -> dict[str, Any]:
    return {"prompt": "claim", "max_tokens": CLAIM_TOKENS} if stream_of(item) == "fever" else {}


def _score(item: EvalItem, read: str, final_label: str | None) -> dict[str, float]:
    """`read`: what the user reads ("" for an abstention, Task.reads)."""
    stream = stream_of(item)
    abstained = not read.strip() or is_abstention(read)
    if stream == "fever":
        right = TASKS["fever"].score(item, read, final_label)["accuracy"] >= 1
    elif stream == "unanswerable":
        right = abstained
    else:
        right = not abstained and correct_answer("answerable", read, item.gold, item.query)
    return {"correct": float(right)}


def _answer_in(item: EvalItem, passages: list[str]) -> bool | None:
    """Whether the passages hold the gold answer: decidable on the answerable HotpotQA stream."""
    return answer_in_passages(item, passages) if stream_of(item) == "hotpotqa" else None


def read_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the user reads, in percent: right overall and per stream (the unanswerable stream's
    "right" is reading that the sources do not answer), and `idk_on_answerable`, the answerable
    HotpotQA questions whose passages hold the gold answer that the user reads as an abstention
    (the generator's "I don't know." or ragmend's statement), with its n."""

    def pct(values: Sequence[bool]) -> float | None:
        return round(100 * sum(values) / len(values), 2) if values else None

    def reads_abstention(r: Mapping[str, Any]) -> bool:
        return bool(r.get("abstained_read")) or is_abstention(str(r.get("response") or ""))

    def right(stream: str) -> list[bool]:
        return [r["scores"]["correct"] >= 1 for r in records if stream_of_id(r["id"]) == stream]

    held = [r for r in records if stream_of_id(r["id"]) == "hotpotqa" and r.get("answer_in_evidence")]
    return {
        "correct_read": pct([r["scores"]["correct"] >= 1 for r in records]),
        "hotpotqa_correct_read": pct(right("hotpotqa")),
        "fever_correct_read": pct(right("fever")),
        "unanswerable_abstained_read": pct(right("unanswerable")),
        "idk_on_answerable": pct([reads_abstention(r) for r in held]),
        "idk_on_answerable_n": len(held),
    }


MIXED = Task(
    name="mixed",
    title="Mixed stream: HotpotQA, FEVER and unanswerable questions",
    prompt="default",
    max_tokens=96,
    primary="correct",
    columns=(("correct", "correct %"),),
    build=build_mixed,
    score=_score,
    answer_in=_answer_in,
    read_summary=read_summary,
    reads=True,
    group=stream_of_id,
    overrides=_overrides,
    sample=interleaved,
)
