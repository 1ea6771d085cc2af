"""`ragmend eval --suite paper`: every method on every task, then reports/paper.md, paper.json and
the plots. The per-item records stay in the workspace's results directory (resumable)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragmend.bench.harness.evaluate import Evaluation, RunPlan
from ragmend.bench.harness.methods import METHODS, METHODS_BY_NAME, Method
from ragmend.bench.harness.report import (
    paired_lift,
    plan_mix,
    plans_table,
    plot_actions,
    plot_budget,
    plot_frontier,
    summarize,
    table,
)
from ragmend.bench.harness.targets import (
    check_targets,
    router_targets,
    router_targets_markdown,
    targets_markdown,
)
from ragmend.bench.harness.workspace import Workspace
from ragmend.corpora.tasks import Task, all_tasks
from ragmend.fileio import atomic_write_json, atomic_write_text
from ragmend.models.nli import nli_identity
from ragmend.models.registry import ModelRegistry
from ragmend.settings import Settings

TABLES = (
    ("main", "Table 1: D2R-RAG against the baselines"),
    ("reward", "Table 2: reward variants (LinUCB)"),
    ("budget", "Table 3: budget variants (LinUCB, and ragmend)"),
)


def run_paper_suite(
    tasks: Sequence[Task],
    methods: Sequence[Method],
    base: Settings,
    data_root: Path,
    workdir: Path,
    reports: Path,
    plan: RunPlan,
    command: str,
    log: Callable[[str], None] = print,
    on_item: Callable[[str, int, int], None] | None = None,
    registry: ModelRegistry | None = None,
    restart: bool = False,
) -> dict[str, Any]:
    """Run `methods` on `tasks`, then write the report of every task that has records in `workdir`
    (a task run by an earlier invocation keeps its section). `registry`: loaded models to share.
    `restart`: archive each method's earlier records and state first (Evaluation.archive)."""
    reports.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        evaluation = _evaluation(task, base, data_root, workdir, plan, registry, log, on_item)
        registry = evaluation.registry  # the encoders load once for every task
        for method in methods:
            if restart and (dest := evaluation.archive(method)) is not None:
                log(f"{task.name}: {method.title}: earlier records and state moved to {dest}")
            t0 = time.monotonic()
            log(f"{task.name}: {method.title}")
            evaluation.run(method)
            seconds = time.monotonic() - t0
            log(f"{task.name}: {method.title} done in {seconds:.0f} s")
            # Per method, as each ends: an interrupted invocation still leaves what it finished.
            evaluation.log_run(method, command, seconds)
    if plan.split == "dev":
        return write_dev_summary(tasks, methods, base, data_root, workdir, reports, plan, registry, log)
    return write_report(base, data_root, workdir, reports, plan, registry, log, tasks)


def write_dev_summary(
    tasks: Sequence[Task],
    methods: Sequence[Method],
    base: Settings,
    data_root: Path,
    workdir: Path,
    reports: Path,
    plan: RunPlan,
    registry: ModelRegistry | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """<reports>/paper-dev.json: each method's summary over the DEV items answered (what a choice
    is made on; the paper's report reads TEST records only)."""
    data: dict[str, Any] = {"_meta": {"split": "dev", "offset": plan.offset, "seed": plan.seed}}
    for task in tasks:
        evaluation = _evaluation(task, base, data_root, workdir, plan, registry, log, None)
        records = {m.name: recs for m in methods if (recs := evaluation.records(m))}
        summary = {m: summarize(task, recs) for m, recs in records.items()}
        naive = records.get("naive")
        for m, recs in records.items():
            if naive and m != "naive" and (lift := paired_lift(task, naive, recs, plan.seed)) is not None:
                summary[m]["lift_vs_naive"] = lift
        data[task.name] = summary
        for m, res in summary.items():
            log(
                f"{task.name} DEV {m}: n {res['n']}, {task.primary} {res.get(task.primary)}, "
                f"latency {res['latency_s']} s (p50 {res['latency_p50_s']})"
            )
    atomic_write_json(reports / "paper-dev.json", data)
    return data


def write_report(
    base: Settings,
    data_root: Path,
    workdir: Path,
    reports: Path,
    plan: RunPlan,
    registry: ModelRegistry | None = None,
    log: Callable[[str], None] = print,
    extra_tasks: Sequence[Task] = (),
    note: str | None = None,
) -> dict[str, Any]:
    """reports/paper.md, paper.json and the plots from the records under `workdir` of every known
    task (corpora.tasks.all_tasks, and `extra_tasks`) that has been run there."""
    reports.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    sections: list[str] = []
    for task in {**all_tasks(), **{t.name: t for t in extra_tasks}}.values():
        results = workdir / "results" / task.name
        if not any(results.glob("*.test.jsonl")):
            continue
        # Every test item: the records of a run with any --test-limit follow the same order.
        evaluation = _evaluation(task, base, data_root, workdir, RunPlan(seed=plan.seed), registry, log, None)
        records = {m.name: recs for m in METHODS if (recs := evaluation.records(m))}
        summary = {m: summarize(task, recs) for m, recs in records.items()}
        naive = records.get("naive")
        lifts = {
            m: lift
            for m, recs in records.items()
            if naive and m != "naive" and (lift := paired_lift(task, naive, recs, plan.seed)) is not None
        }
        for m, lift in lifts.items():
            summary[m]["lift_vs_naive"] = lift
        data[task.name] = summary
        warm = {
            m.name: json.loads(evaluation.warm_path(m).read_text())
            for m in METHODS
            if m.warm_starts and m.name in records and evaluation.warm_path(m).exists()
        }
        meta[task.name] = {
            "corpus": evaluation.ws.corpus.description if evaluation.ws.corpus else "",
            "split": "test",
            "dev_items_warm_start": sorted({w["dev_items"] for w in warm.values()}),
            "warm_start": {m: w["epochs"] for m, w in warm.items()},
            "runs": evaluation.runs(),
            # Runs logged before they named their NLI weights: "not recorded".
            "nli": {m: evaluation.records_nli(METHODS_BY_NAME[m]) or "not recorded" for m in records},
            "targets": check_targets(task, summary, records, plan.seed),
            "router_targets": router_targets(task, summary, records, plan.seed),
        }
        sections += _task_section(task, summary, lifts, METHODS, meta[task.name], reports)
    generator = _generator_name(base)
    nli = nli_identity(base.models)
    note = " ".join(filter(None, [note, _completeness(data, plan)])) or None
    data["_meta"] = {"generator": generator, "nli": nli, "seed": plan.seed, "note": note, **meta}
    atomic_write_json(reports / "paper.json", data)
    atomic_write_text(reports / "paper.md", _document(sections, generator, nli, plan, note))
    return data


def _completeness(data: dict[str, Any], plan: RunPlan) -> str | None:
    """Whether every method has its test items on every dataset shown; None when all do."""
    short = []
    for task, summary in data.items():
        have = {m.name: summary.get(m.name, {}).get("n", 0) for m in METHODS}
        want = plan.test_items or max(have.values(), default=0)
        short += [f"{task} {name} ({n})" for name, n in have.items() if n < want]
    if not short:
        return None
    return f"Interim: rows short of their test items (n so far): {', '.join(short)}."


def _evaluation(
    task: Task,
    base: Settings,
    data_root: Path,
    workdir: Path,
    plan: RunPlan,
    registry: ModelRegistry | None,
    log: Callable[[str], None],
    on_item: Callable[[str, int, int], None] | None,
) -> Evaluation:
    ws = Workspace(task, workdir / task.name, data_root)
    shared = ModelRegistry.sharing(registry, ws.settings(base)) if registry is not None else None
    return Evaluation(ws, base, workdir / "results", plan, registry=shared, log=log, on_item=on_item)


def _generator_name(base: Settings) -> str:
    from ragmend.models.bundled import GENERATOR_PROFILES

    g = base.models.generator
    bundled = GENERATOR_PROFILES[g.profile].name
    return g.model or (str(g.gguf) if g.gguf else f"{bundled} (profile {g.profile}, local GGUF, CPU)")


def _task_section(
    task: Task,
    summary: dict[str, Any],
    lifts: dict[str, Any],
    methods: Sequence[Method],
    meta: dict[str, Any],
    reports: Path,
) -> list[str]:
    out = [f"## {task.title}", "", f"Corpus: {meta['corpus']}.", ""]
    dev = ", ".join(map(str, meta["dev_items_warm_start"])) or "-"
    warm_epochs = ", ".join(sorted({str(len(e)) for e in meta["warm_start"].values()})) or "-"
    out.append(
        f"Test split (n per row below); policies warm-started on {dev} dev items (Algorithm 2, "
        f"{warm_epochs} epoch(s)) and learning online during the test run (except the frozen row)."
    )
    out.append("")
    out.append("Runs (resumed runs add up; cached generations replay at their recorded duration):")
    out += [
        f"- `{r['command']}`" + (f" ({r['method']})" if r.get("method") else "") + f": {r['minutes']} min"
        for r in meta["runs"]
    ] or ["- a run in progress (listed here when each method ends)"]
    out += [
        "",
        "Time per method, whatever the interruptions: answering the test items (the sum of per-item "
        "latency, cached generations at their recorded duration) and the warm start (wall time per "
        "epoch of the invocation that ran it; a resumed warm start replays its cache); and the NLI "
        "weights the method ran with (the diagnosis, hence every D2R decision, depends on them):",
    ]
    for m in methods:
        res = summary.get(m.name, {})
        if res.get("n"):
            epochs = meta["warm_start"].get(m.name) or []
            warm = ", ".join(f"{e['seconds'] / 60:.1f}" for e in epochs)
            out.append(
                f"- {m.title}: {res['answer_minutes']:.1f} min for {res['n']} items"
                + (f"; warm start {warm} min" if warm else "")
                + f"; NLI {meta['nli'][m.name]}"
            )
    out.append("")
    for key, title in TABLES:
        rows = [m for m in methods if key in m.tables and summary.get(m.name, {}).get("n")]
        if not rows:
            continue
        out += [f"### {title}", "", *table(task, summary, rows, lifts), ""]
    planned = [m for m in methods if "plans" in m.tables and summary.get(m.name, {}).get("n")]
    if planned:
        naive = [m for m in methods if m.name == "naive" and summary.get(m.name, {}).get("n")]
        out += [
            "### The first pass: fixed plans, the cascade and ragmend (router + repair)",
            "",
            "Reward and utility: per answer, Eq. 2's quality of the final diagnosis (reward) or the "
            "gold judgement (utility), times 1 - latency / the 30 s request budget, averaged.",
            "",
            *plans_table(task, summary, [*naive, *planned], lifts),
            "",
            *plan_mix(summary, methods),
            "",
        ]
    out += targets_markdown(task, meta["targets"])
    out += router_targets_markdown(meta["router_targets"])
    for name, fn in (("actions", plot_actions), ("budget", plot_budget), ("frontier", plot_frontier)):
        path = fn(summary, task, reports / f"{task.name}-{name}.png")
        if path is not None:
            out += [f"![{task.title} {name}]({path.name})", ""]
    for m in methods:
        res = summary.get(m.name, {})
        if res.get("actions"):
            mix = "; ".join(
                f"{f}: " + ", ".join(f"{a} {c}" for a, c in mix.items()) for f, mix in res["actions"].items()
            )
            out.append(f"- {m.title}: {mix}")
    out.append("")
    return out


def _document(sections: list[str], generator: str, nli: str, plan: RunPlan, note: str | None = None) -> str:
    head = [
        "# ragmend against D2R-RAG: FEVER and HotpotQA",
        "",
        *([f"**{note}**", ""] if note else []),
        f"Generator: {generator}. Seed {plan.seed}. Each cell: ours (the paper's in parentheses).",
        f"NLI of the diagnosis now: {nli}; each method's own is listed with its time below.",
        "Latency counts cached generations at their recorded duration (ragmend/clock.py).",
        "",
        "How each figure is computed is in bench/harness/report.py; the paper's latency and VRAM "
        "were measured",
        "with an API generator on a GPU host, ours with a local CPU generator (memory: the labelled",
        "source, host RSS growth where no GPU is present), so only the ratios between rows compare.",
        "",
    ]
    return "\n".join(head + sections) + "\n"
