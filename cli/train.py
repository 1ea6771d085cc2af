"""`ragmend train`: Algorithm 2 as a warm start of the repair policy, on a data set's DEV split or
on the user's own JSONL over the served corpus (or a collection)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragmend.cli.common import SHARED_DATA, err, out, progress_bar, run, settings, show


def train(
    dataset: Annotated[
        str | None, typer.Option(help="hotpotqa or fever (corpora/tasks.py), in its own workspace.")
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            help="Your own JSONL of {question, answer} or {claim, label} rows, answered over the served "
            "corpus (or --collection); the gold answers are learned as a reward too."
        ),
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option(help="With --data: a collection (docs/collections.md) instead of the default corpus."),
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, max=100, help="Passes over the items (the paper: 2).")] = 2,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N dev items (default: the whole dev split).")
    ] = None,
    policy_kind: Annotated[
        str | None, typer.Option("--policy", help="linucb, lints or beta_ts (default: policy.kind).")
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(help="Policy state file to write (default: policy.state_path, what `serve` loads)."),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Workspace: corpus, index, graph, cache (default <data_dir>/eval/<name>)."),
    ] = None,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    explore_plans: Annotated[
        bool,
        typer.Option(
            help="With the router on: every first-pass plan answers each item once and the router "
            "learns each one (full information), before the item's own request."
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the per-epoch report as JSON.")] = False,
) -> None:
    """Warm-start the repair policy and the router: the live loop (route, answer, diagnose, one
    repair, reward, update) over the DEV split of a data set, for a number of epochs, writing the
    policy's and the router's states.

    The first run builds the data set's corpus, index and graph in the workspace; generations are
    cached there, so a rerun or a resumed run is cheap (cached calls count at their recorded
    duration in every latency: ragmend/clock.py).

    With --data the rows are answered by the configured engine itself (its corpus, index and
    generator: nothing is built), and the state written is the one `serve` loads.

    Example: ragmend train --dataset fever --epochs 2 --limit 200
    Example: ragmend train --data my-questions.jsonl --epochs 1
    """
    from ragmend.bench.harness.workspace import Workspace
    from ragmend.corpora.tasks import get_task
    from ragmend.engine import Engine
    from ragmend.engine.router import router_state_path
    from ragmend.policy import state_path

    if (dataset is None) == (data is None):
        run(_refuse_sources)
    if data is not None:
        run(
            lambda: _train_on_user_data(
                data,
                collection,
                epochs=epochs,
                limit=limit,
                policy_kind=policy_kind,
                state=state,
                explore_plans=explore_plans,
                as_json=as_json,
            )
        )
        return
    assert dataset is not None

    def work() -> None:
        base = settings()
        task = get_task(dataset)
        ws = Workspace(task, workdir or base.data_dir / "eval" / task.name, data_root)
        items = task.sample(ws.prepare(), "dev")[:limit]
        policy = {"learn": True, "repair": True, "state_path": str(state or state_path(base))}
        if policy_kind is not None:
            policy["kind"] = policy_kind
        # The router's state is the served one too, not the workspace's.
        s = ws.settings(base, policy=policy, router={"state_path": str(router_state_path(base))})
        err.print(f"{task.title}: {len(items)} dev items x {epochs} epochs; workspace {ws.root}")
        err.print(f"corpus: {ws.corpus.description if ws.corpus else ''}")
        reports, arms = _warm_start(
            Engine(s), items, epochs, explore_plans=explore_plans and s.router.enabled
        )
        result = {
            "dataset": task.name,
            "split": "dev",
            "items": len(items),
            "epochs": [r.as_json() for r in reports],
            "policy": s.policy.kind,
            "state": s.policy.state_path and str(s.policy.state_path),
            "arms": arms,
        }

        show(result, as_json, lambda r: _print_epochs(reports, r))

    run(work)


def _warm_start(engine: Any, items: Any, epochs: int, **options: Any) -> tuple[list[Any], dict[str, Any]]:
    """Load `engine`, run the warm start over `items` with a progress bar, close it; the epochs'
    reports and every arm's pulls and mean reward after."""
    from ragmend.train.warm_start import warm_start

    try:
        engine.load()
        with progress_bar() as bar:
            job = bar.add_task("epoch 1", total=len(items) * epochs)

            def tick(epoch: int, report: object) -> None:
                bar.update(job, advance=1, description=f"epoch {epoch}")

            reports = warm_start(engine, items, epochs, on_item=tick, **options)
        stats = engine.policy.stats()
        plans = engine.router.policy.stats() if engine.settings.router.enabled else {}
    finally:
        engine.close()
    arms = {
        a: {"pulls": v.pulls, "mean_reward": v.mean_reward and round(v.mean_reward, 4)}
        for a, v in stats.items()
    }
    arms |= {
        f"plan:{p}": {"pulls": v.pulls, "mean_reward": v.mean_reward and round(v.mean_reward, 4)}
        for p, v in plans.items()
        if v.pulls
    }
    return reports, arms


def _refuse_sources() -> None:
    from ragmend.errors import InputError

    raise InputError("give either --dataset (a bundled data set) or --data (your JSONL), not both")


def _print_epochs(reports: list[Any], result: dict[str, Any]) -> None:
    table = Table(
        "epoch", "items", "failed", "repaired", "successes", "right", "mean reward", "errors", "seconds"
    )
    for r in reports:
        mean = r.mean_reward
        right = str(r.right) if result.get("labelled") else "-"
        table.add_row(
            *(str(v) for v in (r.epoch, r.items, r.failed, r.repaired, r.successes)),
            right,
            f"{mean:.3f}" if mean is not None else "-",
            str(r.errors),
            f"{r.seconds:.0f}",
        )
    out.print(table)
    out.print(f"policy state: {result['state']}")


def _train_on_user_data(
    data: Path,
    collection: str | None,
    epochs: int,
    limit: int | None,
    policy_kind: str | None,
    state: Path | None,
    explore_plans: bool,
    as_json: bool,
) -> None:
    from ragmend.cli.common import make_engine
    from ragmend.policy import state_path
    from ragmend.settings import settings_with
    from ragmend.train.user_data import read_user_data

    rows = read_user_data(data, limit)  # a bad file is refused before any model loads
    base = settings()
    policy: dict[str, Any] = {"learn": True, "repair": True, "state_path": str(state or state_path(base))}
    if policy_kind is not None:
        policy["kind"] = policy_kind
    s = settings_with(base, policy=policy)
    engine = make_engine(s, collection)
    err.print(f"{data}: {len(rows.items)} {rows.kind} rows x {epochs} epochs over {engine.namespace}")
    reports, arms = _warm_start(
        engine,
        rows.items,
        epochs,
        overrides=rows.overrides,
        judge=rows.judge,
        explore_plans=explore_plans and s.router.enabled,
    )
    result = {
        "data": str(data),
        "kind": rows.kind,
        "collection": engine.namespace,
        "labelled": True,
        "items": len(rows.items),
        "epochs": [r.as_json() for r in reports],
        "policy": s.policy.kind,
        "state": str(s.policy.state_path),
        "arms": arms,
    }
    show(result, as_json, lambda r: _print_epochs(reports, r))
