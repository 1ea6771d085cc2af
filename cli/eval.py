"""`ragmend eval`: the evaluation suites (bench/suites/paper.py; the poisoned-retrieval suite)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import TaskID

from ragmend.cli.common import SHARED_DATA, err, progress_bar, run, settings, this_command
from ragmend.settings import Settings


@contextmanager
def counted(name: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar for one suite; yields its on_item(done, total) callback."""
    with progress_bar() as bar:
        job = bar.add_task(name, total=None)
        yield lambda done, total: bar.update(job, completed=done, total=total)


def evaluate(
    suite: Annotated[
        str,
        typer.Option(
            help="paper (FEVER + HotpotQA, Tables 1-3), poison (TruthfulQA, mixed-retrieval protocol) "
            "or ragtruth (hallucination detection, EGC paper)."
        ),
    ] = "paper",
    datasets: Annotated[str, typer.Option(help="Comma-separated tasks.")] = "fever,hotpotqa",
    methods: Annotated[
        str | None, typer.Option(help="Comma-separated methods (bench/harness/methods.py; default: all).")
    ] = None,
    test_limit: Annotated[
        int | None, typer.Option(min=1, help="First N test items per task (ragtruth: responses).")
    ] = None,
    dev_limit: Annotated[
        int | None,
        typer.Option(min=1, help="First N dev items to warm up on (poison: to fit its judge on; 150)."),
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, max=20, help="Warm-start epochs (the paper: 2).")] = 2,
    split: Annotated[
        str,
        typer.Option(
            help="test (the report) or dev (to choose on: the dev items after --offset, summarised in "
            "<reports>/paper-dev.json or poison-dev.json, never in paper.md or poison.md)."
        ),
    ] = "test",
    offset: Annotated[
        int, typer.Option(min=0, help="Items of the split skipped first (dev: at least --dev-limit).")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the policies' decisions and the bootstrap.")] = 0,
    writer: Annotated[
        str,
        typer.Option(
            help="poison suite: the model that writes the passages, generator (the answering one) or "
            "escalation (the stronger one of models.escalation); the answers are the generator's."
        ),
    ] = "generator",
    workdir: Annotated[
        Path | None, typer.Option(help="Workspaces and per-item records (default <data_dir>/eval).")
    ] = None,
    reports: Annotated[
        Path, typer.Option(help="Report directory (paper.md and .json, poison.md, ragtruth.md).")
    ] = Path("reports"),
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="Set each chosen method's earlier records, policy state and warm start aside "
            "(results/<task>/archive/) and run it afresh, e.g. after the NLI model changed; for "
            "the poison and RAGTruth suites, their records (diagnosed again; the poison suite's answers "
            "from the cache).",
        ),
    ] = False,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Write the report from the records so far; run nothing.")
    ] = False,
) -> None:
    """Run an evaluation suite through the engine the server uses and write its report.

    Resumable: per-item records and generations are kept in the workspace; rerun the same command
    after an interruption.

    Example: ragmend eval --suite paper --datasets fever --test-limit 300 --dev-limit 300
    Example: ragmend eval --suite paper --datasets hotpotqa --methods d2r_linucb --restart
    Example: ragmend eval --suite poison --test-limit 100
    Example: ragmend eval --suite ragtruth
    """
    from ragmend.bench.harness.evaluate import RunPlan
    from ragmend.bench.harness.methods import METHODS, METHODS_BY_NAME
    from ragmend.bench.suites.paper import run_paper_suite, write_report
    from ragmend.corpora.tasks import get_task
    from ragmend.errors import InputError

    def work() -> None:
        if suite not in ("paper", "poison", "ragtruth"):
            raise InputError(f"unknown suite {suite!r}; suites: paper, poison, ragtruth")
        base = settings()
        root = workdir or base.data_dir / "eval"
        command = this_command()
        if split not in ("test", "dev"):
            raise InputError(f"--split must be test or dev, not {split!r}")
        if writer not in ("generator", "escalation"):
            raise InputError(f"--writer must be generator or escalation, not {writer!r}")
        if suite == "poison":
            poison(base, root, command)
            return
        if suite == "ragtruth":
            ragtruth(base, root, command)
            return
        tasks = [get_task(t.strip()) for t in datasets.split(",") if t.strip()]
        chosen = list(METHODS)
        if methods is not None:
            names = [m.strip() for m in methods.split(",") if m.strip()]
            unknown = [n for n in names if n not in METHODS_BY_NAME]
            if unknown:
                raise InputError(f"unknown method(s) {unknown}; methods: {', '.join(METHODS_BY_NAME)}")
            chosen = [METHODS_BY_NAME[n] for n in names]
        if split == "dev" and offset < (dev_limit or 0):
            raise InputError(
                f"--offset {offset} < --dev-limit {dev_limit}: the dev items answered would include the "
                "warm start's"
            )
        plan = RunPlan(
            dev_items=dev_limit,
            test_items=test_limit,
            epochs=epochs,
            seed=seed,
            split="dev" if split == "dev" else "test",
            offset=offset,
        )
        if report_only:
            # The report says itself whether any row is short of --test-limit (bench/suites/paper.py).
            write_report(
                base, data_root, workdir=root, reports=reports, plan=plan, log=lambda m: err.print(m)
            )
            err.print(f"wrote {reports / 'paper.md'} and {reports / 'paper.json'}")
            return
        with progress_bar() as bar:
            jobs: dict[str, TaskID] = {}

            def tick(name: str, done: int, total: int) -> None:
                if name not in jobs:
                    jobs[name] = bar.add_task(name, total=total)
                bar.update(jobs[name], completed=done)

            run_paper_suite(
                tasks,
                chosen,
                base=base,
                data_root=data_root,
                workdir=root,
                reports=reports,
                plan=plan,
                command=command,
                log=lambda m: err.print(m),
                on_item=tick,
                restart=restart,
            )
        written = ["paper-dev.json"] if plan.split == "dev" else ["paper.md", "paper.json"]
        err.print("wrote " + " and ".join(str(reports / w) for w in written))

    def poison(base: Settings, root: Path, command: str) -> None:
        from ragmend.bench.suites.poison import run_poison_suite
        from ragmend.engine import Engine
        from ragmend.settings import settings_with

        # The contexts are given, not retrieved: no index, no corpus graph to align against.
        cache = str(root / "poison" / "generations.sqlite")
        models: dict[str, object] = {"generator": {"cache": cache}}
        if writer == "escalation" and base.models.escalation is not None:
            models["escalation"] = {"cache": cache}
        s = settings_with(base, kg={"enabled": False}, models=models)
        engine = Engine(s)
        with counted("poison") as on_item:
            summary = run_poison_suite(
                engine,
                data_root,
                workdir=root / "poison",
                reports=reports,
                limit=test_limit,
                command=command,
                judge_questions=dev_limit or 150,
                on_item=on_item,
                restart=restart,
                split="dev" if split == "dev" else "test",
                offset=offset,
                writer="escalation" if writer == "escalation" else "generator",
            )
        err.print(json.dumps(summary["contexts"]))
        err.print(f"wrote {reports / ('poison-dev.json' if split == 'dev' else 'poison.md')}")

    def ragtruth(base: Settings, root: Path, command: str) -> None:
        from ragmend.bench.suites.ragtruth import OVERRIDES, run_ragtruth_suite
        from ragmend.engine import Engine
        from ragmend.settings import settings_with

        engine = Engine(settings_with(base, **OVERRIDES))
        with counted("ragtruth") as on_item:
            summary = run_ragtruth_suite(
                engine,
                data_root,
                workdir=root / "ragtruth",
                reports=reports,
                limit=test_limit,
                command=command,
                on_item=on_item,
                restart=restart,
            )
        err.print(json.dumps({k: summary["all"]["signals"][k] for k in ("weakest_claim", "egc")}))
        err.print(f"wrote {reports / 'ragtruth.md'}")

    run(work)
