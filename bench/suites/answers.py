"""The local generator's answers that `ragmend bench detect` and `ragmend verdict fit` judge:
HotpotQA questions (answerable, or with their gold paragraphs removed) and TruthfulQA questions,
over the unanswerable task's corpus (corpora/unanswerable.py), made once per split and kept."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragmend.bench.harness.workspace import Workspace
from ragmend.corpora.cases import RAGTRUTH_TEST, RAGTRUTH_TRAIN, Case, fever_cases, ragtruth_cases
from ragmend.corpora.readers import Split, read_jsonl
from ragmend.corpora.tasks import EvalItem, EvidenceCheck, split_sample
from ragmend.corpora.unanswerable import UNANSWERABLE, correct_answer
from ragmend.diagnosis.premises import premise_text
from ragmend.engine import Engine
from ragmend.settings import Settings


def generated_cases(
    engine: Any,
    workspace: Workspace,
    split: Split,
    limits: dict[str, int],
    log: Callable[[str], None] = print,
) -> list[Case]:
    """The local generator's answers to the unanswerable task's items of one split, `limits[kind]`
    of each kind (answerable HotpotQA, gold_removed, out_of_corpus), answered once and appended
    to `answers-<split>.jsonl` as they come (an interrupted run resumes)."""
    items = workspace.prepare()
    path = workspace.root / f"answers-{split}.jsonl"
    done = {c.id: c for c in (Case.from_json(r) for r in read_jsonl(path))} if path.exists() else {}
    wanted = [
        i for kind, n in limits.items() for i in split_sample([i for i in items if i.kind == kind], split, n)
    ]
    todo = [i for i in wanted if i.id not in done]
    if todo:
        engine.load()
    with open(path, "a", encoding="utf-8") as out:
        for n, item in enumerate(todo, start=1):
            a = engine.answer(item.query)
            answerable = item.kind == "answerable"
            case = Case(
                set="hotpotqa" if answerable else "unanswerable",
                group=item.kind,
                id=item.id,
                split=split,
                query=item.query,
                passages=tuple(a.evidence),
                response=a.response,
                unsupported=not correct_answer(item.kind, a.response, item.gold, item.query),
                answerable=answerable,
                token_logprobs=a.token_logprobs,
            )
            out.write(json.dumps(case.as_json(), ensure_ascii=False) + "\n")
            out.flush()
            done[item.id] = case
            if n % 20 == 0:
                log(f"{split}: answered {n}/{len(todo)}")
    # Answers made before a change of the labelling rule are labelled by the rule in force.
    return [_relabelled(done[i.id], i, workspace.task.answer_in) for i in wanted]


def _relabelled(case: Case, item: EvalItem, answer_in: EvidenceCheck) -> Case:
    right = correct_answer(item.kind, case.response, item.gold, item.query)
    held = answer_in(item, [premise_text(p) for p in case.passages])
    return replace(case, unsupported=not right, answer_in_evidence=held)


def recorded_cases(
    workspace: Workspace, data_root: Path, split: Split, sets: Sequence[str]
) -> dict[tuple[str, str], Case]:
    """The cases of `sets` by (set, id) without a model: the given ones read from the data, the
    local generator's answers from `answers-<split>.jsonl` in the workspace, as far as made."""
    given = [s for s in sets if s in ("ragtruth", "fever")]
    out = {
        (c.set, c.id): c for cs in case_sets(None, workspace, data_root, split, given).values() for c in cs
    }
    path = workspace.root / f"answers-{split}.jsonl"
    if path.exists() and any(s in ("hotpotqa", "unanswerable") for s in sets):
        out.update({(c.set, c.id): c for c in (Case.from_json(r) for r in read_jsonl(path))})
    return out


def unanswerable_workspace(root: Path, data_root: Path) -> Workspace:
    return Workspace(UNANSWERABLE, root, data_root)


def detector_engine(
    base: Settings, root: Path, data_root: Path, kg: bool = False
) -> tuple[Workspace, Engine]:
    """The detector benchmarks' workspace (prepared) and engine (`ragmend bench detect`, the
    diagnosis snapshot): the unanswerable task's corpus, the diagnosis as `base` configures it, no
    repair, the knowledge graph only where asked."""
    ws = unanswerable_workspace(root, data_root)
    ws.prepare()
    return ws, Engine(ws.settings(base, kg={"enabled": kg}, policy={"repair": False}))


# How many generated answers of each kind a split gets (answerable HotpotQA, gold removed,
# TruthfulQA): about 8 s an answer with the default generator on 2 cores, about 67 minutes for
# DEV and 27 for TEST. DEV is the larger: the verdict's answer model and its thresholds are fitted
# on it (80 answerable DEV answers until 2026-11-26 left 18 features fitted on 150 answers).
GENERATED = {
    "dev": {"answerable": 300, "gold_removed": 100, "out_of_corpus": 100},
    "test": {"answerable": 100, "gold_removed": 60, "out_of_corpus": 40},
}
SETS = ("ragtruth", "hotpotqa", "fever", "unanswerable")


def case_sets(
    engine: Any,
    workspace: Workspace,
    data_root: Path,
    split: Split,
    sets: Sequence[str] = SETS,
    limit: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, list[Case]]:
    """The cases of each data set for one split: test to report on; dev (with RAGTruth's train
    sample) to fit on. `limit` caps each set (a sample in a fixed pseudo-random order)."""
    out: dict[str, list[Case]] = {}
    if "ragtruth" in sets:
        name = RAGTRUTH_TEST if split == "test" else RAGTRUTH_TRAIN
        out["ragtruth"] = ragtruth_cases(data_root / name, "test" if split == "test" else "train", limit)
    if "hotpotqa" in sets or "unanswerable" in sets:
        limits = {k: min(n, limit) if limit else n for k, n in GENERATED[split].items()}
        generated = generated_cases(engine, workspace, split, limits, log)
        for name in ("hotpotqa", "unanswerable"):
            if name in sets:
                out[name] = [c for c in generated if c.set == name]
    if "fever" in sets:
        out["fever"] = fever_cases(data_root, split, limit)
    return out
