"""The `ragmend` command line: the everyday commands; bench and nli live beside it."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragmend.budgets import MB
from ragmend.cli.bench import bench_app
from ragmend.cli.common import Invocation, err, make_engine, out, progress_bar, run, settings, show
from ragmend.cli.config import config_app
from ragmend.cli.db import db_app
from ragmend.cli.detector import detector_app
from ragmend.cli.diagnose import diagnose
from ragmend.cli.eval import evaluate
from ragmend.cli.feedback import feedback_app
from ragmend.cli.nli import nli_app
from ragmend.cli.policy import policy_app
from ragmend.cli.study import study
from ragmend.cli.train import train
from ragmend.cli.verdict import verdict_app
from ragmend.settings import profile_models

if TYPE_CHECKING:  # the CLI imports the engine's modules only in the commands that use them
    from ragmend.diagnosis.types import Diagnosis
    from ragmend.engine.outcome import Outcome
    from ragmend.engine.presentation import Reading
    from ragmend.engine.repair import RepairSkip, RepairTrace

app = typer.Typer(
    name="ragmend",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(bench_app, name="bench")
app.add_typer(config_app, name="config")
app.add_typer(db_app, name="db")
app.add_typer(detector_app, name="detector")
app.add_typer(feedback_app, name="feedback")
app.add_typer(nli_app, name="nli")
app.add_typer(policy_app, name="policy")
app.add_typer(verdict_app, name="verdict")
app.command()(train)
app.command()(diagnose)
app.command("eval")(evaluate)
app.command(
    "study",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
)(study)


@app.callback()
def main_options(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML config file (or $RAGMEND_CONFIG).")
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Where the index and policy state live.")] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            help="Generator profile: default (Qwen2.5-0.5B, the 1.5B as the stronger generator), large "
            "(Qwen2.5-1.5B alone) or tiny (SmolLM2-135M in both roles, for fast runs)."
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress to stderr.")] = False,
) -> None:
    """ragmend: an online, self-repairing RAG server.

    Example: ragmend --profile tiny ask "Who designed the Eiffel Tower?"
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    Invocation.config = config
    overrides: dict[str, Any] = {}
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    if profile is not None:
        overrides["models"] = profile_models(profile)
    Invocation.overrides = overrides


@app.command()
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Directories (.txt .md .html .pdf) or JSONL files {id, title, text}.")
    ],
    rebuild: Annotated[bool, typer.Option(help="Discard the current index instead of updating it.")] = False,
    collection: Annotated[
        str | None, typer.Option(help="A collection (docs/collections.md) instead of the default corpus.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Add or update documents in the index (incremental; unchanged documents are not re-embedded).

    Example: ragmend ingest ./docs ./more/articles.jsonl
    """

    def work() -> None:
        engine = make_engine(settings(), collection)
        with progress_bar() as bar:
            task = bar.add_task("embedding chunks", total=None)
            report = engine.corpus.ingest(
                paths,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                rebuild=rebuild,
            )

        def sentence(_: object) -> None:
            out.print(
                f"[green]index {report.generation}[/]: {report.documents} documents ({report.added} added, "
                f"{report.updated} updated, {report.unchanged} unchanged, {report.removed} removed), "
                f"{report.chunks} chunks, {report.embedded_chunks} embedded in {report.seconds:.1f} s"
            )

        show(report.__dict__ | {"chunks_per_s": report.chunks_per_s}, as_json, sentence, dump=json.dumps)

    run(work)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    mode: Annotated[str | None, typer.Option(help="Retrieval: dense, bm25 or hybrid.")] = None,
    k: Annotated[int | None, typer.Option(help="Passages to retrieve.")] = None,
    rerank: Annotated[bool | None, typer.Option("--rerank/--no-rerank", help="Cross-encoder rerank.")] = None,
    top_n: Annotated[int | None, typer.Option(help="Passages kept after reranking.")] = None,
    prompt: Annotated[str | None, typer.Option(help="Prompt variant (rag/prompts.yaml).")] = None,
    collection: Annotated[
        str | None, typer.Option(help="A collection (docs/collections.md) instead of the default corpus.")
    ] = None,
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
        from ragmend.engine.presentation import Reading
        from ragmend.text import validate_query

        s = settings()
        validate_query(question, s.rag.max_query_chars)  # bad input fails before the models load
        engine = make_engine(s, collection)
        config = engine.config(overrides)
        engine.load()
        outcome = engine.respond(question, config.model_dump(exclude_none=True))
        reading = Reading.of(s.server)
        show(outcome, as_json, lambda o: print_outcome(o, reading), dump=outcome_json)

    run(work)


def outcome_json(outcome: Any) -> str:
    from pydantic import TypeAdapter

    from ragmend.engine.outcome import Outcome

    return TypeAdapter(Outcome).dump_json(outcome).decode()


def print_outcome(outcome: Outcome, reading: Reading | None = None) -> None:
    """What the user reads (the answer with its citations, and the answer policy's note when it
    is unsupported: engine/presentation.py), its evidence, timings, diagnosis and repair."""
    from ragmend.engine.presentation import Reading, present

    answer, diagnosis = outcome.answer, outcome.diagnosis
    evidence = [(p.id, p.title) for p in answer.evidence]
    shown = present(
        answer.response,
        diagnosis,
        evidence,
        reading or Reading(),
        query=answer.query,
        decided=outcome.decided,
    )
    out.print(f"[bold]{escape(shown.text)}[/]\n")
    table = Table("#", "score", "title", "passage", title="evidence", show_lines=False)
    for i, p in enumerate(answer.evidence, start=1):
        table.add_row(str(i), f"{p.score:.3f}", p.title, p.text[:160] + ("…" if len(p.text) > 160 else ""))
    out.print(table)
    t = answer.timings
    out.print(
        f"retrieve {t.retrieve_s * 1000:.0f} ms · rerank {t.rerank_s * 1000:.0f} ms · "
        f"generate {t.generate_s * 1000:.0f} ms · {answer.model}"
    )
    if diagnosis:
        if outcome.first_diagnosis is not None:
            out.print("\n[bold]first answer[/]: " + escape(outcome.first.response if outcome.first else ""))
            print_diagnosis(outcome.first_diagnosis)
        print_diagnosis(diagnosis)
    if outcome.repair is not None:
        print_repair(outcome.repair)


def print_repair(trace: RepairTrace | RepairSkip) -> None:
    from ragmend.engine.repair import RepairSkip

    if isinstance(trace, RepairSkip):
        out.print(f"\nrepair skipped: {escape(trace.reason)}")
        return
    c = trace.cost
    memory = f"{c.memory_bytes / MB:.1f} MB ({c.memory_source})" if c.memory_bytes is not None else "n/a"
    scores = ", ".join(f"{a} {s:.2f}" for a, s in trace.decision.scores.items())
    out.print(
        f"\nrepair: [bold]{trace.action}[/] for {trace.failure} ({trace.decision.kind}: {scores}) · "
        f"{c.latency_s:.2f} s, {memory} · reward {trace.reward.total:.2f} · kept the {trace.kept} answer"
        + (f" · over budget: {', '.join(trace.over_budget)}" if trace.over_budget else "")
    )


def print_diagnosis(d: Diagnosis) -> None:
    colour = "green" if d.failure == "NoFailure" else "yellow"
    out.print(
        f"\n[bold {colour}]{d.failure}[/] · e_q={d.e_q.state} ({d.e_q.construction}) · e_r={d.e_r.state}"
        f"{'' if d.e_r.support is None else f' (support {d.e_r.support:.2f})'} · "
        f"kappa={d.kappa}{'' if d.kg.available else ' (no KG)'} · stage={d.stage}: {escape(d.stage_reason)}"
    )
    for v in d.e_r.hypotheses:
        source = f" ← {v.best_passage}" if v.best_passage else ""
        out.print(escape(f"  claim [{v.state}] {v.hypothesis}{source}"))
    g = d.egc
    out.print(
        f"  EGC score {g.score:.2f} (coverage {g.coverage:.2f}, connectivity {g.connectivity:.2f}) · "
        f"evidence conflict: {'yes' if d.evidence_conflict else 'no'}"
        + (f" · label {d.label} → {d.final_label}" if d.mode == "claim" else "")
    )
    out.print("  " + " · ".join(f"{k.removesuffix('_s')} {v * 1000:.0f} ms" for k, v in d.timings.items()))


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

        def print_table(_: object) -> None:
            table = Table("role", "status", "source", "size", "load", "smoke")
            for r in reports:
                status = {"ok": "[green]ok[/]", "off": "[dim]off[/]"}.get(r.status, "[red]error[/]")
                table.add_row(
                    r.role, status, r.source, f"{r.bytes / 1e6:.1f} MB", f"{r.load_s:.2f} s", r.smoke
                )
            out.print(table)

        show({"roles": {r.role: r.as_dict() for r in reports}}, as_json, print_table)
        if any(r.status == "error" for r in reports):
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
    from ragmend.errors import ConfigError
    from ragmend.server.app import create_app
    from ragmend.server.auth import LOOPBACK_HOSTS, exposure_problem, keyless
    from ragmend.server.lifecycle import serve as serve_app

    def work() -> None:
        import os

        s = settings()
        logging.getLogger("ragmend").setLevel(logging.INFO)
        bind = host or s.server.host
        if (problem := exposure_problem(bind, s.server)) is not None:
            raise ConfigError(problem)
        if keyless(s.server) and bind not in LOOPBACK_HOSTS:
            logging.getLogger("ragmend").warning(
                "serving WITHOUT KEYS on %s (server.allow_open): anyone who reaches it may read the "
                "corpus and steer the shared policy",
                bind,
            )
        # The file the settings came from is watched: its tunable part reloads on change and on
        # SIGHUP (server/reload.py), with this invocation's overrides still on top.
        config_path = Invocation.config or os.environ.get("RAGMEND_CONFIG") or None
        # SIGTERM: a graceful shutdown, then exit 0 (server/lifecycle.py).
        serve_app(
            create_app(s, config_path=config_path, config_overrides=Invocation.overrides),
            host=bind,
            port=port if port is not None else s.server.port,
            server=s.server,
        )

    run(work)


def main() -> None:
    sys.exit(app())


if __name__ == "__main__":
    main()
