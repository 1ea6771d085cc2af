"""`ragmend bench answerability`: does the diagnosis tell questions its corpus cannot answer from
those it can, before any answer is generated?

The questions are the unanswerable task's (corpora/unanswerable.py), over its one corpus: HotpotQA
questions whose gold paragraphs are still there (answerable), the held-out ones whose gold
paragraphs were removed, and TruthfulQA questions (out of corpus). For each, the engine retrieves
as it does for a served request (its default configuration); the cross-encoder scores the passages
and the embedding model gives the question's similarity to each, as the diagnosis does; then the
answerability features (diagnosis/answerability.py). Rows are kept per split in the workspace
(`answerability-<split>.jsonl`), so a refit or another threshold reads them without retrieving
again. Reported per kind: the share called unanswerable (what becomes IE), for the fitted model
and for the rule it replaces (the best passage's relevance below diagnosis.relevance_threshold);
answerable questions also apart by whether the retrieved evidence holds the gold answer (an
answerable question whose five passages miss it is insufficient evidence, which IE rightly says,
and which a repair of retrieval is for).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.harness.workspace import Workspace
from ragmend.bench.stats import auroc
from ragmend.corpora.readers import Split, read_jsonl
from ragmend.corpora.unanswerable import KINDS
from ragmend.diagnosis.answerability import AnswerabilityModel, answerability_features
from ragmend.diagnosis.diagnoser import relevance_of
from ragmend.diagnosis.premises import premise_text
from ragmend.kg.phrases import embed_with


def question_rows(
    engine: Any, workspace: Workspace, split: Split, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Every question of the split with its features, retrieved once and kept in the workspace."""
    items = [i for i in workspace.prepare() if i.split == split]
    path = workspace.root / f"answerability-{split}.jsonl"
    done = {r["id"]: r for r in read_jsonl(path)} if path.exists() else {}
    todo = [i for i in items if i.id not in done]
    if todo:
        engine.load(roles=["embeddings", "reranker"])
        embed = embed_with(engine.models.embeddings)
    config = engine.config()
    with open(path, "a", encoding="utf-8") as out:
        for n, item in enumerate(todo, start=1):
            passages, _ = engine.pipeline.retrieve(item.query, config)
            evidence = [premise_text(p) for p in passages]
            rel = relevance_of(engine.models.reranker.score(item.query, evidence)) if evidence else None
            vectors = embed([item.query, *evidence])
            q_sims = vectors[1:] @ vectors[0]
            # What the features are computed from, not the features: a new feature is computed
            # from the rows without retrieving again.
            row = {
                "id": item.id,
                "kind": item.kind,
                "query": item.query,
                "titles": [p.title for p in passages],
                "evidence": evidence,
                "relevance": [round(float(r), 5) for r in (rel if rel is not None else [])],
                "q_sims": [round(float(x), 5) for x in q_sims],
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            done[item.id] = row
            if n % 100 == 0:
                out.flush()
                log(f"{split}: {n}/{len(todo)} questions retrieved")
    # Whether the retrieved evidence holds the gold answer (answerable questions with a span
    # answer; None otherwise): an answerable question whose evidence lacks it is IE rightly.
    return [
        with_features(done[i.id])
        | {"answer_in_evidence": workspace.task.answer_in(i, done[i.id]["evidence"])}
        for i in items
    ]


def with_features(row: Mapping[str, Any]) -> dict[str, Any]:
    """A question's row with its answerability features, as the diagnoser computes them."""
    rel = np.array(row["relevance"]) if row["relevance"] else None
    features = answerability_features(
        row["query"], row["titles"], row["evidence"], rel, np.array(row["q_sims"])
    )
    return {**row, "features": {k: round(v, 4) for k, v in features.items()}}


def evaluate(
    rows: Sequence[Mapping[str, Any]], model: AnswerabilityModel | None, relevance_threshold: float
) -> dict[str, Any]:
    """Per kind: n and the share called unanswerable, by the model and by the relevance rule; the
    AUROC of each score at telling unanswerable questions (gold removed, out of corpus) apart."""
    unanswerable = np.array([r["kind"] != "answerable" for r in rows], dtype=bool)
    rule_flag = np.array([r["features"]["rel_max"] < relevance_threshold for r in rows], dtype=bool)
    out: dict[str, Any] = {
        "n": len(rows),
        "relevance_rule": _figures(rows, rule_flag, -np.array([r["features"]["rel_max"] for r in rows])),
    }
    out["relevance_rule"]["threshold"] = relevance_threshold
    if model is not None:
        p = np.array([model.probability(r["features"]) for r in rows])
        out["model"] = _figures(rows, p < model.threshold, -p)
        out["model"]["threshold"] = model.threshold
    out["unanswerable"] = int(unanswerable.sum())
    return out


def _figures(rows: Sequence[Mapping[str, Any]], flagged: np.ndarray, score: np.ndarray) -> dict[str, Any]:
    kinds = np.array([r["kind"] for r in rows])
    y = kinds != "answerable"
    figures: dict[str, Any] = {
        "auroc": round(float(auroc(score, y)), 4) if 0 < y.sum() < len(y) else None,
        "unanswerable_flagged": round(float(flagged[y].mean()), 4) if y.any() else None,
        "answerable_flagged": round(float(flagged[~y].mean()), 4) if (~y).any() else None,
    }
    for kind in KINDS:
        mask = kinds == kind
        if mask.any():
            figures[kind] = {"n": int(mask.sum()), "flagged": round(float(flagged[mask].mean()), 4)}
    held = np.array([r.get("answer_in_evidence") for r in rows], dtype=object)
    for name, value in (("answer_in_evidence", True), ("answer_not_in_evidence", False)):
        mask = (kinds == "answerable") & (held == value)
        if mask.any():
            figures["answerable"][name] = {
                "n": int(mask.sum()),
                "flagged": round(float(flagged[mask].mean()), 4),
            }
    return figures


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
