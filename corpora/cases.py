"""The responses a detector of unsupported answers is judged on, one shape for every data set.

A `Case` is what the diagnosis sees at request time (query, evidence passages, response) plus the
ground truth it is scored against (`unsupported`) and the group its per-group figures use:

- ragtruth: RAGTruth's human-labelled responses with their sources (a response is unsupported
  when it has a labelled hallucination span); test split for reporting, the train sample to fit on;
- fever: a FEVER claim as the response, its evidence sentences (one passage per Wikipedia title)
  plus a distractor, unsupported when REFUTES;
- hotpotqa / unanswerable: answers of the local generator over the unanswerable task's corpus
  (corpora/unanswerable.py; made by bench/suites/answers.py): an answerable question's answer is
  supported when it holds the gold answer, an unanswerable question's answer never is (the corpus
  has nothing that answers it).
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragmend.corpora.readers import Split, load_fever_claims, one_in, read_jsonl, split_of
from ragmend.corpora.tasks import FEVER_FILE
from ragmend.diagnosis.answer_spans import locate_claims
from ragmend.rag.types import Passage

RAGTRUTH_TEST = "ragtruth/ragtruth_test_2598.jsonl"
RAGTRUTH_TRAIN = "ragtruth/ragtruth_train_sample_391.jsonl"
RAGTRUTH_HELD_SHARE = 4  # train-sample sources: one in four is held out of detector training
# RAGTruth's generation instructions (its paper, Appendix A), shortened: the "question" of each task.
TASK_QUERIES = {
    "Summary": "Summarize the following news.",
    "Data2txt": "Write an objective overview about the following local business based only on the "
    "provided structured data in the JSON format.",
}


@dataclass(frozen=True, kw_only=True)
class Case:
    set: str  # the data set: ragtruth, fever, hotpotqa, unanswerable
    group: str  # its per-group breakdown: RAGTruth task, unanswerable kind, ...
    id: str
    split: str  # dev | test | train (RAGTruth's train sample)
    query: str
    passages: tuple[Passage, ...]
    response: str
    unsupported: bool
    answerable: bool = True  # the corpus holds an answer to the query
    spans: tuple[tuple[int, int], ...] = ()  # labelled unsupported character spans (RAGTruth)
    # The generator's log-probability of each answer token (generated answers; None for given ones)
    token_logprobs: tuple[float, ...] | None = None
    # Whether the passages hold the gold answer (generated answers to answerable questions with a
    # span answer; None otherwise): IE on an answerable question whose evidence lacks it is right.
    answer_in_evidence: bool | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["passages"] = [p.model_dump() for p in self.passages]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> Case:
        passages = tuple(Passage(**p) for p in d["passages"])
        spans = tuple((int(a), int(b)) for a, b in d.get("spans", ()))
        logprobs = d.get("token_logprobs")
        return Case(
            **{
                **d,
                "passages": passages,
                "spans": spans,
                "token_logprobs": None if logprobs is None else tuple(logprobs),
            }
        )


def _passage(pid: str, title: str, text: str, rank: int = 0) -> Passage:
    return Passage(id=pid, doc_id=pid, title=title, text=text, score=1.0 / (1 + rank), retriever="given")


# -- RAGTruth --------------------------------------------------------------------------------------


def ragtruth_cases(path: Path, split: str, limit: int | None = None) -> list[Case]:
    """Every response of the file (QA, Summary, Data2txt), its passages as the model saw them."""
    cases = []
    for row in read_jsonl(path):
        task = str(row["task_type"])
        query = str(row.get("question") or "") or TASK_QUERIES.get(task, "")
        docs = [d for text in row["passages"] if text for d in _source(str(text), task)]
        passages = tuple(_passage(f"{row['source_id']}:{n}", "", d, n) for n, d in enumerate(docs))
        cases.append(
            Case(
                set="ragtruth",
                group=task,
                id=str(row["id"]),
                split=split,
                query=query,
                passages=passages,
                response=str(row["response"]),
                unsupported=bool(row["hallucinated"]),
                spans=tuple((int(s["start"]), int(s["end"])) for s in row.get("spans") or ()),
            )
        )
    return _sample(cases, limit)


def ragtruth_source(case: Case) -> str:
    """The source a RAGTruth response was written from (its passages' "source_id:n" ids)."""
    return case.passages[0].doc_id.rsplit(":", 1)[0] if case.passages else case.id


def ragtruth_held(case: Case) -> bool:
    """Whether a train-sample response is held out of the detector's training: one source in
    RAGTRUTH_HELD_SHARE, all of its responses, on which the detector's threshold is chosen."""
    return one_in(ragtruth_source(case), RAGTRUTH_HELD_SHARE)


def _source(passage: str, task: str) -> tuple[str, ...]:
    """A Data2txt record (a Python dict literal in the file) as readable documents; text as is."""
    if task == "Data2txt" and passage.lstrip().startswith("{"):
        try:
            return source_documents(ast.literal_eval(passage))
        except (ValueError, SyntaxError):
            pass
    return (passage,)


def source_documents(reference: str | Mapping[str, Any]) -> tuple[str, ...]:
    """Text the diagnosis can read: an article as it is; a structured record as one document per
    top-level field (scalars together), a list of records (the reviews) as one document each."""
    if isinstance(reference, str):
        return (reference.strip(),) if reference.strip() else ()
    scalars, documents = [], []
    for key, value in reference.items():
        if isinstance(value, list):
            documents += [_sentence(f"{_words(key)}: {_render(v)}") for v in value]
        elif isinstance(value, dict):
            documents.append(_sentence(f"{_words(key)}: {_render(value)}"))
        else:
            scalars.append(_sentence(f"{_words(key)}: {_render(value)}"))
    return tuple(d for d in (" ".join(scalars), *documents) if d)


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _words(key: str) -> str:
    """'RestaurantsTakeOut' -> 'restaurants take out', 'review_stars' -> 'review stars'."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key).replace("_", " ").lower()


def _render(value: Any) -> str:
    # JSON's true / false / null read as words an NLI model was trained on.
    if value is None:
        return "not given"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{_words(k)}: {_render(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_render(v) for v in value)
    return str(value).strip()


def overlaps(span: tuple[int, int], labelled: Sequence[tuple[int, int]]) -> bool:
    return any(s < span[1] and span[0] < e for s, e in labelled)


def claim_labels(case: Case, claims: Sequence[str]) -> list[bool | None]:
    """Each claim's ground truth where the data set has one: RAGTruth's labelled spans (a claim
    overlapping one is unsupported; None when the claim cannot be placed in the response,
    `locate_claims`), FEVER's claim (the response is the claim); else None."""
    if case.spans:
        return [overlaps(s, case.spans) if s else None for s in locate_claims(case.response, claims)]
    if case.set == "ragtruth":
        return [False] * len(claims)  # no labelled span: every claim is supported
    if case.set == "fever" and len(claims) == 1:
        return [case.unsupported]
    return [None] * len(claims)


# -- FEVER -------------------------------------------------------------------------------------------


def fever_cases(root: Path, split: Split, limit: int | None = None) -> list[Case]:
    """A claim judged as a response to itself: its evidence, one passage per title, and one
    distractor (the evidence of another claim), shuffled by a seed of the claim."""
    claims = load_fever_claims(root / FEVER_FILE)
    chosen = [c for c in claims if split_of(c.claim) == split]
    cases = []
    for n, c in enumerate(chosen):
        rng = random.Random(c.claim)
        other = claims[rng.randrange(len(claims))]
        docs: dict[str, list[str]] = {}
        for title, sentence in list(c.evidence) + (
            [] if other.claim == c.claim else list(other.evidence[:1])
        ):
            docs.setdefault(title, []).append(sentence)
        items = list(docs.items())
        rng.shuffle(items)
        passages = tuple(_passage(f"fever:{t}", t or "", " ".join(s), r) for r, (t, s) in enumerate(items))
        cases.append(
            Case(
                set="fever",
                group=c.label,
                id=f"fever-{n}",
                split=split,
                query=c.claim,
                passages=passages,
                response=c.claim,
                unsupported=c.label != "SUPPORTS",
            )
        )
    return _sample(cases, limit)


def _sample(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """The cases in a fixed pseudo-random order, the first `limit` of them: any prefix is a sample
    of the whole (every task, every label), not the file's head, so a run cut short still
    measures the set."""
    shuffled = sorted(cases, key=lambda c: random.Random(c.id).random())
    return shuffled if limit is None else shuffled[:limit]
