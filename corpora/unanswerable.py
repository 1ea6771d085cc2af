"""Questions the corpus cannot answer, beside questions it can, over one HotpotQA-based corpus.

The corpus is the pooled HotpotQA paragraphs (corpora.tasks) with every paragraph of the gold
titles of a held-out sample removed. Three kinds of item share it, so one index serves all:

- `gold_removed`: the held-out HotpotQA questions; their supporting paragraphs are gone, so the
  evidence retrieved for them is at best about the same entities, never the answer;
- `out_of_corpus`: TruthfulQA questions (misconceptions, health, law, fiction...), which a
  Wikipedia paragraph pool about other things does not answer;
- `answerable`: every other HotpotQA question, whose gold paragraphs are still there: the control
  that says how often an answerable question is wrongly called unanswerable.

Each kind is split by the shared rule (sha256 of the HotpotQA id or of the TruthfulQA question):
dev to tune on, test to report. The held-out sample is the first `HELD_OUT` of each split in the
fixed pseudo-random order of `tasks.split_sample`.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ragmend.corpora.readers import hotpotqa_paragraphs, load_hotpotqa, split_of
from ragmend.corpora.scoring import answer_correct, normalize_answer
from ragmend.corpora.tasks import Corpus, EvalItem, Task, split_sample
from ragmend.diagnosis.choices import offered_choice, picked_alternative

HOTPOTQA_FILE = "hotpotqa/hotpot_dev_distractor_merged.json"
TRUTHFULQA_FILE = "truthfulqa/TruthfulQA.csv"
HELD_OUT = 100  # HotpotQA questions per split whose gold paragraphs leave the corpus
KINDS = ("answerable", "gold_removed", "out_of_corpus")


def build_unanswerable(root: Path) -> tuple[list[EvalItem], Corpus]:
    raw = load_hotpotqa(root / HOTPOTQA_FILE)
    hotpot = [
        EvalItem(id=i.id, query=i.question, gold=i.answer, split=i.split, kind="answerable") for i in raw
    ]
    held = {i.id for i in split_sample(hotpot, "dev", HELD_OUT) + split_sample(hotpot, "test", HELD_OUT)}
    removed_titles = {t for i in raw if i.id in held for t in i.supporting_titles}
    paragraphs = [p for p in hotpotqa_paragraphs(raw) if p.title not in removed_titles]
    items = [
        EvalItem(
            id=i.id,
            query=i.query,
            gold=i.gold,
            split=i.split,
            kind="gold_removed" if i.id in held else i.kind,
        )
        for i in hotpot
    ]
    with open(root / TRUTHFULQA_FILE, newline="", encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(f)):
            q = row["Question"].strip()
            items.append(
                EvalItem(
                    id=f"truthfulqa-{n}",
                    query=q,
                    gold=row["Best Answer"].strip(),
                    split=split_of(q),
                    kind="out_of_corpus",
                )
            )
    counts = {k: sum(i.kind == k for i in items) for k in KINDS}
    description = (
        f"HotpotQA pooled paragraphs ({len(paragraphs)}) without the {len(removed_titles)} gold titles of "
        f"{len(held)} held-out questions ({HELD_OUT} per split); items: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + " (out_of_corpus: TruthfulQA questions)"
    )
    return items, Corpus(tuple(paragraphs), description)


def answerable(kind: str) -> bool:
    return kind == "answerable"


def correct_answer(kind: str, response: str, gold: str, question: str = "") -> bool:
    """An answerable question's answer is right when it holds the gold answer; an unanswerable
    question has no right answer from this corpus. An answer to a question offering two answers
    ("Who is younger, A or B?") is right when the alternative it picks is the gold one: "Moya
    Brennan is younger than Keisuke Kuwata." holds the gold "Keisuke Kuwata" and picks the other
    (containment alone would label such an answer by the names it holds, not by its pick)."""
    if not answerable(kind):
        return False
    choice = offered_choice(question) if question else None
    picked = picked_alternative(question, response) if choice else None
    if choice is not None and isinstance(picked, int):
        named = choice.alternatives[picked]
        return answer_correct(named, gold) or answer_correct(gold, named)
    return answer_correct(response, gold)


def _score(item: EvalItem, response: str, final_label: str | None) -> dict[str, float]:
    return {"correct": float(correct_answer(item.kind, response, item.gold, item.query))}


def _answer_in(item: EvalItem, passages: list[str]) -> bool | None:
    if not answerable(item.kind) or normalize_answer(item.gold) in ("yes", "no", ""):
        return None
    return answer_correct(" ".join(passages), item.gold)


# The server's own prompt and length: the diagnosis is judged on what a chat client would read.
UNANSWERABLE = Task(
    name="unanswerable",
    title="HotpotQA with held-out gold paragraphs, and TruthfulQA",
    prompt="default",
    max_tokens=96,
    primary="correct",
    columns=(("correct", "correct %"),),
    build=build_unanswerable,
    score=_score,
    answer_in=_answer_in,
)
