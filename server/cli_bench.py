"""`ragmend bench ...`: speed and quality measurements (never timed tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from server.cli_common import Invocation, err, out, run, settings

bench_app = typer.Typer(
    help="Benchmarks (speed is measured here, never in tests).\n\nExample: ragmend bench pipeline --json",
    no_args_is_help=True,
)

STAGE_HELP = "ingest, embed, retrieval, rerank, generate (repeatable; default all)."


@bench_app.command("pipeline")
def bench_pipeline(
    stage: Annotated[list[str] | None, typer.Option(help=STAGE_HELP)] = None,
    data: Annotated[
        Path, typer.Option(help="HotpotQA distractor JSON (its paragraphs are the corpus).")
    ] = Path("../shared/data/hotpotqa/hotpot_dev_distractor_merged.json"),
    limit: Annotated[int | None, typer.Option(help="Paragraphs to ingest (default all 13,471).")] = None,
    queries: Annotated[int, typer.Option(help="Dev questions timed per retrieval setting.")] = 200,
    generations: Annotated[int, typer.Option(help="Questions generated per profile.")] = 10,
    workdir: Annotated[
        Path | None, typer.Option(help="Where to build the benchmark index (default a temp dir).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Pipeline speed: ingest throughput, retrieval p50/p95, rerank latency, generation tokens/s.

    Example: ragmend bench pipeline --stage retrieval --json
    """
    from bench.pipeline_bench import run_pipeline_bench

    def work() -> None:
        result = run_pipeline_bench(
            settings(),
            data,
            stages=stage,
            limit=limit,
            n_queries=queries,
            n_generations=generations,
            workdir=workdir,
            log=lambda m: err.print(m),
        )
        print(json.dumps(result, indent=2)) if as_json else out.print_json(data=result)

    run(work)


@bench_app.command("nli")
def bench_nli(
    data: Annotated[Path, typer.Option(help="A JSONL file of {premise, hypothesis, label}.")],
    model: Annotated[
        str | None, typer.Option(help="NLI model directory or hub id (default models.nli.model).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N pairs.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {n, accuracy, macro_f1, confusion, pairs_per_s}.")
    ] = False,
) -> None:
    """Evaluate an NLI model on a file in the shared NLI format.

    Example: ragmend bench nli --data ../shared/data/nli/mnli/dev_matched.jsonl --limit 500 --json
    """
    from bench.datasets import load_nli as load_pairs
    from bench.nli_eval import evaluate_nli
    from ragmend.errors import InputError
    from ragmend.models.nli import load_nli

    def work() -> None:
        s = settings()
        if not data.is_file():
            raise InputError(f"NLI data file not found: {data}")
        try:
            pairs = load_pairs(data, limit=limit)
        except ValueError as e:
            raise InputError(str(e)) from e
        models = (
            s.models.model_copy(update={"nli": s.models.nli.model_copy(update={"model": model})})
            if model
            else s.models
        )
        result = evaluate_nli(load_nli(models), pairs)
        print(json.dumps(result, indent=2)) if as_json else out.print_json(data=result)

    run(work)


@bench_app.command("startup")
def bench_startup(
    runs: Annotated[int, typer.Option(help="Server starts to time.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Seconds from `ragmend serve` to /readyz = 200 on an installed machine with its index built.

    Example: ragmend bench startup --runs 3 --json
    """
    from bench.startup_bench import run_startup_bench

    def work() -> None:
        result = run_startup_bench(
            Invocation.config, Invocation.overrides, runs=runs, log=lambda m: err.print(m)
        )
        print(json.dumps(result, indent=2)) if as_json else out.print_json(data=result)

    run(work)
