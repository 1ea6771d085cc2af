"""Evaluation tasks: each data set as one value (its items, its corpus, its prompt, its scoring).

The warm start (`ragmend train`) and the evaluation harness (`ragmend eval`) read a task through
this one shape, so nothing downstream branches on a data set's name (the reference code copies
per-data-set `if` blocks between scripts; here a data set is a row of TASKS).

Corpora (also written into every report):
- hotpotqa: the pooled, deduplicated context paragraphs (gold and distractors) of every item of
  the file, dev and test alike: 13,471 paragraphs for the 1,388 questions.
- fever: there is no FEVER wiki dump in the shared data. The corpus is the evidence sentences of
  the 1,552 SUPPORTS / REFUTES claims, one document per Wikipedia title (its sentences joined),
  plus HotpotQA paragraphs as distractors. NOT ENOUGH INFO items come from SufficientFacts: for
  a claim whose SufficientFacts variant annotators judged NOT ENOUGH, the corpus carries the
  evidence WITH the fact removed, never the original sentence; such a claim whose removed text
  still occurs anywhere in the corpus (another claim's evidence or a distractor repeats it) is
  kept as SUPPORTS / REFUTES with its original evidence instead. That leaves 534 NEI claims of
  1,552 (34%, near FEVER's third).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmend.corpora.readers import (
    Paragraph,
    Split,
    hotpotqa_paragraphs,
    load_hotpotqa,
    read_jsonl,
    split_of,
)
from ragmend.corpora.scoring import answer_correct, answer_em, answer_f1, fever_label, normalize_answer
from ragmend.errors import InputError

HOTPOTQA_FILE = "hotpotqa/hotpot_dev_distractor_merged.json"
FEVER_FILE = "fever/fever_claims_with_evidence_text.jsonl"
SUFFICIENT_FACTS_FILE = "fever/sufficientfacts_fever.jsonl"
# HotpotQA paragraphs added to the FEVER corpus as distractors: enough that retrieval has to
# choose (about twice the FEVER documents), few enough that the index and graph build quickly.
FEVER_DISTRACTORS = 3000


@dataclass(frozen=True, kw_only=True)
class EvalItem:
    """One question or claim with its gold answer (a string, or a FEVER label)."""

    id: str
    query: str
    gold: str
    split: Split
    kind: str = ""  # HotpotQA type (bridge / comparison), FEVER gold label: for breakdowns


@dataclass(frozen=True)
class Corpus:
    paragraphs: tuple[Paragraph, ...]
    description: str  # how it was built, for the report

    def rows(self) -> Iterable[dict[str, str]]:
        return (p.as_json() for p in self.paragraphs)


Score = Callable[[EvalItem, str, str | None], dict[str, float]]
# Whether the passages an answer was generated from hold the gold answer (None: not decidable for
# this task or item). Separates the generator's misses from retrieval's in the report.
EvidenceCheck = Callable[[EvalItem, list[str]], bool | None]


def _undecidable(item: EvalItem, passages: list[str]) -> bool | None:
    return None


def no_overrides(item: EvalItem) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, kw_only=True)
class Task:
    """A data set as the engine sees it: a prompt variant, a corpus, items and a scorer.

    `score(item, response, final_label)` returns the task's metrics for one answer (1/0 or a
    fraction); `final_label` is the diagnosis' gated label in claim mode (None otherwise). With
    `reads`, `response` is what the user reads: the empty string where they read an abstention
    (the abstain action's, or the answer policy's), the generated answer otherwise.
    `overrides(item)`: the request config an item is asked with beyond the task's own (a claim
    among questions is checked with the claim prompt); `sample(items, split)`: the order items
    are answered in (`first` unless the task interleaves its kinds); `group(item id)`: the part of
    the task an item belongs to, by which its report breaks the metric down.
    """

    name: str
    title: str
    prompt: str  # RAGConfig.prompt
    max_tokens: int  # generator budget: short answers, and claim labels with one reason
    primary: str  # the headline metric (the paper's: EM for HotpotQA, accuracy for FEVER)
    columns: tuple[tuple[str, str], ...]  # (metric, column title) of the task's own report columns
    build: Callable[[Path], tuple[list[EvalItem], Corpus]]
    score: Score
    answer_in: EvidenceCheck = _undecidable
    reads: bool = False
    # The group an item's id belongs to, for a report that breaks the metric down (None: one group).
    group: Callable[[str], str] | None = None
    overrides: Callable[[EvalItem], dict[str, Any]] = no_overrides
    sample: Callable[[list[EvalItem], Split], list[EvalItem]] = lambda items, split: split_sample(
        items, split
    )
    # Figures of what the user reads, beside the primary metric, from the method's records.
    read_summary: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]] | None = None

    def load(self, data_root: Path) -> tuple[list[EvalItem], Corpus]:
        try:
            return self.build(Path(data_root))
        except FileNotFoundError as e:
            where = f"is {data_root} the shared data?"
            raise InputError(f"{self.name}: {e.filename} not found ({where})") from None

    def items(self, data_root: Path, split: Split, limit: int | None = None) -> list[EvalItem]:
        chosen = self.sample(self.load(data_root)[0], split)
        return chosen[:limit] if limit is not None else chosen


def split_sample(items: list[EvalItem], split: Split, limit: int | None = None) -> list[EvalItem]:
    """The first `limit` items of a split in a fixed pseudo-random order (sha256 of the id): a
    sample of the split. The files' own order is not one: FEVER's NOT ENOUGH INFO claims sit late
    in it (20% of its first 300 test claims, 34% of all)."""
    chosen = sorted(
        (i for i in items if i.split == split), key=lambda i: hashlib.sha256(i.id.encode()).digest()
    )
    return chosen[:limit] if limit is not None else chosen


# -- HotpotQA ------------------------------------------------------------------------------------


def _hotpotqa(root: Path) -> tuple[list[EvalItem], Corpus]:
    raw = load_hotpotqa(root / HOTPOTQA_FILE)
    items = [EvalItem(id=i.id, query=i.question, gold=i.answer, split=i.split, kind=i.type) for i in raw]
    paragraphs = hotpotqa_paragraphs(raw)
    description = (
        f"HotpotQA distractor dev file ({len(raw)} questions): the pooled, deduplicated context "
        f"paragraphs of every question (gold and distractors), {len(paragraphs)} paragraphs"
    )
    return items, Corpus(tuple(paragraphs), description)


def _score_hotpotqa(item: EvalItem, response: str, final_label: str | None) -> dict[str, float]:
    return {
        "em": float(answer_em(response, item.gold)),
        "f1": answer_f1(response, item.gold),
        # The gold answer occurs in the response (a lenient match for chatty generators).
        "contains": float(answer_correct(response, item.gold)),
    }


def answer_in_passages(item: EvalItem, passages: list[str]) -> bool | None:
    """The normalised gold answer occurs in the passages; yes / no answers never occur as such."""
    if normalize_answer(item.gold) in ("yes", "no", ""):
        return None
    return answer_correct(" ".join(passages), item.gold)


# -- FEVER ---------------------------------------------------------------------------------------


def _fever(root: Path) -> tuple[list[EvalItem], Corpus]:
    distractors = hotpotqa_paragraphs(load_hotpotqa(root / HOTPOTQA_FILE))[:FEVER_DISTRACTORS]
    return fever_with(root, distractors)


def fever_with(root: Path, distractors: list[Paragraph]) -> tuple[list[EvalItem], Corpus]:
    """FEVER's claims over its evidence documents and `distractors` (a NOT ENOUGH INFO claim
    whose removed fact any of them states keeps its original evidence and label)."""
    claims = list(read_jsonl(root / FEVER_FILE))
    reduced: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(root / SUFFICIENT_FACTS_FILE):
        if row.get("label_after") == "NOT ENOUGH":
            reduced.setdefault(str(row["claim"]), row)

    def sentences_of(row: dict[str, Any]) -> list[tuple[str, str]]:
        nei = reduced.get(str(row["claim"]))
        if nei is not None:
            return [(str(t), str(s)) for t, s in nei["evidence"]]
        return [(str(e["title"]), str(e["sentence"])) for e in row["evidence"]]

    def documents(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
        docs: dict[str, list[str]] = {}
        for row in rows:
            for title, sentence in sentences_of(row):
                sents = docs.setdefault(title, [])
                if sentence not in sents:
                    sents.append(sentence)
        return docs

    distractor_text = " ".join(p.text for p in distractors).lower()
    # A removed fact that the corpus still states (another claim's evidence, a distractor) would
    # make the item decidable: such claims keep their original evidence and label (checked until
    # nothing changes, since restoring one claim's evidence can reveal another's fact).
    while True:
        text = " ".join(" ".join(s) for s in documents(claims).values()).lower() + " " + distractor_text
        leaked = [
            c for c, row in reduced.items() if any(r.lower().strip() in text for r in row.get("removed", []))
        ]
        if not leaked:
            break
        for c in leaked:
            del reduced[c]
    docs = documents(claims)
    items = []
    for row in claims:
        claim = str(row["claim"])
        label = "NOT ENOUGH INFO" if claim in reduced else str(row["label"])
        items.append(
            EvalItem(id=_fever_id(claim), query=claim, gold=label, split=split_of(claim), kind=label)
        )
    paragraphs = [Paragraph(f"fever:{title}", title, " ".join(sents)) for title, sents in docs.items()]
    fever_titles = set(docs)
    distractors = [p for p in distractors if p.title not in fever_titles]
    counts = {lab: sum(i.gold == lab for i in items) for lab in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")}
    description = (
        f"FEVER: the evidence sentences of {len(claims)} dev claims (fever_claims_with_evidence_text), "
        f"one document per Wikipedia title ({len(paragraphs)} documents), plus {len(distractors)} "
        "HotpotQA paragraphs as distractors (no FEVER wiki dump is available). NOT ENOUGH INFO items: "
        f"{counts['NOT ENOUGH INFO']} claims whose SufficientFacts variant (a fact removed, judged NOT "
        "ENOUGH by annotators) replaces their evidence in the corpus; labels: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
    )
    return items, Corpus(tuple(paragraphs + distractors), description)


def _fever_id(claim: str) -> str:
    return "fever-" + hashlib.sha256(claim.encode()).hexdigest()[:12]


def _score_fever(item: EvalItem, response: str, final_label: str | None) -> dict[str, float]:
    """Accuracy of the label the system returns: the evidence-gated label where the diagnosis
    gave one (IE / LEM abstain as NOT ENOUGH INFO, "Unverified", as the paper counts it), else the
    label parsed from the response (an unparsable response counts as wrong)."""
    predicted = final_label if final_label is not None else fever_label(response)
    return {"accuracy": float(predicted == item.gold)}


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task(
            name="hotpotqa",
            title="HotpotQA",
            prompt="concise",
            max_tokens=32,
            primary="em",
            columns=(("em", "EM %"), ("f1", "F1 %"), ("contains", "answer in response %")),
            build=_hotpotqa,
            score=_score_hotpotqa,
            answer_in=answer_in_passages,
        ),
        Task(
            name="fever",
            title="FEVER",
            prompt="claim",
            max_tokens=48,
            primary="accuracy",
            columns=(("accuracy", "ACC %"),),
            build=_fever,
            score=_score_fever,
        ),
    )
}


def all_tasks() -> dict[str, Task]:
    """Every evaluation task: the paper's data sets and the mixed stream built on them."""
    from ragmend.corpora.mixed import MIXED  # it builds on this module: imported when asked

    return {**TASKS, MIXED.name: MIXED}


def get_task(name: str) -> Task:
    tasks = all_tasks()
    try:
        return tasks[name]
    except KeyError:
        raise InputError(f"unknown dataset {name!r}; datasets: {', '.join(tasks)}") from None
