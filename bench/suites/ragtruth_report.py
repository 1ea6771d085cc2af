"""reports/ragtruth.md, reports/ragtruth.json and the ROC plot from the RAGTruth summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.markdown import markdown_table
from ragmend.bench.suites.ragtruth import (
    PER_MODEL_SIGNALS,
    SIGNALS,
    TASK_QUERIES,
    VERDICTS,
    claim_counts,
    signal_matrix,
)
from ragmend.fileio import atomic_write_json, atomic_write_text

# The EGC paper, Table II: the RAGTruth QA test split (875 responses, six LLMs): a split this copy cannot
# score (its QA items have no passages). Beside ours for scale only.
PAPER_QA = {"egc": 0.556, "egc_coverage": 0.589, "egc_support_density": 0.557}
ROC_SIGNALS = ("weakest_claim", "mean_unsupported", "max_contradiction", "egc", "claims")


def _auc(row: Mapping[str, Any] | None) -> str:
    if not row or row.get("auroc") is None:
        return "-"
    lo, hi = row["ci95"]
    return f"{row['auroc']:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{row['auroc']:.3f}"


def _groups(summary: Mapping[str, Any]) -> list[str]:
    return ["all", *[t for t in TASK_QUERIES if t in summary]]


def _f3(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _rates(summary: Mapping[str, Any]) -> str:
    groups = [g for g in _groups(summary) if g != "all"]
    return ", ".join(f"{g} {100 * summary[g]['hallucinated'] / max(1, summary[g]['n']):.1f}%" for g in groups)


def signal_table(summary: Mapping[str, Any]) -> list[str]:
    groups = _groups(summary)
    within = summary["all"].get("within_task", {})
    head = [
        "signal",
        "what it is",
        *[f"{g} (n={summary[g]['n']}, {summary[g]['hallucinated']} hall.)" for g in groups],
        "all, within task",
        "EGC paper (QA split)",
    ]
    rows = [(n, what, [summary[g]["signals"][n] for g in groups]) for n, (what, _) in SIGNALS.items()]
    rows.append(
        (
            "logistic_cv",
            "logistic regression over the NLI and EGC signals, 5-fold CV grouped by source "
            "(fitted on these responses: out-of-fold scores)",
            [summary[g].get("logistic_cv") for g in groups],
        )
    )
    return markdown_table(
        head,
        [
            [name, what, *[_auc(c) for c in cells], _f3(within.get(name)), PAPER_QA.get(name, "-")]
            for name, what, cells in rows
        ],
    )


def verdict_table(summary: Mapping[str, Any]) -> list[str]:
    head = [
        "verdict",
        "what it is",
        "group",
        "flagged %",
        "precision",
        "recall",
        "F1 (hallucinated)",
        "macro-F1",
    ]
    rows = []
    for name, (what, _) in VERDICTS.items():
        for g in _groups(summary):
            v = summary[g]["verdicts"][name]
            scores = [_f3(v[k]) for k in ("precision", "recall", "f1", "macro_f1")]
            rows.append([name, what, g, f"{100 * v['flagged']:.1f}", *scores])
    return markdown_table(head, rows)


def claim_table(summary: Mapping[str, Any]) -> list[str]:
    head = [
        "group",
        "claims",
        "hallucinated",
        "AUROC 1 - best P(entail)",
        "AUROC max P(contradict)",
        "not entailed: precision / recall / F1",
    ]
    rows = []
    for g in _groups(summary):
        c = summary[g]["claim_level"]
        v = c["not_entailed"]
        prf = " / ".join(_f3(v[k]) for k in ("precision", "recall", "f1"))
        rows.append(
            [g, c["claims"], c["hallucinated"], _auc(c["unsupported"]), _auc(c["contradiction"]), prf]
        )
    return markdown_table(head, rows)


def model_table(summary: Mapping[str, Any]) -> list[str]:
    head = ["LLM", "n", "hallucinated %", *[f"AUROC {k}" for k in PER_MODEL_SIGNALS]]
    rows = [
        [model, row["n"], f"{100 * row['hallucinated'] / max(1, row['n']):.1f}"]
        + [_f3(row[k]) for k in PER_MODEL_SIGNALS]
        for model, row in summary["per_model"].items()
    ]
    return markdown_table(head, rows)


def cost_table(summary: Mapping[str, Any]) -> list[str]:
    rows = [
        [g, summary[g]["diagnose_p50_s"], f"{summary[g]['passages_p50']:g}", f"{summary[g]['claims_p50']:g}"]
        for g in _groups(summary)
    ]
    return markdown_table(["group", "diagnosis p50 s", "passages p50", "claims p50"], rows)


def roc_plot(records: Sequence[Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = np.array([r["hallucinated"] for r in records])
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    for name in ROC_SIGNALS:
        scores = signal_matrix(records, [name])[:, 0]
        order = np.argsort(-scores, kind="mergesort")
        tpr = np.concatenate([[0], np.cumsum(labels[order]) / max(1, labels.sum())])
        fpr = np.concatenate([[0], np.cumsum(~labels[order]) / max(1, (~labels).sum())])
        ax.plot(fpr, tpr, label=name, linewidth=1.2)
    ax.plot([0, 1], [0, 1], color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(f"RAGTruth Summary + Data2txt ({len(records)} responses)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_ragtruth_report(
    summary: Mapping[str, Any],
    meta: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    reports: Path,
) -> None:
    reports.mkdir(parents=True, exist_ok=True)
    atomic_write_json(reports / "ragtruth.json", {**summary, "_meta": dict(meta)})
    roc_plot(records, reports / "ragtruth-roc.png")
    placed = claim_counts(records)
    reused = "; records of an earlier run with the same setup reused" if meta["reused_records"] else ""
    lines = [
        "# Hallucination detection on RAGTruth (EGC paper's protocol)",
        "",
        f"Command: `{meta['command']}` ({meta['minutes']:.1f} min"
        f"{reused}). The diagnoses themselves took {meta['diagnosis_minutes']:.1f} min in all.",
        f"NLI: {meta['nli']}. Data: ../shared/data/{meta['file']} (RAGTruth's official test split); "
        f"{summary['all']['n']} Summary and Data2txt responses scored, {meta['left_out']} QA rows left out "
        "(this copy keeps no passages for them).",
        f"Passages: the ingest splitter ({meta['chunk_size']} tokens, overlap {meta['chunk_overlap']}); "
        f"claims: the response's sentences, at most {meta['max_claims']} "
        f"({meta['at_claim_cap']} responses reached the cap); thresholds as shipped: entail >= "
        f"{meta['entail_threshold']}, contradict >= {meta['contradict_threshold']}; "
        f"{meta['truncated']} responses had a passage cut to the NLI's length. The knowledge graph is off "
        "(a given source has no corpus graph). Nothing here was tuned on RAGTruth except the "
        "logistic_cv row, which is cross-validated on these responses and says so.",
        "A response is hallucinated when people labelled at least one span of it (the EGC paper's "
        "response-level label). How each signal is computed: bench/suites/ragtruth.py.",
        "",
        "## Response level: AUROC as a hallucination score (95% bootstrap interval)",
        "",
        *signal_table(summary),
        "",
        "Read the per-task columns: the pooled one mixes two tasks whose base rates differ "
        f"({_rates(summary)}), and the task alone ranks the pooled responses with AUROC "
        f"{summary['all'].get('task_only_auroc')}. 'All, within task' counts only the "
        "hallucinated-faithful pairs of one task (the per-task AUROCs weighted by their pairs), "
        "which pooling cannot inflate. "
        "The EGC paper's figures are on the RAGTruth QA split (875 responses); they are beside ours for "
        "scale, not as a paired comparison.",
        "",
        "![ROC curves](ragtruth-roc.png)",
        "",
        "## The diagnosis' own verdicts at the shipped thresholds",
        "",
        *verdict_table(summary),
        "",
        "## Claim level (a claim is hallucinated when it overlaps a labelled span)",
        "",
        f"{placed['placed']} claims placed in their response; {placed['unplaced']} could not be and are "
        "left out of this table.",
        "",
        *claim_table(summary),
        "",
        "## Per LLM (the EGC paper's Table IV view): within-task AUROC over both tasks",
        "",
        *model_table(summary),
        "",
        "## Cost",
        "",
        *cost_table(summary),
        "",
    ]
    atomic_write_text(reports / "ragtruth.md", "\n".join(lines) + "\n")
