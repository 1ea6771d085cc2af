"""Aggregate evaluation records into the paper's tables, reports/paper.json and the plots.

Metrics per (task, method), over the test items (n stated with every figure):
- the task's own (FEVER accuracy with the gated "Unverified" abstention counted as NOT ENOUGH INFO;
  HotpotQA EM and F1), in percent;
- latency_s: mean seconds from the start of retrieval to the final output (median beside it);
- memory_mb: mean memory growth per request in MiB, with its source (nvml | rss | unavailable);
- relevance: mean cosine of query and response embeddings, in percent; evidence_relevance: mean
  cosine of query and the passages the final answer read (what retrieval repairs change);
- answer_in_evidence: share of items whose final passages hold the gold answer (HotpotQA, yes/no
  answers left out; n beside it): where it is high and the metric low, the generator is the limit;
- faithfulness: share of final answers whose response entailment e_r is "entail", in percent;
- repaired: share of items a repair action ran for; repair_success: share of those after which
  the diagnosis found no failure; actions: the action distribution per first failure type.
The lift of each method over Naive RAG on the headline metric comes with a 95% paired bootstrap
interval (2,000 resamples of the test items, seeded).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.harness.methods import METHODS_BY_NAME, Method
from ragmend.bench.markdown import markdown_table
from ragmend.corpora.tasks import Task
from ragmend.settings import PolicySettings

BOOTSTRAP = 2000


def summarize(task: Task, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(records)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for metric in records[0]["scores"]:
        out[metric] = round(100 * float(np.mean([r["scores"][metric] for r in records])), 2)
    lat = np.array([r["latency_s"] for r in records])
    out["latency_s"] = round(float(lat.mean()), 3)
    out["latency_p50_s"] = round(float(np.median(lat)), 3)
    out["answer_minutes"] = round(float(lat.sum()) / 60, 2)
    gen = np.array([r.get("generator_s", 0.0) for r in records])
    out["generator_s"] = round(float(gen.mean()), 3)
    mem = [r["memory_bytes"] for r in records if r["memory_bytes"] is not None]
    out["memory_mb"] = round(float(np.mean(mem)) / 2**20, 3) if mem else None
    out["memory_peak_mb"] = round(float(np.max(mem)) / 2**20, 3) if mem else None
    out["memory_source"] = Counter(r["memory_source"] for r in records).most_common(1)[0][0]
    out["relevance"] = round(100 * float(np.mean([r["relevance"] for r in records])), 2)
    out["evidence_relevance"] = round(
        100 * float(np.mean([r.get("evidence_relevance", 0.0) for r in records])), 2
    )
    # Records written before the field existed, and yes/no answers, carry no answer_in_evidence.
    found = [r["answer_in_evidence"] for r in records if r.get("answer_in_evidence") is not None]
    out["answer_in_evidence"] = round(100 * float(np.mean(found)), 2) if found else None
    out["answer_in_evidence_n"] = len(found)
    faithful = [r["faithful"] for r in records if r["faithful"] is not None]
    out["faithfulness"] = round(100 * float(np.mean(faithful)), 2) if faithful else None
    failed = [r for r in records if r["first_failure"] not in (None, "NoFailure")]
    repaired = [r for r in records if r["action"] is not None]
    out["failed_first"] = round(100 * len(failed) / n, 2)
    out["repaired"] = round(100 * len(repaired) / n, 2)
    out["repair_success"] = (
        round(100 * sum(bool(r["success"]) for r in repaired) / len(repaired), 2) if repaired else None
    )
    out["kept_repaired"] = (
        round(100 * sum(r["kept"] == "repaired" for r in repaired) / len(repaired), 2) if repaired else None
    )
    out |= repair_effects(records, task.primary)
    actions: dict[str, Counter[str]] = defaultdict(Counter)
    for r in failed:
        actions[r["first_failure"]][r["action"] or "(none)"] += 1
    out["actions"] = {f: dict(c.most_common()) for f, c in sorted(actions.items())}
    out["failures"] = dict(Counter(r["first_failure"] for r in records).most_common())
    out |= rewards(records, task.primary)
    if task.group is not None:
        groups: dict[str, list[float]] = defaultdict(list)
        for r in records:
            groups[task.group(r["id"])].append(float(r["scores"][task.primary]))
        out[f"{task.primary}_by_group"] = {g: round(100 * float(np.mean(v)), 2) for g, v in groups.items()}
    if task.read_summary is not None:
        out |= task.read_summary(records)
    plans: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        if r.get("question_kind"):
            plans[r["question_kind"]][r.get("plan") or "configured"] += 1
    if plans:
        out["plans"] = {k: dict(c.most_common()) for k, c in sorted(plans.items())}
    return out


def rewards(records: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """What each answer was worth against what it cost, the same way for every row, over the
    whole request (first pass, diagnosis, any repair) against the default request budget:
    mean_reward, Eq. 2's quality of what the user reads (the final answer's diagnosis; where they
    read that the sources do not answer, the abstention's: how likely the sources do not answer)
    times the latency factor; mean_utility, the gold judgement (the task metric) in place of the
    diagnosis's quality."""
    budget = PolicySettings().request_latency_budget_s
    out: dict[str, Any] = {}

    def factor(r: Mapping[str, Any]) -> float:
        return max(0.0, 1.0 - float(r["latency_s"]) / budget)

    def quality(r: Mapping[str, Any]) -> float | None:
        q = r.get("reply_quality", r.get("quality"))
        return None if q is None else float(q)

    judged = [(q, r) for r in records if (q := quality(r)) is not None]
    if judged:
        out["mean_reward"] = round(float(np.mean([q * factor(r) for q, r in judged])), 4)
    out["mean_utility"] = round(float(np.mean([float(r["scores"][metric]) * factor(r) for r in records])), 4)
    return out


def repair_effects(records: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """What the repairs did to the answers a user reads: of the repaired requests, the share whose
    wrong first answer the repair turned right and right one turned wrong (by the task's metric),
    the share answered by an abstention, and the repair's extra seconds (the request's time beyond
    its first pass) per answer turned right. Records without the first answer's scores (written
    before they were kept) are left out."""
    repaired = [r for r in records if r.get("action") is not None and "first_scores" in r]
    if not repaired:
        return {}

    def score(r: Mapping[str, Any], key: str) -> float:
        s = r[key] if r.get(key) is not None else r["scores"]  # no first_scores: the answer kept
        return float(s[metric])

    right = sum(score(r, "first_scores") < 1 <= score(r, "scores") for r in repaired)
    wrong = sum(score(r, "scores") < 1 <= score(r, "first_scores") for r in repaired)
    extra = sum(max(0.0, r["latency_s"] - r.get("first_pass_s", r["latency_s"])) for r in repaired)
    return {
        "turned_right": round(100 * right / len(repaired), 2),
        "turned_wrong": round(100 * wrong / len(repaired), 2),
        "turned_right_n": right,
        "turned_wrong_n": wrong,
        "abstained": round(100 * sum(r.get("kept") == "abstained" for r in repaired) / len(records), 2),
        "extra_s_per_right": round(extra / right, 2) if right else None,
    }


def paired_lift(
    task: Task, base: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]], seed: int = 0
) -> dict[str, float] | None:
    """Mean difference (points) of the headline metric over the same items, with a 95% interval."""
    by_id = {r["id"]: r["scores"][task.primary] for r in base}
    pairs = [(by_id[r["id"]], r["scores"][task.primary]) for r in other if r["id"] in by_id]
    if not pairs:
        return None
    diff = 100 * np.array([b - a for a, b in pairs])
    rng = np.random.default_rng(seed)
    boots = rng.choice(diff, size=(BOOTSTRAP, len(diff)), replace=True).mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {
        "lift": round(float(diff.mean()), 2),
        "ci95_low": round(float(lo), 2),
        "ci95_high": round(float(hi), 2),
    }


COLUMNS = (
    ("latency_s", "Latency s"),
    ("memory_mb", "Memory MiB"),
    ("relevance", "Relevance %"),
    ("evidence_relevance", "Evidence rel. %"),
    ("faithfulness", "Faithfulness %"),
)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def table(
    task: Task, results: Mapping[str, Mapping[str, Any]], methods: Sequence[Method], lifts: Mapping[str, Any]
) -> list[str]:
    """One markdown table in the paper's layout, ours beside the paper's (in parentheses)."""
    metrics = [*COLUMNS, *task.columns]
    head = [
        "Method",
        "n",
        *[t for _, t in metrics],
        "lift vs naive (95% CI)",
        "repaired %",
        "repair ok %",
        "wrong->right %",
        "right->wrong %",
        "abstained %",
        "extra s per right",
    ]
    rows = []
    for m in methods:
        res = results.get(m.name)
        if not res or not res.get("n"):
            continue
        paper = m.paper.get(task.name, {})
        cells = [m.title, str(res["n"])]
        for key, _ in metrics:
            ours = _fmt(res.get(key))
            ref = paper.get(key)
            cells.append(f"{ours} ({ref:g})" if ref is not None else ours)
        lift = lifts.get(m.name)
        ci = f"{lift['lift']:+.2f} [{lift['ci95_low']:+.2f}, {lift['ci95_high']:+.2f}]" if lift else "-"
        cells.append(ci)
        effects = (
            "repaired",
            "repair_success",
            "turned_right",
            "turned_wrong",
            "abstained",
            "extra_s_per_right",
        )
        cells += [_fmt(res.get(k)) for k in effects]
        rows.append(cells)
    return markdown_table(head, rows)


def plot_actions(results: Mapping[str, Mapping[str, Any]], task: Task, path: Path) -> Path | None:
    """The paper's Figure 2: the action mix per failure type, one panel per repairing method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(m, results[m]) for m in results if METHODS_BY_NAME[m].repairs and results[m].get("actions")]
    if not panels:
        return None
    actions = sorted({a for _, r in panels for mix in r["actions"].values() for a in mix})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (name, res) in zip(axes[0], panels, strict=True):
        failures = list(res["actions"])
        bottom = np.zeros(len(failures))
        for a in actions:
            counts = np.array([res["actions"][f].get(a, 0) for f in failures], dtype=float)
            ax.bar(failures, counts, bottom=bottom, label=a)
            bottom += counts
        ax.set_title(METHODS_BY_NAME[name].title, fontsize=9)
        ax.set_xlabel("failure type (first answer)")
        ax.set_ylabel("items")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"{task.title}: repair action per failure type (test split)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_budget(results: Mapping[str, Mapping[str, Any]], task: Task, path: Path) -> Path | None:
    """Quality and latency against the budget scale (Stringent 0.7, default 1, Relaxed 1.5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [
        (scale, results[m])
        for m, scale in (("stringent", 0.7), ("d2r_linucb", 1.0), ("relaxed", 1.5))
        if results.get(m, {}).get("n")
    ]
    if len(points) < 2:
        return None
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    xs = [p[0] for p in points]
    ax.plot(xs, [p[1][task.primary] for p in points], "o-", label=f"{task.primary} %")
    ax.set_xlabel("budget scale (x default budgets)")
    ax.set_ylabel(f"{task.primary} %")
    ax2 = ax.twinx()
    ax2.plot(xs, [p[1]["latency_s"] for p in points], "s--", color="tab:red", label="latency s")
    ax2.set_ylabel("mean latency s")
    naive = results.get("naive", {})
    if naive.get("n"):
        ax.axhline(naive[task.primary], color="grey", lw=0.8, ls=":", label="Naive RAG")
    ax.legend(loc="lower left", fontsize=7)
    ax2.legend(loc="lower right", fontsize=7)
    ax.set_title(f"{task.title}: quality against budget (LinUCB, test split)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PLAN_EFFECTS = (
    ("latency_p50_s", "p50 s"),
    ("mean_reward", "mean reward"),
    ("mean_utility", "mean utility"),
    ("repaired", "repaired %"),
    ("turned_right", "wrong->right %"),
    ("turned_wrong", "right->wrong %"),
    ("abstained", "abstained %"),
    ("extra_s_per_right", "extra s per right"),
)


def plans_table(
    task: Task, results: Mapping[str, Mapping[str, Any]], methods: Sequence[Method], lifts: Mapping[str, Any]
) -> list[str]:
    """The first-pass plans, the cascade and ragmend: accuracy against what it costs (for a
    task with groups, the headline metric per group too)."""
    metrics = [*task.columns, ("latency_s", "Latency s"), *PLAN_EFFECTS]
    by_group = f"{task.primary}_by_group"
    groups = sorted({g for m in methods for g in results.get(m.name, {}).get(by_group, {})})
    head = ["Method", "n", *[t for _, t in metrics], *[f"{g} %" for g in groups], "lift vs naive (95% CI)"]
    rows = []
    for m in methods:
        res = results.get(m.name)
        if not res or not res.get("n"):
            continue
        lift = lifts.get(m.name)
        ci = f"{lift['lift']:+.2f} [{lift['ci95_low']:+.2f}, {lift['ci95_high']:+.2f}]" if lift else "-"
        per_group = [_fmt(res.get(by_group, {}).get(g)) for g in groups]
        rows.append([m.title, str(res["n"]), *[_fmt(res.get(k)) for k, _ in metrics], *per_group, ci])
    return markdown_table(head, rows)


def plan_mix(results: Mapping[str, Mapping[str, Any]], methods: Sequence[Method]) -> list[str]:
    """The router's plan mix per kind of question, for each routed row."""
    out = []
    for m in methods:
        mix = results.get(m.name, {}).get("plans")
        if m.router is None or not mix:
            continue
        per_kind = "; ".join(
            f"{kind}: " + ", ".join(f"{plan} {n}" for plan, n in plans.items()) for kind, plans in mix.items()
        )
        out.append(f"- {m.title}: {per_kind}")
    return out


def plot_frontier(results: Mapping[str, Mapping[str, Any]], task: Task, path: Path) -> Path | None:
    """Accuracy against mean latency of every row; ragmend at its budget scales joined as a line
    (the paper's Table 3 as a frontier)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [(m, r) for m, r in results.items() if r.get("n") and m in METHODS_BY_NAME]
    if len(shown) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for name, res in shown:
        method = METHODS_BY_NAME[name]
        marker = "*" if method.router is not None else ("s" if name.startswith("plan_") else "o")
        ax.scatter(res["latency_s"], res[task.primary], marker=marker, s=70 if marker == "*" else 30)
        ax.annotate(
            name, (res["latency_s"], res[task.primary]), fontsize=6, xytext=(3, 3), textcoords="offset points"
        )
    learned = sorted(
        (r["latency_s"], r[task.primary])
        for m, r in shown
        if METHODS_BY_NAME[m].router is not None and METHODS_BY_NAME[m].name.startswith("ragmend")
    )
    if len(learned) > 1:
        ax.plot([x for x, _ in learned], [y for _, y in learned], "-", color="tab:purple", lw=1)
    ax.set_xlabel("mean latency per answer, s (2 CPU cores)")
    ax.set_ylabel(f"{task.primary} %")
    ax.set_title(f"{task.title}: accuracy against latency (test split)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
