"""`ragmend bench ...`: speed and quality measurements (never timed tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer

from ragmend.cli.common import SHARED_DATA, Invocation, err, run, settings, show, this_command

bench_app = typer.Typer(
    help="Benchmarks (speed is measured here, never in tests).\n\nExample: ragmend bench pipeline --json",
    no_args_is_help=True,
)

STAGE_HELP = "ingest, embed, retrieval, rerank, generate (repeatable; default all)."


@bench_app.command("pipeline")
def bench_pipeline(
    data: Annotated[
        Path, typer.Option(help="HotpotQA distractor JSON (paragraphs: the corpus; questions: the load).")
    ],
    stage: Annotated[list[str] | None, typer.Option(help=STAGE_HELP)] = None,
    limit: Annotated[int | None, typer.Option(help="Paragraphs to ingest (default all 13,471).")] = None,
    queries: Annotated[int, typer.Option(help="Dev questions timed per retrieval setting.")] = 200,
    generations: Annotated[int, typer.Option(help="Questions generated per profile.")] = 10,
    workdir: Annotated[
        Path | None, typer.Option(help="Where to build the benchmark index (default a temp dir).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Pipeline speed: ingest throughput, retrieval p50/p95, rerank latency, generation tokens/s.

    Example: ragmend bench pipeline --data hotpot_dev_distractor_merged.json --stage retrieval --json
    """
    from ragmend.bench.speed.pipeline import run_pipeline_bench

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
        show(result, as_json)

    run(work)


@bench_app.command("generator")
def bench_generator(
    threads: Annotated[
        str, typer.Option(help="n_threads/n_threads_batch pairs (decode/prefill), comma-separated.")
    ] = "1/1,1/2,2/2",
    prompt_tokens: Annotated[
        str, typer.Option(help="Prompt lengths in tokens, comma-separated.")
    ] = "128,256,512",
    decode: Annotated[int, typer.Option(min=1, max=1024, help="Tokens generated after each prompt.")] = 32,
    repeats: Annotated[int, typer.Option(min=1, max=50, help="Cold prompts per length (the median).")] = 3,
    busy_core: Annotated[
        bool, typer.Option("--busy-core", help="Measure each pair again with one core kept busy.")
    ] = False,
    cpu_variants: Annotated[
        str,
        typer.Option(
            help="llama.cpp libraries to measure, each in its own process: auto (what the server "
            "loads) and/or portable (the wheel's), comma-separated."
        ),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """The local GGUF's prefill and decode rates, measured directly with llama.cpp's own counters
    on cold prompts: the machine's limit for the time to first token.

    Example: ragmend bench generator --threads 1/1,2/2 --prompt-tokens 256 --cpu-variants portable,auto --json
    """

    from ragmend.bench.speed.generator import parse_threads, run_generator_bench
    from ragmend.errors import InputError
    from ragmend.settings import CpuVariant

    def work() -> None:
        try:
            lengths = [int(n) for n in prompt_tokens.split(",") if n.strip()]
        except ValueError:
            raise InputError("--prompt-tokens: whole numbers, comma-separated") from None
        if not lengths or min(lengths) < 1 or max(lengths) > 8192:
            raise InputError("--prompt-tokens: lengths between 1 and 8192")
        variants = tuple(v.strip() for v in cpu_variants.split(",") if v.strip())
        unknown = [v for v in variants if v not in ("auto", "portable")]
        if not variants or unknown:
            raise InputError(f"--cpu-variants: auto and/or portable, comma-separated (got {cpu_variants!r})")
        result = run_generator_bench(
            settings(),
            variants=cast(tuple[CpuVariant, ...], variants),
            threads=parse_threads(threads),
            prompt_tokens=lengths,
            decode=decode,
            repeats=repeats,
            busy=busy_core,
            log=lambda m: err.print(m),
        )
        show({**result, "command": this_command()}, as_json)

    run(work)


@bench_app.command("nli")
def bench_nli(
    data: Annotated[Path | None, typer.Option(help="A JSONL file of {premise, hypothesis, label}.")] = None,
    suite: Annotated[
        bool, typer.Option("--suite", help="Run the standard evaluation sets and record them (--doc).")
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="NLI model directory or hub id (default models.nli.model).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N pairs (of each set).")] = None,
    sets: Annotated[
        str | None,
        typer.Option(help="--suite: only these sets, comma-separated (nothing is written); default all."),
    ] = None,
    data_root: Annotated[Path, typer.Option(help="The shared data directory (--suite).")] = SHARED_DATA,
    doc: Annotated[
        Path | None,
        typer.Option(
            help="Markdown file the suite's table goes into (default docs/nli.md; with --model, none: "
            "a candidate's reading never replaces the configured model's)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {n, accuracy, macro_f1, confusion, pairs_per_s}.")
    ] = False,
) -> None:
    """Evaluate an NLI model on a file in the shared NLI format, or on the standard suite.

    Example: ragmend bench nli --data ../shared/data/nli/mnli/dev_matched.jsonl --limit 500 --json
    Example: ragmend bench nli --suite
    Example: ragmend bench nli --suite --sets long_premise_test,long_premise_test_windows2 --limit 300
    """

    from ragmend.bench.harness.nli_eval import evaluate_nli
    from ragmend.corpora.readers import load_nli as load_pairs
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json
    from ragmend.models.nli import load_nli

    def work() -> None:
        s = settings()
        if (data is None) == (not suite):
            raise InputError("give either --data FILE or --suite")
        models = (
            s.models.model_copy(update={"nli": s.models.nli.model_copy(update={"model": model})})
            if model
            else s.models
        )
        if suite:
            from ragmend.bench.suites.nli import (
                SUITE,
                fever_claim_evidence_test,
                run_suite,
                speed_check,
                suite_markdown,
                write_suite_section,
            )

            if not (data_root / "nli").is_dir():
                raise InputError(f"{data_root} does not hold the shared data (nli/)")
            chosen = [x.strip() for x in sets.split(",") if x.strip()] if sets is not None else None
            names = [x.name for x in SUITE]
            if chosen is not None and (not chosen or set(chosen) - set(names)):
                raise InputError(f"--sets {sets!r}: choose from {', '.join(names)}")
            nli = load_nli(models)
            results = run_suite(nli, data_root, limit=limit, log=lambda m: err.print(m), sets=chosen)
            speed = speed_check(lambda: load_nli(models), fever_claim_evidence_test(data_root))
            command = this_command()
            result = {"command": command, "model": models.nli.model, "sets": results, "speed": speed}
            # A partial run never overwrites the recorded one, nor does another model's.
            target = doc if doc is not None else (Path("docs/nli.md") if model is None else None)
            if limit is None and chosen is None and target is not None:
                write_suite_section(target, suite_markdown(results, speed, command))
                atomic_write_json(target.parent / "bench" / "nli-suite.json", result)
            show(result, as_json)
            return
        assert data is not None
        if not data.is_file():
            raise InputError(f"NLI data file not found: {data}")
        try:
            pairs = load_pairs(data, limit=limit)
        except ValueError as e:
            raise InputError(str(e)) from e
        result = evaluate_nli(load_nli(models), pairs)
        show(result, as_json)

    run(work)


@bench_app.command("diagnosis")
def bench_diagnosis(
    data: Annotated[
        Path, typer.Option(help="HotpotQA distractor JSON (its paragraphs are the corpus).")
    ] = Path("../shared/data/hotpotqa/hotpot_dev_distractor_merged.json"),
    questions: Annotated[int, typer.Option(help="DEV questions answered and diagnosed.")] = 150,
    heldout: Annotated[
        Path | None, typer.Option(help="Held-out NLI pairs for the aggregation thresholds.")
    ] = None,
    workdir: Annotated[Path, typer.Option(help="Index and generation cache (reused by a rerun).")] = Path(
        "var/bench-diagnosis"
    ),
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Compare query-hypothesis constructions against answer correctness on HotpotQA dev, and
    calibrate the aggregation thresholds on held-out NLI pairs.

    Example: ragmend bench diagnosis --questions 150 --heldout ragmend/assets/nli-minilm-l6/heldout.jsonl
    """
    from ragmend.bench.calibration.diagnosis import run_diagnosis_bench
    from ragmend.corpora.readers import load_nli as load_pairs
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        s = settings()
        if not data.is_file():
            raise InputError(f"benchmark data not found: {data}")
        if heldout is not None and not heldout.is_file():
            raise InputError(f"held-out pairs not found: {heldout}")
        pairs = load_pairs(heldout) if heldout else None
        result = run_diagnosis_bench(
            s, data, workdir=workdir, n_questions=questions, heldout=pairs, log=lambda m: err.print(m)
        )
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("detect")
def bench_detect(
    split: Annotated[
        str, typer.Option(help="test (report) or dev (the data the verdict is fitted on).")
    ] = "test",
    sets: Annotated[
        str, typer.Option(help="Comma-separated: ragtruth, hotpotqa, fever, unanswerable.")
    ] = "ragtruth,hotpotqa,fever,unanswerable",
    limit: Annotated[int | None, typer.Option(min=1, help="At most N cases of each data set.")] = None,
    judge_limit: Annotated[
        int, typer.Option(min=0, help="Cases per data set also judged by the LLM judge (0: no judge).")
    ] = 30,
    workdir: Annotated[
        Path, typer.Option(help="The unanswerable corpus, its index and the generated answers (reused).")
    ] = Path("var/detect"),
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Keep the rows a previous run (same split, sets and settings) wrote and run only the rest.",
        ),
    ] = False,
    kg: Annotated[
        bool,
        typer.Option(
            "--kg",
            help="Align the generated answers against a graph of the workdir's corpus (built once into "
            "it: about 30 min on 2 cores); hotpotqa and unanswerable only.",
        ),
    ] = False,
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """The diagnosis as a detector of unsupported answers, per data set: AUROC, F1, precision and
    recall of its verdict, beside EGC only, coverage only and an LLM judge (the local generator
    asked per claim) on the same cases, with each one's time per answer; the unanswerable
    questions' IE rate. Answers of the local generator are made once into the workdir, and every
    case's scores are written there (detect-<split>-<sets>-rows.jsonl).

    Example: ragmend bench detect --limit 50 --judge-limit 10 --json
    """
    from ragmend.bench.suites.answers import SETS, case_sets, detector_engine
    from ragmend.bench.suites.detect import LLMJudge, run_detect
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        chosen = [x.strip() for x in sets.split(",") if x.strip()]
        unknown = sorted(set(chosen) - set(SETS))
        if unknown or not chosen:
            raise InputError(f"unknown data sets {unknown or chosen}; choose from {', '.join(SETS)}")
        if split not in ("dev", "test"):
            raise InputError(f"--split is dev or test, not {split!r}")
        if kg and set(chosen) - {"hotpotqa", "unanswerable"}:
            # Given passages (RAGTruth's, FEVER's) are not the workdir's corpus: its graph says
            # nothing of them.
            raise InputError("--kg aligns the generated answers only: use --sets hotpotqa,unanswerable")
        base = settings()
        ws, engine = detector_engine(base, workdir, data_root, kg)
        cases = case_sets(
            engine,
            ws,
            data_root=data_root,
            split=split,  # type: ignore[arg-type]
            sets=chosen,
            limit=limit,
            log=lambda m: err.print(m),
        )
        if not engine.ready and {"hotpotqa", "unanswerable"} & set(chosen):
            # The generated answers' passages are the index's: open it (as a served request
            # finds it), so the diagnosis reads their stored vectors, also when every answer
            # was already made and nothing else loaded the engine.
            engine.load(roles=("embeddings", "reranker", "nli"))
        judge = LLMJudge(engine.models.generator) if judge_limit else None
        rows = workdir / f"detect-{split}-{'+'.join(chosen)}-rows.jsonl"
        result = run_detect(
            engine.diagnoser,
            cases,
            judge,
            judge_limit,
            log=lambda m: err.print(m),
            rows_path=rows,
            resume=resume,
        )
        d = base.diagnosis
        result["setup"] = {
            "split": split,
            "verdict": d.verdict,
            "window_sentences": d.window_sentences,
            "joint_premise": d.joint_premise,
            "nli_model": base.models.nli.model,
            "generator": base.models.generator.model,
            "kg": "on (the workdir corpus' graph)" if kg else "off (no corpus graph; WP not measured here)",
        }
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("comparison")
def bench_comparison(
    split: Annotated[str, typer.Option(help="dev (where the check was written) or test.")] = "test",
    corpus_lookup: Annotated[
        bool,
        typer.Option(
            "--corpus-lookup",
            help="Date an alternative missing from an item's paragraphs from the whole file's (as the "
            "engine looks titles up in its index).",
        ),
    ] = False,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """The comparison check (diagnosis/comparison.py) against HotpotQA's gold answers, no model:
    gold answers judged to name neither offered answer, and comparisons in time that the
    passages' dates decide, agreeing with the gold answer or not. Seconds.

    Example: ragmend bench comparison --split test --json
    """
    from ragmend.bench.suites.comparison import corpus_lookup as lookup_over
    from ragmend.bench.suites.comparison import evaluate
    from ragmend.corpora.readers import load_hotpotqa
    from ragmend.corpora.tasks import HOTPOTQA_FILE
    from ragmend.errors import InputError

    def work() -> None:
        if split not in ("dev", "test"):
            raise InputError(f"--split is dev or test, not {split!r}")
        path = data_root / HOTPOTQA_FILE
        if not path.exists():
            raise InputError(f"{path} not found: --data-root names the shared data directory")
        items = load_hotpotqa(path, split=split)  # type: ignore[arg-type]
        titled = lookup_over(load_hotpotqa(path)) if corpus_lookup else None
        show(evaluate(items, titled), as_json)

    run(work)


@bench_app.command("answerability")
def bench_answerability(
    split: Annotated[str, typer.Option(help="dev (to fit on) or test (to report).")] = "test",
    fit: Annotated[
        Path | None, typer.Option(help="Fit on this split's questions and write the model here (dev only).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="The model to score with: bundled, a file, or off (default: the configured one)."),
    ] = None,
    workdir: Annotated[
        Path, typer.Option(help="The unanswerable corpus, its index and the questions' rows (reused).")
    ] = Path("var/detect"),
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Answerability before any answer: the share of questions called unanswerable (what becomes
    IE), per kind (answerable HotpotQA, gold paragraphs removed, TruthfulQA), for the model and
    for the relevance rule it replaces. No generator: retrieval, the cross-encoder and the
    embeddings only (about 4 minutes a split on 2 cores; the rows are kept in the workdir).

    Example: ragmend bench answerability --split dev --fit ragmend/assets/verdict/answerability.json
    """
    from ragmend.bench.suites.answerability import evaluate, question_rows
    from ragmend.bench.suites.answers import unanswerable_workspace
    from ragmend.diagnosis.answerability import AnswerabilityModel, open_answerability
    from ragmend.engine import Engine
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json
    from ragmend.train.answerability import fit_answerability

    def work() -> None:
        if split not in ("dev", "test"):
            raise InputError(f"--split is dev or test, not {split!r}")
        if fit is not None and split != "dev":
            raise InputError("--fit fits on DEV questions only: add --split dev")
        base = settings()
        ws = unanswerable_workspace(workdir, data_root)
        engine = Engine(ws.settings(base, kg={"enabled": False}, policy={"repair": False}))
        rows = question_rows(engine, ws, split, log=lambda m: err.print(m))  # type: ignore[arg-type]
        chosen: AnswerabilityModel | None
        if fit is not None:
            chosen = fit_answerability(rows)
            chosen.save(fit)
            err.print(f"wrote {fit} (threshold {chosen.threshold})")
        else:
            chosen = open_answerability(model or base.diagnosis.answerability)
        result = evaluate(rows, chosen, base.diagnosis.relevance_threshold)
        result["setup"] = {
            "split": split,
            "model": str(fit) if fit is not None else (model or base.diagnosis.answerability),
            "in_sample": fit is not None,
            "retrieval": engine.config().model_dump(include={"mode", "k", "rerank"}),
        }
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("kg")
def bench_kg(
    data: Annotated[
        Path, typer.Option(help="HotpotQA distractor JSON (dev gold paragraphs build the graph).")
    ] = Path("../shared/data/hotpotqa/hotpot_dev_distractor_merged.json"),
    questions: Annotated[int, typer.Option(help="DEV questions whose gold paragraphs are used.")] = 100,
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Calibrate the KG alignment thresholds: true supporting sentences vs entity-swapped ones.

    Example: ragmend bench kg --questions 100 --json
    """
    from ragmend.bench.calibration.kg_align import run_kg_bench
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        s = settings()
        if not data.is_file():
            raise InputError(f"benchmark data not found: {data}")
        result = run_kg_bench(s, data, questions, log=lambda m: err.print(m))
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("judge")
def bench_judge(
    questions: Annotated[
        int, typer.Option(min=2, help="DEV questions to fit on, and as many TEST questions to validate on.")
    ] = 150,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    doc: Annotated[Path | None, typer.Option(help="Write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Validate the TruthfulQA answer judge of the poison suite against single-similarity rules.

    Fits bench/suites/truth_judge.py on DEV questions' reference answers and judges the TEST questions'
    reference answers leave-one-out (labels: TruthfulQA's own), every rule on the same samples.

    Example: ragmend bench judge --questions 150 --json
    """
    from ragmend.bench.suites.poison import TRUTHFULQA_FILE, fit_judge
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json
    from ragmend.models.registry import ModelRegistry

    def work() -> None:
        s = settings()
        if not (data_root / TRUTHFULQA_FILE).is_file():
            raise InputError(f"{data_root / TRUTHFULQA_FILE} not found")
        _, result = fit_judge(ModelRegistry(s), data_root, questions)
        if doc:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("check")
def bench_check(
    data_root: Annotated[
        Path, typer.Option(help="The data directory holding ragtruth/ (its TEST split is what is checked).")
    ],
    limit: Annotated[
        int | None, typer.Option(help="RAGTruth TEST responses (a fixed sample; default all 2,598).")
    ] = None,
    batch: Annotated[int, typer.Option(help="Answers per /v1/diagnose/batch request.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """POST /v1/diagnose on RAGTruth TEST: the same verdicts and spans as the in-process diagnoser
    (bench detect's call), seconds per answer single and batched over a real server, and per task
    the verdicts' response-level and the spans' character-level F1 against the labels.

    Example: ragmend bench check --data-root ../shared/data --limit 300 --json
    """
    from ragmend.bench.speed.check import run_check_bench

    def work() -> None:
        settings()  # the configuration is valid before the server starts on it
        result = run_check_bench(Invocation.config, data_root, limit, batch, log=lambda m: err.print(m))
        show(result, as_json)

    run(work)


@bench_app.command("startup")
def bench_startup(
    runs: Annotated[int, typer.Option(help="Server starts to time.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Seconds from `ragmend serve` to /readyz = 200 on an installed machine with its index built.

    Example: ragmend bench startup --runs 3 --json
    """
    from ragmend.bench.speed.startup import run_startup_bench

    def work() -> None:
        result = run_startup_bench(
            Invocation.config, Invocation.overrides, runs=runs, log=lambda m: err.print(m)
        )
        show(result, as_json)

    run(work)


@bench_app.command("load")
def bench_load(
    clients: Annotated[int, typer.Option(min=1, max=256, help="Concurrent clients.")] = 16,
    requests: Annotated[int, typer.Option(min=1, max=10_000, help="Answer requests in all.")] = 64,
    url: Annotated[
        str | None,
        typer.Option(help="A running server on a loopback address (default: start one on a free port)."),
    ] = None,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Per-request client timeout, seconds.")] = 600.0,
    max_wall_s: Annotated[
        float, typer.Option(min=1.0, help="No request starts after this many seconds.")
    ] = 3600.0,
    sweep: Annotated[
        str | None,
        typer.Option(
            help="Overload sweep instead: load factors of the measured capacity, e.g. 1,2,4 "
            "(open-loop arrivals; goodput, wasted generator seconds, refusals per factor)."
        ),
    ] = None,
    phase_s: Annotated[
        float, typer.Option(min=5.0, help="With --sweep: seconds of arrivals per factor.")
    ] = 90.0,
    deadline_s: Annotated[
        float, typer.Option(min=0.5, help="With --sweep: each request's deadline (X-Request-Timeout).")
    ] = 30.0,
    capacity_requests: Annotated[
        int, typer.Option(min=1, max=1000, help="With --sweep: requests of the capacity phase.")
    ] = 12,
    capacity_clients: Annotated[
        int, typer.Option(min=1, max=256, help="With --sweep: closed-loop clients of the capacity phase.")
    ] = 4,
    single_requests: Annotated[
        int,
        typer.Option(
            min=1, max=1000, help="With --sweep: requests of one client alone, the phases' yardstick."
        ),
    ] = 6,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Load: N concurrent clients, M /v1/answer requests; throughput, p50/p99, overhead share, RSS.
    With --sweep: the server under 1x, 2x, 4x its measured capacity (bench/speed/overload.py).

    Loopback only. Without --url it serves the current configuration itself (`ragmend serve` on a
    free 127.0.0.1 port) and stops it afterwards.

    Example: ragmend --profile tiny bench load --clients 16 --requests 64 --json
    Example: ragmend bench load --sweep 1,2,4 --phase-s 90 --deadline-s 30 --json
    """

    from ragmend.bench.speed.load import loopback_url, run_load_bench
    from ragmend.bench.speed.overload import run_overload_sweep
    from ragmend.errors import InputError

    def work() -> None:
        if url is not None:
            loopback_url(url)  # refuse before anything starts (InputError: exit code 2)
        settings()  # a bad configuration fails here, not in the server it would start
        if sweep is not None:
            try:
                factors = [float(f) for f in sweep.split(",") if f.strip()]
            except ValueError:
                raise InputError(f"--sweep: load factors, comma-separated (got {sweep!r})") from None
            swept = run_overload_sweep(
                Invocation.config,
                Invocation.overrides,
                factors=factors,
                phase_s=phase_s,
                deadline_s=deadline_s,
                capacity_requests=capacity_requests,
                capacity_clients=capacity_clients,
                single_requests=single_requests,
                url=url,
                log=lambda m: err.print(m),
            )
            show({**swept, "command": this_command()}, as_json)
            return
        result = run_load_bench(
            Invocation.config,
            Invocation.overrides,
            clients=clients,
            requests=requests,
            url=url,
            timeout_s=timeout_s,
            max_wall_s=max_wall_s,
            log=lambda m: err.print(m),
        )
        result = {**result, "command": this_command()}
        show(result, as_json)

    run(work)


@bench_app.command("soak")
def bench_soak(
    minutes: Annotated[float, typer.Option(min=0.1, max=24 * 60, help="How long the traffic runs.")] = 60.0,
    rate: Annotated[
        float | None,
        typer.Option(
            min=0.001, help="Model requests a second (default: one client's goodput in the warm-up)."
        ),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            min=1, max=4, help="Replicas; more than 1 share a PostgreSQL the soak starts (pgserver)."
        ),
    ] = 2,
    faults: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: kill9, pg_restart, stream_drop, bad_reload (default: all that apply)."
        ),
    ] = None,
    warmup_s: Annotated[
        float, typer.Option(min=1.0, help="Seconds of the warm-up that measures the rate.")
    ] = 60.0,
    bucket_s: Annotated[
        float, typer.Option(min=1.0, help="Seconds a row of the per-minute report covers.")
    ] = 60.0,
    admin_every_s: Annotated[
        float,
        typer.Option(min=1.0, help="Seconds between admin operations (a document, a reload, a refresh)."),
    ] = 30.0,
    seed: Annotated[int, typer.Option(help="Seed of the arrivals and the traffic's choices.")] = 0,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Where the replicas' data, configuration and logs go (default: a temp dir)."),
    ] = None,
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Also write the report to this JSON file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Soak: the server under sustained mixed traffic (answers, streamed chat, checks, votes, admin
    operations) with faults (kill -9 of a replica, a PostgreSQL restart, a dropped stream, a reload
    that fails validation); per minute goodput, latency, errors, RSS, descriptors, state sizes;
    after it, nothing acknowledged lost and the replicas' policy consistent (bench/speed/soak.py).

    Example: ragmend bench soak --minutes 60 --out reports/soak.json
    Example: ragmend --profile tiny bench soak --minutes 3 --replicas 1 --rate 0.5 --bucket-s 30 --json
    """
    from ragmend.bench.speed.soak import SoakOptions, base_config, run_soak
    from ragmend.bench.speed.soak_report import table
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        settings()  # a bad configuration fails here, not in the servers it would start
        options = SoakOptions(
            duration_s=minutes * 60,
            rate=rate,
            replicas=replicas,
            faults=tuple(f.strip() for f in faults.split(",") if f.strip()) if faults is not None else None,
            bucket_s=bucket_s,
            warmup_s=warmup_s,
            admin_every_s=admin_every_s,
            seed=seed,
            workdir=workdir,
        )
        base = base_config(Invocation.config, Invocation.overrides)
        result = run_soak(base, options, log=lambda m: err.print(m, highlight=False))
        result = {**result, "command": this_command()}
        if out_path is not None:
            atomic_write_json(out_path, result)
        show(result, as_json, render=lambda r: print(table(r)))

    run(work)


@bench_app.command("scale")
def bench_scale(
    backends: Annotated[str, typer.Option(help="Comma-separated: files, postgres.")] = "files,postgres",
    replicas: Annotated[str, typer.Option(help="Comma-separated replica counts.")] = "1,2",
    clients: Annotated[int, typer.Option(min=1, max=256, help="Concurrent clients.")] = 16,
    requests: Annotated[int, typer.Option(min=1, max=10_000, help="Answer requests per configuration.")] = 64,
    delay_ms: Annotated[float, typer.Option(min=0, help="The stand-in generator's fixed delay.")] = 500.0,
    dsn: Annotated[
        str | None, typer.Option(help="A PostgreSQL server to use (default: start pgserver's for the run).")
    ] = None,
    doc: Annotated[Path | None, typer.Option(help="Also write the result to this JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Scale-out sizing: ragmend's own seconds per request (p50/p99) and requests per second per
    replica, with the generator behind a FIXED-DELAY STAND-IN endpoint, for the file and the
    PostgreSQL backend and for 1 and 2 replicas side by side (docs/scale-out.md).

    Example: ragmend bench scale --clients 16 --requests 64 --json
    """

    import yaml

    from ragmend.bench.speed.scale import run_scale_bench
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        settings()  # a bad configuration fails here, not in the servers it would start
        base: dict = yaml.safe_load(Invocation.config.read_text()) if Invocation.config else {}
        base = {**(base or {}), **Invocation.overrides}
        counts = [int(n) for n in replicas.split(",") if n.strip()]
        if not counts or min(counts) < 1 or max(counts) > 8:
            raise InputError("--replicas: counts between 1 and 8")
        result = run_scale_bench(
            base,
            backends=[b.strip() for b in backends.split(",") if b.strip()],
            replica_counts=counts,
            clients=clients,
            requests=requests,
            delay_s=delay_ms / 1000,
            dsn=dsn,
            log=lambda m: err.print(m),
        )
        result = {**result, "command": this_command()}
        if doc is not None:
            atomic_write_json(doc, result)
        show(result, as_json)

    run(work)


@bench_app.command("stream")
def bench_stream(
    requests: Annotated[
        int, typer.Option(min=1, max=1000, help="Questions per mode; no question is asked twice.")
    ] = 10,
    max_tokens: Annotated[int, typer.Option(min=1, max=4096, help="max_tokens of each request.")] = 64,
    url: Annotated[
        str | None,
        typer.Option(help="A running server on a loopback address (default: start one on a free port)."),
    ] = None,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="Per-request client timeout, seconds.")] = 600.0,
    prefill_rate: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            help="The machine's prefill rate, tokens/s (`ragmend bench generator`): each request's "
            "time to first token is set against prompt tokens / this rate + retrieval.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Streaming: time to first text, to the answer, the whole request and each stage, per stream
    mode (draft, live, verify_first), one request at a time over real HTTP, each on questions no
    earlier request asked (cold prompts).

    Example: ragmend bench stream --requests 10 --json
    """

    from ragmend.bench.speed.load import loopback_url
    from ragmend.bench.speed.stream import run_stream_bench

    def work() -> None:
        if url is not None:
            loopback_url(url)
        settings()
        result = run_stream_bench(
            Invocation.config,
            Invocation.overrides,
            requests=requests,
            max_tokens=max_tokens,
            url=url,
            timeout_s=timeout_s,
            prefill_rate=prefill_rate,
            log=lambda m: err.print(m),
        )
        show({**result, "command": this_command()}, as_json)

    run(work)


@bench_app.command("policy")
def bench_policy(
    steps: Annotated[int, typer.Option(min=1, help="Timed select+update steps at d = 64 (6 arms).")] = 3000,
    steps_d786: Annotated[
        int, typer.Option("--steps-d786", min=1, help="Timed steps at d = 786 (11 arms), Sherman-Morrison.")
    ] = 300,
    inverse_steps: Annotated[
        int, typer.Option(min=1, help="Timed steps at d = 786 of the per-call np.linalg.inv baseline.")
    ] = 20,
    store_steps: Annotated[
        int, typer.Option(min=0, help="Steps through the Policy facade per store at d = 64 (a tenth at 786).")
    ] = 300,
    workdir: Annotated[
        Path | None, typer.Option(help="Where the SQLite files go (default a temp dir).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Policy speed: µs per select+update at d = 64 and d = 786, against a per-call matrix inverse.

    Example: ragmend bench policy --json
    """

    from ragmend.bench.speed.policy import run_speed_bench

    def work() -> None:
        settings()  # the server's library setup (BLAS threads), so these are the server's figures
        result = run_speed_bench(
            steps_d64=steps,
            steps_d786=steps_d786,
            steps_inverse=inverse_steps,
            store_steps=store_steps,
            workdir=workdir,
            log=lambda m: err.print(m),
        )
        result = {"command": this_command(), **result}
        show(result, as_json)

    run(work)


@bench_app.command("router")
def bench_router(
    results: Annotated[
        Path,
        typer.Option(help="The evaluation's results directory (<workdir>/results) with the plans' DEV rows."),
    ],
    datasets: Annotated[str, typer.Option(help="Comma-separated tasks, interleaved.")] = "hotpotqa,fever",
    plans: Annotated[
        str, typer.Option(help="Comma-separated plans (engine/plans.py).")
    ] = "default_hybrid,default_hybrid_rerank,large_hybrid,large_hybrid_rerank",
    warm: Annotated[
        int, typer.Option(min=0, help="Items of the interleaved stream used as the warm start.")
    ] = 120,
    orders: Annotated[
        int,
        typer.Option(min=1, help="Replays per setting, each over another shuffle of the items (averaged)."),
    ] = 10,
    grid: Annotated[
        str,
        typer.Option(
            help="JSON of the settings to try, each a list: alpha, quality (graded | eq2), judged, "
            "context_dim, budget_scale, ridge_lambda, online (false: frozen after the warm start), kinds "
            "(pooled: claim / question, as shipped | fine: one feature per question kind), "
            'e.g. \'{"alpha": [0.25, 1.0], "quality": ["graded", "eq2"]}\'.'
        ),
    ] = "{}",
    out: Annotated[Path | None, typer.Option(help="Write the results as JSON here too.")] = None,
    data_root: Annotated[Path, typer.Option(help="The shared data directory.")] = SHARED_DATA,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """The router replayed on recorded DEV first passes (bench/suites/router_replay.py): each
    setting's accuracy and seconds on the online items beside each plan fixed.

    Example: ragmend bench router --results var/eval/results --grid '{"alpha": [0.25, 1.0]}'
    """
    import json

    from ragmend.bench.suites.router_replay import Setting, averaged, fixed_plans, load_items, replay
    from ragmend.bench.suites.router_replay import grid as settings_grid
    from ragmend.corpora.tasks import get_task
    from ragmend.errors import InputError
    from ragmend.fileio import atomic_write_json

    def work() -> None:
        tasks = [get_task(t.strip()) for t in datasets.split(",") if t.strip()]
        chosen = [p.strip() for p in plans.split(",") if p.strip()]
        try:
            options = json.loads(grid)
        except json.JSONDecodeError as e:
            raise InputError(f"--grid is not JSON: {e.msg}") from None
        if not isinstance(options, dict) or not all(isinstance(v, list) for v in options.values()):
            raise InputError("--grid must be a JSON object of lists")
        queries = {i.id: i.query for t in tasks for i in t.load(data_root)[0]}
        streams = [
            load_items(results, tasks, plans=chosen, queries=queries, order=order) for order in range(orders)
        ]
        items = streams[0]
        primary = {t.name: t.primary for t in tasks}
        settings_list = settings_grid(options) if options else [Setting()]
        embed = None
        if any(s.context_dim for s in settings_list):
            from ragmend.kg.phrases import embed_with
            from ragmend.models.registry import ModelRegistry

            embed = embed_with(ModelRegistry(settings()).embeddings)
        result = {
            "command": this_command(),
            "items": len(items),
            "warm": warm,
            "orders": orders,
            "fixed": averaged([fixed_plans(i, warm, primary) for i in streams]),
            "settings": [
                {
                    "setting": s.as_dict(),
                    "online": averaged(
                        [replay(i, s, warm=warm, primary=primary, embed=embed) for i in streams]
                    ),
                }
                for s in settings_list
            ],
        }
        if out is not None:
            atomic_write_json(out, result)
        show(result, as_json)

    run(work)
