"""`ragmend verdict ...`: the calibrated verdict of the diagnosis (diagnosis/verdict.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragmend.cli.common import SHARED_DATA, err, run, settings, show

verdict_app = typer.Typer(
    help="The diagnosis' calibrated verdict: fit it on DEV data, show a model file.\n\n"
    "Example: ragmend verdict fit --out ragmend/assets/verdict/verdict.json",
    no_args_is_help=True,
)
DEFAULT_WORKDIR = Path("var/detect")


def _refreshed(exs: Any, cases: Any, max_claims: int) -> Any:
    """The recorded examples with today's text features; examples that no longer match their
    cases (recorded under another claim splitter) are the user's to record again, not a crash."""
    from ragmend.errors import InputError
    from ragmend.train.verdict import refresh_text_features

    try:
        return refresh_text_features(exs, cases, max_claims)
    except ValueError as e:
        raise InputError(str(e)) from None


@verdict_app.command("fit")
def verdict_fit(
    out_file: Annotated[Path, typer.Option("--out", help="The verdict file to write (atomically).")],
    workdir: Annotated[
        Path, typer.Option(help="The unanswerable corpus, its index and the generated answers (reused).")
    ] = DEFAULT_WORKDIR,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    limit: Annotated[int | None, typer.Option(min=1, help="At most N cases of each data set.")] = None,
    reuse: Annotated[
        bool,
        typer.Option(
            "--reuse",
            help="Refit on the examples the last run wrote into the workdir (same diagnosis settings).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the fitted model as JSON.")] = False,
) -> None:
    """Fit P(unsupported) on DEV cases: RAGTruth's train sample, FEVER dev claims, and the local
    generator's answers to DEV HotpotQA questions (answerable, gold paragraphs removed) and
    TruthfulQA questions (generated once into the workdir; about 20 minutes on 2 cores). The
    diagnosis settings in force (windows, joint premise) are the ones the features are read with.

    Example: ragmend verdict fit --out ragmend/assets/verdict/verdict.json
    """
    from ragmend.bench.suites.answers import case_sets, recorded_cases, unanswerable_workspace
    from ragmend.corpora.readers import read_jsonl
    from ragmend.engine import Engine
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_text
    from ragmend.train.verdict import Example, examples, fit_verdict

    saved = workdir / "verdict-examples-dev.jsonl"

    def work() -> None:
        base = settings()
        if reuse:
            if not saved.exists():
                raise InputError(f"--reuse: no examples at {saved}; run without --reuse first")
            exs = [Example.from_json(r) for r in read_jsonl(saved)]
            if not all(ex.id for ex in exs):
                raise InputError(f"--reuse: the examples at {saved} predate case ids; run without --reuse")
            # Text features (novelty, ...) as today's diagnoser computes them: no NLI runs again.
            ws = unanswerable_workspace(workdir, data_root)
            by_id = recorded_cases(ws, data_root, "dev", sorted({ex.set for ex in exs}))
            exs = _refreshed(exs, by_id, base.diagnosis.max_claims)
        else:
            ws = unanswerable_workspace(workdir, data_root)
            ws.prepare()
            # The probe verdict replaces whatever model is configured (which need not exist yet).
            engine = Engine(
                ws.settings(
                    base, kg={"enabled": False}, policy={"repair": False}, diagnosis={"verdict": "off"}
                )
            )
            sets = case_sets(engine, ws, data_root, "dev", limit=limit, log=lambda m: err.print(m))
            cases = [c for cs in sets.values() for c in cs]
            err.print(
                f"diagnosing {len(cases)} dev cases: " + ", ".join(f"{k} {len(v)}" for k, v in sets.items())
            )
            exs = examples(engine.diagnoser, cases, log=lambda m: err.print(m))
            atomic_write_text(saved, "".join(json.dumps(ex.as_json()) + "\n" for ex in exs))
        d = base.diagnosis
        about = {
            "split": "dev (RAGTruth: its train sample)",
            "nli_model": base.models.nli.model,
            "window_sentences": d.window_sentences,
            "joint_premise": d.joint_premise,
            "query_hypothesis": d.query_hypothesis,
        }
        model = fit_verdict(exs, about)
        model.save(out_file)
        err.print(f"wrote {out_file} (threshold {model.threshold})")
        show(json.loads(out_file.read_text()), as_json)

    run(work)


@verdict_app.command("cv")
def verdict_cv(
    workdir: Annotated[Path, typer.Option(help="Where `verdict fit` wrote its examples.")] = DEFAULT_WORKDIR,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    folds: Annotated[
        int, typer.Option(min=2, max=20, help="Folds (cases sharing sources stay together).")
    ] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Out-of-fold AUROC and F1 of the verdict on its DEV examples (RAGTruth's train sample and
    FEVER dev claims held out in turn), their text features as today's diagnoser computes them:
    how to compare two choices without looking at a test split.

    Example: ragmend verdict cv --json
    """
    from ragmend.bench.suites.answers import recorded_cases, unanswerable_workspace
    from ragmend.bench.suites.verdict_cv import cross_validate
    from ragmend.corpora.readers import read_jsonl
    from ragmend.errors import InputError
    from ragmend.train.verdict import Example

    def work() -> None:
        saved = workdir / "verdict-examples-dev.jsonl"
        if not saved.exists():
            raise InputError(f"no examples at {saved}: run `ragmend verdict fit` first")
        exs = [Example.from_json(r) for r in read_jsonl(saved)]
        if not all(ex.id for ex in exs):
            raise InputError(f"the examples at {saved} predate case ids; run `ragmend verdict fit` again")
        by_id = recorded_cases(
            unanswerable_workspace(workdir, data_root), data_root, "dev", sorted({ex.set for ex in exs})
        )
        exs = _refreshed(exs, by_id, settings().diagnosis.max_claims)
        show(cross_validate(exs, by_id, folds), as_json)

    run(work)


@verdict_app.command("score")
def verdict_score(
    rows: Annotated[
        list[Path],
        typer.Option(
            "--rows",
            help="Rows of `ragmend bench detect` run with a verdict (detect-<split>-<sets>-rows.jsonl).",
        ),
    ],
    verdict: Annotated[str, typer.Option(help='A verdict file, or "bundled".')] = "bundled",
    split: Annotated[str, typer.Option(help="The split the rows are of (dev or test).")] = "test",
    workdir: Annotated[
        Path, typer.Option(help="bench detect's workdir (the local generator's answers).")
    ] = DEFAULT_WORKDIR,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    refresh: Annotated[
        bool,
        typer.Option(
            help="Compute the text features (novelty, ...) afresh from each row's case, as today's "
            "diagnoser does, instead of reading them from the row."
        ),
    ] = True,
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """The figures of `ragmend bench detect` under another verdict model, from the features its
    rows recorded: no diagnosis runs again, so a refitted verdict is scored on the same test cases
    in seconds (its claim model, answer model and threshold; the failure as the diagnoser derives
    it, with the configured diagnosis.relevance_threshold and refute_threshold).

    Example: ragmend verdict score --rows var/detect/detect-test-hotpotqa+unanswerable-rows.jsonl --verdict F
    """
    from ragmend.bench.suites.answers import recorded_cases, unanswerable_workspace
    from ragmend.bench.suites.detect import rescore, summaries
    from ragmend.corpora.readers import Split, read_jsonl
    from ragmend.diagnosis.verdict import open_verdict
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        model = open_verdict(verdict)
        if model is None:
            raise InputError('--verdict: a verdict file or "bundled", not "off"')
        by_set: dict[str, list[dict]] = {}
        for path in rows:
            if not path.exists():
                raise InputError(f"--rows: {path} not found (run ragmend bench detect first)")
            for r in read_jsonl(path):
                by_set.setdefault(r["set"], []).append(r)
        if split not in ("dev", "test"):
            raise InputError(f"--split: dev or test, not {split!r}")
        of_split: Split = "dev" if split == "dev" else "test"
        d = settings().diagnosis
        cases = (
            recorded_cases(unanswerable_workspace(workdir, data_root), data_root, of_split, sorted(by_set))
            if refresh
            else None
        )
        result = summaries(
            {
                k: rescore(
                    v,
                    model,
                    relevance_threshold=d.relevance_threshold,
                    cases=cases,
                    refute_threshold=d.refute_threshold,
                    support_floor=d.support_floor,
                )
                for k, v in by_set.items()
            }
        )
        result["setup"] = {
            "verdict": verdict,
            "rows": [str(p) for p in rows],
            "threshold": model.threshold,
            "refute_threshold": d.refute_threshold,
            "support_floor": d.support_floor,
            "text_features": "computed afresh from the cases" if refresh else "as recorded",
        }
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)
