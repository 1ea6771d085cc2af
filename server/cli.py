"""The `ragmend` command line."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ragmend.errors import RagmendError
from ragmend.settings import Settings, load_settings

app = typer.Typer(
    name="ragmend",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
bench_app = typer.Typer(
    help="Benchmarks (speed is measured here, never in tests).\n\nExample: ragmend bench pipeline --json",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")
nli_app = typer.Typer(
    help="ragmend's own NLI model: its training data.\n\nExample: ragmend nli pairs --out data/nli",
    no_args_is_help=True,
)
app.add_typer(nli_app, name="nli")
SHARED_DATA = Path("../shared/data")

out = Console()
err = Console(stderr=True)
T = TypeVar("T")


class _State:
    config: Path | None = None
    overrides: dict[str, Any] = {}  # noqa: RUF012 - replaced, never mutated, per invocation


def settings() -> Settings:
    from ragmend.models.runtime import prepare_libraries

    s = load_settings(_State.config, **_State.overrides)
    # Before any command imports the model libraries: some read their environment at import.
    prepare_libraries(s.models.allow_hub)
    return s


def run(fn: Callable[[], T]) -> T:
    """Turn ragmend's own errors into a message and the error's exit code."""
    try:
        return fn()
    except RagmendError as e:
        err.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(e.exit_code) from None


@app.callback()
def main_options(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML config file (or $RAGMEND_CONFIG).")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where the index and policy state live.")] = None,
    profile: Annotated[
        str | None, typer.Option(help="Generator profile: default (Qwen2.5-0.5B) or tiny (SmolLM2-135M).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress to stderr.")] = False,
) -> None:
    """ragmend: an online, self-repairing RAG server.

    Example: ragmend --profile tiny ask "Who designed the Eiffel Tower?"
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    _State.config = config
    overrides: dict[str, Any] = {}
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    if profile is not None:
        overrides["models"] = {"generator": {"profile": profile}}
    _State.overrides = overrides


def _engine(s: Settings) -> Any:
    from engine import Engine

    return Engine(s)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )


@app.command()
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Directories (.txt .md .html .pdf) or JSONL files {id, title, text}.")
    ],
    rebuild: Annotated[bool, typer.Option(help="Discard the current index instead of updating it.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Add or update documents in the index (incremental; unchanged documents are not re-embedded).

    Example: ragmend ingest ./docs ./more/articles.jsonl
    """

    def work() -> None:
        engine = _engine(settings())
        with _progress() as bar:
            task = bar.add_task("embedding chunks", total=None)
            report = engine.ingest(
                paths,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                rebuild=rebuild,
            )
        if as_json:
            print(json.dumps(report.__dict__ | {"chunks_per_s": report.chunks_per_s}))
            return
        out.print(
            f"[green]index {report.generation}[/]: {report.documents} documents ({report.added} added, "
            f"{report.updated} updated, {report.unchanged} unchanged, {report.removed} removed), "
            f"{report.chunks} chunks, {report.embedded_chunks} embedded in {report.seconds:.1f} s"
        )

    run(work)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    mode: Annotated[str | None, typer.Option(help="Retrieval: dense, bm25 or hybrid.")] = None,
    k: Annotated[int | None, typer.Option(help="Passages to retrieve.")] = None,
    rerank: Annotated[bool | None, typer.Option("--rerank/--no-rerank", help="Cross-encoder rerank.")] = None,
    top_n: Annotated[int | None, typer.Option(help="Passages kept after reranking.")] = None,
    prompt: Annotated[str | None, typer.Option(help="Prompt variant (rag/prompts.yaml).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole answer as JSON.")] = False,
) -> None:
    """Answer a question from the index, with its evidence.

    Example: ragmend ask "Which airport is in Michigan?" --mode hybrid --rerank
    """
    overrides = {
        key: value
        for key, value in {
            "mode": mode,
            "k": k,
            "rerank": rerank,
            "rerank_top_n": top_n,
            "prompt": prompt,
        }.items()
        if value is not None
    }

    def work() -> None:
        from ragmend.text import validate_query

        s = settings()
        validate_query(question, s.rag.max_query_chars)  # bad input fails before the models load
        engine = _engine(s)
        config = engine.config(overrides)
        engine.load()
        answer = engine.answer(question, config.model_dump(exclude_none=True))
        if as_json:
            print(answer.model_dump_json())
            return
        out.print(f"[bold]{answer.response}[/]\n")
        table = Table("#", "score", "title", "passage", title="evidence", show_lines=False)
        for i, p in enumerate(answer.evidence, start=1):
            table.add_row(
                str(i), f"{p.score:.3f}", p.title, p.text[:160] + ("…" if len(p.text) > 160 else "")
            )
        out.print(table)
        t = answer.timings
        out.print(
            f"retrieve {t.retrieve_s * 1000:.0f} ms · rerank {t.rerank_s * 1000:.0f} ms · "
            f"generate {t.generate_s * 1000:.0f} ms · {answer.model}"
        )

    run(work)


@app.command()
def models(
    as_json: Annotated[bool, typer.Option("--json", help='Print {"roles": {...}} as JSON.')] = False,
    role: Annotated[list[str] | None, typer.Option(help="Only these roles (repeatable).")] = None,
) -> None:
    """Load each model role and run a one-line smoke test: source, file, size, load time.

    Example: ragmend models --json
    """
    from ragmend.models.registry import ROLES, ModelRegistry

    def work() -> None:
        registry = ModelRegistry(settings())
        roles = role or list(ROLES)
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            err.print(f"[bold red]error:[/] unknown role(s) {unknown}; roles: {list(ROLES)}")
            raise typer.Exit(2)
        reports = [registry.report(r) for r in roles]
        if as_json:
            print(json.dumps({"roles": {r.role: r.as_dict() for r in reports}}, indent=2))
        else:
            table = Table("role", "status", "source", "size", "load", "smoke")
            for r in reports:
                status = "[green]ok[/]" if r.status == "ok" else "[red]error[/]"
                table.add_row(
                    r.role, status, r.source, f"{r.bytes / 1e6:.1f} MB", f"{r.load_s:.2f} s", r.smoke
                )
            out.print(table)
        if any(r.status != "ok" for r in reports):
            raise typer.Exit(3)

    run(work)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default server.port).")] = None,
) -> None:
    """Serve the HTTP API (builds the index from the configured sources on first start).

    Example: ragmend serve --port 8000; then curl -s localhost:8000/readyz
    """
    import uvicorn

    from server.app import create_app

    def work() -> None:
        s = settings()
        logging.getLogger("ragmend").setLevel(logging.INFO)
        uvicorn.run(
            create_app(s),
            host=host or s.server.host,
            port=port if port is not None else s.server.port,
            log_level="info",
            timeout_graceful_shutdown=30,
        )

    run(work)


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
        result = run_startup_bench(_State.config, _State.overrides, runs=runs, log=lambda m: err.print(m))
        print(json.dumps(result, indent=2)) if as_json else out.print_json(data=result)

    run(work)


@nli_app.command("pairs")
def nli_pairs(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for one JSONL file per source.")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    limit: Annotated[
        int | None, typer.Option(help="Items per dataset (default all of the dev split).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for swaps and neutral sampling.")] = 0,
) -> None:
    """Build in-domain NLI pairs from the DEV splits of HotpotQA and FEVER (entity swaps with spaCy).

    Example: ragmend nli pairs --out /tmp/nli-pairs --limit 100
    """
    from bench.datasets import write_jsonl
    from ragmend.errors import InputError
    from ragmend.models.spacy_model import load_spacy
    from train.nli_pairs import build_in_domain_pairs

    def work() -> None:
        s = settings()
        if not (data_root / "hotpotqa").is_dir() or not (data_root / "fever").is_dir():
            raise InputError(f"{data_root} does not hold the shared data (hotpotqa/, fever/)")
        pairs = build_in_domain_pairs(data_root, load_spacy(s.models), seed=seed, limit=limit)
        summary = {}
        for source, rows in sorted(pairs.items()):
            write_jsonl((p.as_json() for p in rows), out_dir / f"{source}.jsonl")
            summary[source] = len(rows)
        print(json.dumps({"out": str(out_dir), "pairs": summary, "total": sum(summary.values())}, indent=2))

    run(work)


@nli_app.command("train")
def nli_train(
    config: Annotated[Path, typer.Option("--mix", help="Training config with the data mix (YAML).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory (model/ and checkpoint.pt).")],
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    epochs: Annotated[int | None, typer.Option(help="Override the config's epochs.")] = None,
    max_length: Annotated[int | None, typer.Option(help="Override the config's max length.")] = None,
    seed: Annotated[int | None, typer.Option(help="Override the config's seed.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after N steps (resume later).")] = None,
) -> None:
    """Fine-tune an NLI cross-encoder on a data mix; rerun the same command to resume.

    Example: ragmend nli train --mix train/mixes/minilm-v0.yaml --out data/nli-minilm-v0
    """
    from train.nli_train import load_train_config, resolve_mix, train_nli

    def work() -> None:
        s = settings()
        cfg = load_train_config(config, epochs=epochs, max_length=max_length, seed=seed)
        pairs = resolve_mix(cfg, data_root, Path.cwd())
        err.print(f"{len(pairs)} pairs from {len(cfg.mix)} sources")
        with _progress() as bar:
            task = bar.add_task("training", total=None)
            result = train_nli(
                cfg,
                pairs,
                out_dir,
                allow_hub=s.models.allow_hub,
                max_steps=max_steps,
                progress=lambda step, total, loss: bar.update(
                    task, completed=step, total=total, description=f"training (loss {loss:.3f})"
                ),
            )
        print(json.dumps(result, indent=2))

    run(work)


def main() -> None:
    sys.exit(app())


if __name__ == "__main__":
    main()
