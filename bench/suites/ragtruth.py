"""`ragmend eval --suite ragtruth`: the diagnosis as a hallucination detector on RAGTruth
(the EGC paper's protocol).

RAGTruth's responses were written by six LLMs from a given source and labelled by people, span by
span; a response is hallucinated when it has at least one labelled span (the EGC paper's response-level
label). The copy in ../shared/data keeps the source only for the Summary (news articles) and
Data2txt (Yelp business records in JSON) tasks; its QA items have empty passages and are left out.

Each response goes through the engine's Diagnoser exactly as an answer of the server does, with the
source as the evidence: the article (or the JSON record rendered as text: one document per
top-level field, each review its own) is cut into passages by the ingest splitter the server's index
uses (rag.chunk_size tokens), the response into claims (sentences), and every claim is scored
against every passage by the configured NLI model in one batch; EGC over question, passages and
claims. The question is RAGTruth's own instruction for the task. Nothing is generated and nothing
is tuned here: the thresholds are the shipped ones (fitted on held-out NLI pairs; docs/diagnosis.md).

Reported, overall and per task and per LLM: the AUROC of each signal as a hallucination score
(95% bootstrap interval), precision / recall / F1 of the diagnosis' own verdicts at the shipped
thresholds, a claim-level AUROC (a claim is hallucinated when it overlaps a labelled span), and a
logistic regression over the signals scored by 5-fold cross-validation grouped by source text
(fitted on 4/5 of these responses, scored on the other 1/5: labelled so in the report).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.stats import auroc, auroc_interval, stratified_auroc
from ragmend.corpora.cases import TASK_QUERIES, overlaps, source_documents
from ragmend.diagnosis.answer_spans import locate_claims
from ragmend.diagnosis.types import Diagnosis
from ragmend.engine import Engine
from ragmend.errors import InputError
from ragmend.fileio import archive_file, atomic_write_text
from ragmend.logistic import fit_logistic
from ragmend.models.nli import nli_identity
from ragmend.rag.types import Passage

RAGTRUTH_FILE = "ragtruth/ragtruth_test_balanced600_SriVarshini09.jsonl"
FOLDS = 5
PER_MODEL_SIGNALS = ("mean_unsupported", "weakest_claim", "egc")
# Settings this suite runs under, over the deployment's: a given source has no corpus graph, and a
# summary runs to 20 sentences where the server's default reads the first 8 claims of an answer.
OVERRIDES: dict[str, Any] = {"kg": {"enabled": False}, "diagnosis": {"max_claims": 32}}


@dataclass(frozen=True, kw_only=True)
class RagTruthItem:
    id: str
    source_id: str
    task_type: str
    model: str
    documents: tuple[str, ...]  # the source as text, before it is cut into passages
    response: str
    spans: tuple[tuple[int, int], ...]  # labelled hallucination spans, character offsets

    @property
    def hallucinated(self) -> bool:
        return bool(self.spans)


def load_ragtruth(path: Path, tasks: Sequence[str] = tuple(TASK_QUERIES)) -> tuple[list[RagTruthItem], int]:
    """The responses of `tasks` that have a source, and how many rows were left out (no source)."""
    items, skipped = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["task_type"] not in tasks:
                skipped += 1
                continue
            documents = source_documents(row["reference"])
            if not documents:
                skipped += 1
                continue
            spans = tuple((int(s["start"]), int(s["end"])) for s in row["labels"])
            items.append(
                RagTruthItem(
                    id=str(row["id"]),
                    source_id=str(row["source_id"]),
                    task_type=row["task_type"],
                    model=row["model"],
                    documents=documents,
                    response=row["response"],
                    spans=spans,
                )
            )
    return items, skipped


def diagnosis_record(
    item: RagTruthItem, d: Diagnosis, passages: int, setup: Mapping[str, Any]
) -> dict[str, Any]:
    """What the summary needs of one diagnosis (the claims with their best scores over passages)."""
    claims = list(d.e_r.hypotheses)
    located = locate_claims(item.response, [h.hypothesis for h in claims])
    return {
        "id": item.id,
        "source_id": item.source_id,
        "task_type": item.task_type,
        "model": item.model,
        "hallucinated": item.hallucinated,
        "setup": dict(setup),
        "passages": passages,
        "claims": [
            {
                "text": h.hypothesis,
                "state": h.state,
                "entail": max(s.entail for s in h.scores),
                "contradict": max(s.contradict for s in h.scores),
                "span": list(span) if span else None,
                "hallucinated": overlaps(span, item.spans) if span else None,
            }
            for h, span in zip(claims, located, strict=True)
        ],
        "e_r": d.e_r.state,
        "e_q": d.e_q.state,
        "failure": d.failure,
        "evidence_conflict": d.evidence_conflict,
        "egc": {k: getattr(d.egc, k) for k in (*EGC_FEATURES, "score")},
        "truncated": any(s.truncated for h in claims for s in h.scores if s.passage != "joint"),
        "diagnose_s": d.timings.get("total_s", 0.0),
    }


class RagTruthRun:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.splitter = engine.corpus.ingestor()
        s = engine.settings
        # Everything a record's numbers depend on: records made under another setup are redone.
        self.setup = {
            "nli": nli_identity(s.models),
            "chunk_size": s.rag.chunk_size,
            "chunk_overlap": s.rag.chunk_overlap,
            "max_claims": s.diagnosis.max_claims,
            "entail_threshold": s.diagnosis.entail_threshold,
            "contradict_threshold": s.diagnosis.contradict_threshold,
            "egc_tau": s.diagnosis.egc_tau,
            "joint_premise": s.diagnosis.joint_premise,
        }

    def passages(self, item: RagTruthItem) -> tuple[Passage, ...]:
        chunks = [c for doc in item.documents for c in self.splitter.split(doc)]
        return tuple(
            Passage(id=f"c{i}", doc_id=item.source_id, title="", text=c, score=0.0, retriever="given")
            for i, c in enumerate(chunks)
        )

    def run_item(self, item: RagTruthItem) -> dict[str, Any]:
        passages = self.passages(item)
        d = self.engine.diagnoser.diagnose(TASK_QUERIES[item.task_type], passages, item.response)
        return diagnosis_record(item, d, len(passages), self.setup)


# -- signals ----------------------------------------------------------------------------------
# Each maps a record to a hallucination score (higher = more likely hallucinated), so every AUROC
# reads the same way; EGC's features point the other way and are negated (isolation is not).
EGC_FEATURES = ("coverage", "support_density", "agreement", "connectivity", "isolation")


def _entail(r: Mapping[str, Any]) -> np.ndarray:
    return np.array([c["entail"] for c in r["claims"]] or [1.0])


def _egc_signal(feature: str) -> Callable[[Mapping[str, Any]], float]:
    sign = 1.0 if feature == "isolation" else -1.0
    return lambda r: sign * r["egc"][feature]


Signal = Callable[[Mapping[str, Any]], float]
SIGNALS: dict[str, tuple[str, Signal]] = {
    "weakest_claim": (
        "1 - the least-supported claim's best P(entail) over the passages",
        lambda r: 1.0 - float(_entail(r).min()),
    ),
    "mean_unsupported": (
        "mean over claims of 1 - best P(entail)",
        lambda r: float((1.0 - _entail(r)).mean()),
    ),
    "unentailed_share": (
        "share of claims the diagnosis does not find entailed",
        lambda r: float(np.mean([c["state"] != "entail" for c in r["claims"]] or [0.0])),
    ),
    "max_contradiction": (
        "the highest P(contradict) of any claim against any passage",
        lambda r: max((c["contradict"] for c in r["claims"]), default=0.0),
    ),
    "egc": ("-EGC score (EGC paper)", lambda r: -r["egc"]["score"]),
    **{
        f"egc_{k}": (f"{'' if k == 'isolation' else '-'}EGC {k.replace('_', ' ')}", _egc_signal(k))
        for k in EGC_FEATURES
    },
    "claims": (
        "number of claims (a length baseline, not a diagnosis signal)",
        lambda r: float(len(r["claims"])),
    ),
}
# The diagnosis' own yes/no verdicts at the shipped thresholds.
VERDICTS: dict[str, tuple[str, Callable[[Mapping[str, Any]], bool]]] = {
    "e_r_not_entail": ("response entailment e_r is not 'entail'", lambda r: r["e_r"] != "entail"),
    "e_r_contradict": ("e_r is 'contradict'", lambda r: r["e_r"] == "contradict"),
    "failure": (
        "any failure type (kappa off: no KG for a given source)",
        lambda r: r["failure"] != "NoFailure",
    ),
}
LOGISTIC_FEATURES = (
    "weakest_claim",
    "mean_unsupported",
    "unentailed_share",
    "max_contradiction",
    *(f"egc_{k}" for k in EGC_FEATURES),
)


def signal_matrix(records: Sequence[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
    return np.array([[SIGNALS[n][1](r) for n in names] for r in records], dtype=np.float64)


def fold_of(source_id: str) -> int:
    # Grouped by source text: the six LLMs' responses to one article never straddle train and test.
    return int(hashlib.sha256(source_id.encode()).hexdigest(), 16) % FOLDS


def cross_validated_scores(records: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Out-of-fold probabilities of the logistic regression over LOGISTIC_FEATURES."""
    x = signal_matrix(records, LOGISTIC_FEATURES)
    y = np.array([r["hallucinated"] for r in records])
    folds = np.array([fold_of(r["source_id"]) for r in records])
    out = np.full(len(records), np.nan)
    for k in range(FOLDS):
        test = folds == k
        train = ~test
        if test.any() and len(set(y[train])) == 2:
            out[test] = fit_logistic(x[train], y[train]).proba(x[test])
    return out


def _auroc_row(scores: np.ndarray, labels: np.ndarray, seed: int) -> dict[str, Any]:
    lo, hi = auroc_interval(scores, labels, seed=seed) if labels.any() and not labels.all() else (np.nan,) * 2
    return {"auroc": _round(auroc(scores, labels)), "ci95": [_round(lo), _round(hi)]}


def _round(v: float) -> float | None:
    return None if np.isnan(v) else round(float(v), 4)


def verdict_row(pred: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    tp = int((pred & labels).sum())
    precision = tp / max(1, int(pred.sum()))
    recall = tp / max(1, int(labels.sum()))
    f1 = 2 * precision * recall / max(1e-12, precision + recall)
    tn = int((~pred & ~labels).sum())
    p_neg, r_neg = tn / max(1, int((~pred).sum())), tn / max(1, int((~labels).sum()))
    f1_neg = 2 * p_neg * r_neg / max(1e-12, p_neg + r_neg)
    return {
        "flagged": round(float(pred.mean()), 4),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "macro_f1": round((f1 + f1_neg) / 2, 4),
    }


def summarize_group(records: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    labels = np.array([r["hallucinated"] for r in records])
    out: dict[str, Any] = {"n": len(records), "hallucinated": int(labels.sum())}
    out["signals"] = {
        name: _auroc_row(signal_matrix(records, [name])[:, 0], labels, seed) for name in SIGNALS
    }
    out["verdicts"] = {
        name: verdict_row(np.array([f(r) for r in records]), labels) for name, (_, f) in VERDICTS.items()
    }
    claims = [c for r in records for c in r["claims"] if c["hallucinated"] is not None]
    claim_labels = np.array([c["hallucinated"] for c in claims])
    out["claim_level"] = {
        "claims": len(claims),
        "hallucinated": int(claim_labels.sum()),
        "unsupported": _auroc_row(1.0 - np.array([c["entail"] for c in claims]), claim_labels, seed),
        "contradiction": _auroc_row(np.array([c["contradict"] for c in claims]), claim_labels, seed),
        "not_entailed": verdict_row(np.array([c["state"] != "entail" for c in claims]), claim_labels),
    }
    out["diagnose_p50_s"] = round(float(np.median([r["diagnose_s"] for r in records])), 3)
    out["passages_p50"] = float(np.median([r["passages"] for r in records]))
    out["claims_p50"] = float(np.median([len(r["claims"]) for r in records]))
    return out


def summarize_ragtruth(records: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"all": summarize_group(records, seed)}
    for task in TASK_QUERIES:
        if rows := [r for r in records if r["task_type"] == task]:
            out[task] = summarize_group(rows, seed)
    labels = np.array([r["hallucinated"] for r in records])
    tasks = np.array([r["task_type"] for r in records])
    cv = cross_validated_scores(records)
    keep = ~np.isnan(cv)
    for group in ("all", *TASK_QUERIES):
        mask = keep & ((tasks == group) | (group == "all"))
        if group in out and mask.any():
            out[group]["logistic_cv"] = _auroc_row(cv[mask], labels[mask], seed)
    # The tasks' base rates differ (Data2txt responses are hallucinated far more often), so the
    # pooled AUROC rewards telling the tasks apart: the task alone scores this, and the
    # within-task AUROC (positive-negative pairs of one task only) is what pooling cannot inflate.
    out["all"]["task_only_auroc"] = _round(auroc(tasks == "Data2txt", labels))
    out["all"]["within_task"] = {
        n: _round(stratified_auroc(signal_matrix(records, [n])[:, 0], labels, tasks)) for n in SIGNALS
    }
    out["all"]["within_task"]["logistic_cv"] = _round(stratified_auroc(cv[keep], labels[keep], tasks[keep]))
    per_model: dict[str, Any] = {}
    for model in sorted({r["model"] for r in records}):
        rows = [r for r in records if r["model"] == model]
        y = np.array([r["hallucinated"] for r in rows])
        t = np.array([r["task_type"] for r in rows])
        per_model[model] = {"n": len(rows), "hallucinated": int(y.sum())} | {
            n: _round(stratified_auroc(signal_matrix(rows, [n])[:, 0], y, t)) for n in PER_MODEL_SIGNALS
        }
    out["per_model"] = per_model
    return out


# -- the suite --------------------------------------------------------------------------------


def run_ragtruth_suite(
    engine: Engine,
    data_root: Path,
    workdir: Path,
    reports: Path,
    limit: int | None,
    command: str,
    on_item: Callable[[int, int], None] | None = None,
    restart: bool = False,
) -> dict[str, Any]:
    """Diagnose every response (or the first `limit`), then write reports/ragtruth.{md,json}.

    The records (workdir/ragtruth.test.jsonl) hold every claim's scores: the report is rebuilt
    from them, and they are redone when the NLI weights or the item list differ. `restart`: set
    them aside (archive/<UTC time>/) and diagnose every response again, e.g. after the diagnosis
    changed (its weights unchanged, nothing else would tell)."""
    started = time.monotonic()
    path = data_root / RAGTRUTH_FILE
    if not path.exists():
        raise InputError(f"{path} not found: the RAGTruth copy of ../shared/data (see its README)")
    items, skipped = load_ragtruth(path)
    items = items[:limit]
    run = RagTruthRun(engine)
    records_path = workdir / "ragtruth.test.jsonl"
    if restart:
        archive_file(records_path)
    records = _saved(records_path, items, run.setup)
    reused = records is not None
    if records is None:
        records = []
        for n, item in enumerate(items, start=1):
            records.append(run.run_item(item))
            if on_item is not None:
                on_item(n, len(items))
        atomic_write_text(records_path, "".join(json.dumps(r) + "\n" for r in records))
    summary = summarize_ragtruth(records)
    meta = {
        "command": command,
        "minutes": round((time.monotonic() - started) / 60, 2),
        "reused_records": reused,
        "diagnosis_minutes": round(sum(r["diagnose_s"] for r in records) / 60, 2),
        **run.setup,
        "file": RAGTRUTH_FILE,
        "left_out": skipped,
        "at_claim_cap": sum(len(r["claims"]) >= engine.settings.diagnosis.max_claims for r in records),
        "truncated": sum(bool(r["truncated"]) for r in records),
    }
    from ragmend.bench.suites.ragtruth_report import write_ragtruth_report

    write_ragtruth_report(summary, meta, records, reports)
    return {**summary, "_meta": meta}


def _saved(
    path: Path, items: Sequence[RagTruthItem], setup: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """Earlier records when they cover exactly these items under the same setup (NLI weights,
    chunking, claim cap, thresholds)."""
    if not path.exists():
        return None
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if [r["id"] for r in records] != [i.id for i in items] or any(r.get("setup") != setup for r in records):
        return None
    return records


def claim_counts(records: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """How many claims could not be placed in their response (left out of the claim level)."""
    return Counter("placed" if c["span"] else "unplaced" for r in records for c in r["claims"])
