"""The command line: help with examples, exit codes, and one real `ask` in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmend.cli.main import app
from ragmend.engine import Engine
from tests.conftest import sample_questions

runner = CliRunner()


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["ingest"],
        ["ask"],
        ["models"],
        ["serve"],
        ["train"],
        ["eval"],
        ["bench", "pipeline"],
        ["bench", "startup"],
        ["bench", "load"],
        ["bench", "judge"],
        ["bench", "answerability"],
        ["nli", "label"],
        ["nli", "train"],
    ],
)
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output


# What an operator runs (the rest is evaluation and research).
OPERATOR_COMMANDS = (
    ("serve",),
    ("ingest",),
    ("ask",),
    ("diagnose",),
    ("models",),
    ("feedback",),
    ("db",),
    ("policy",),
    *(("bench", verb) for verb in ("load", "stream", "startup", "generator", "pipeline", "check", "soak")),
)


def test_no_operator_command_reads_the_projects_shared_data_unless_told() -> None:
    """A deployed ragmend has no ../shared/data beside it: no option of what an operator runs
    defaults to it, and the one that reads a data set asks for it by name."""
    import typer.main

    root = typer.main.get_command(app)
    for path in OPERATOR_COMMANDS:
        command = root
        for name in path:
            command = command.commands[name]  # type: ignore[attr-defined]
        for sub in [command, *getattr(command, "commands", {}).values()]:
            for param in sub.params:
                assert "shared" not in str(param.default), (path, sub.name, param.name)
    result = runner.invoke(app, ["bench", "check", "--limit", "3"])
    assert result.exit_code == 2 and "--data-root" in result.output


def test_ingest_missing_path_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "ingest", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_bench_judge_without_the_data_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "bench", "judge", "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and "TruthfulQA.csv not found" in result.output.replace("\n", "")


def test_bench_answerability_fits_on_dev_only_and_reads_a_model_it_can(tmp_path: Path) -> None:
    base = ["--data-dir", str(tmp_path), "bench", "answerability", "--workdir", str(tmp_path)]
    result = runner.invoke(app, [*base, "--split", "test", "--fit", str(tmp_path / "a.json")])
    assert result.exit_code == 2 and "DEV questions only" in result.output.replace("\n", " ")
    result = runner.invoke(app, [*base, "--split", "train"])
    assert result.exit_code == 2 and "dev or test" in result.output
    result = runner.invoke(app, [*base, "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and "not found" in result.output.replace("\n", "")


def test_bench_detect_aligns_with_a_graph_only_the_generated_answers(tmp_path: Path) -> None:
    base = ["--data-dir", str(tmp_path), "bench", "detect", "--workdir", str(tmp_path), "--kg"]
    result = runner.invoke(app, [*base, "--sets", "ragtruth,hotpotqa"])
    assert result.exit_code == 2 and "--sets hotpotqa,unanswerable" in result.output.replace("\n", "")


def test_verdict_cv_over_examples_recorded_by_another_claim_splitter_exits_2(tmp_path: Path) -> None:
    from ragmend.corpora.cases import Case
    from ragmend.train.verdict import Example

    # An answer recorded as two claims that today's splitter reads as one sentence.
    case = Case(
        set="hotpotqa",
        group="answerable",
        id="q1",
        split="dev",
        query="Who wrote it?",
        passages=(),
        response="Gen. Lee wrote it.",
        unsupported=True,
        answerable=True,
    )
    example = Example(
        set="hotpotqa",
        group="answerable",
        unsupported=True,
        answer={"relevance": 1.0},
        claims=({"entail": 0.1}, {"entail": 0.2}),
        claim_labels=(True, True),
        id="q1",
    )
    (tmp_path / "answers-dev.jsonl").write_text(json.dumps(case.as_json()) + "\n")
    (tmp_path / "verdict-examples-dev.jsonl").write_text(json.dumps(example.as_json()) + "\n")
    args = [
        "--data-dir",
        str(tmp_path),
        "verdict",
        "cv",
        "--workdir",
        str(tmp_path),
        "--data-root",
        str(tmp_path),
    ]
    result = runner.invoke(app, args)
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "2 claims recorded, 1 split today" in output, result.output
    assert "ragmend verdict fit" in output


def test_eval_unknown_suite_and_missing_ragtruth_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "eval", "--suite", "nope"])
    assert result.exit_code == 2 and "paper, poison, ragtruth" in result.output
    args = ["--data-dir", str(tmp_path), "eval", "--suite", "ragtruth", "--data-root", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "not found" in result.output.replace("\n", "")


def test_poison_suite_bad_split_offset_and_writer_exit_2(tmp_path: Path) -> None:
    base = ["--data-dir", str(tmp_path), "eval", "--suite", "poison"]
    # DEV questions must start past the judge's: tuning on its own references would not be DEV.
    result = runner.invoke(app, [*base, "--split", "dev", "--offset", "10"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "--offset 10 < --dev-limit 150" in output, result.output
    result = runner.invoke(app, [*base, "--writer", "bogus"])
    assert result.exit_code == 2 and "--writer must be generator or escalation" in result.output
    result = runner.invoke(app, [*base, "--split", "train"])
    assert result.exit_code == 2 and "--split must be test or dev" in result.output


def test_ask_bad_options_exit_2_before_loading(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "ask", "question", "--mode", "sparse"])
    assert result.exit_code == 2 and "config.mode" in result.output
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "ask", "question", "--k", "0"])
    assert result.exit_code == 2 and "config.k" in result.output


def test_bad_config_file_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rag:\n  k: many\n")
    result = runner.invoke(app, ["--config", str(cfg), "ask", "q"])
    assert result.exit_code == 2 and "rag.k" in result.output


def test_models_unknown_role(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "--role", "oracle"])
    assert result.exit_code == 2 and "unknown role" in result.output


def _cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(data_dir / "xdg-cache"))
    return subprocess.run(
        [sys.executable, "-m", "ragmend.cli", "--data-dir", str(data_dir), "--profile", "tiny", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.mark.generator
def test_models_json_in_a_fresh_process(tmp_path: Path) -> None:
    proc = _cli(
        ["models", "--json", "--role", "embeddings", "--role", "reranker", "--role", "generator"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    roles = json.loads(proc.stdout)["roles"]
    assert set(roles) == {"embeddings", "reranker", "generator"}
    for r in roles.values():
        assert r["status"] == "ok" and r["bytes"] > 0 and r["load_s"] >= 0 and r["smoke"]


def test_ingest_then_ask_in_fresh_processes(tmp_path: Path, small_corpus: Path, engine: Engine) -> None:
    proc = _cli(["ingest", str(small_corpus), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["added"] > 50 and report["embedded_chunks"] == report["chunks"]

    q = sample_questions()[0]
    proc = _cli(["ask", q["question"], "--json", "--mode", "bm25"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    answer = outcome["first"] or outcome["answer"]  # the first pass, before any repair
    assert answer["response"].strip() and answer["config"]["mode"] == "bm25"
    assert any(p["title"] in q["supporting_titles"] for p in answer["evidence"])
    # The diagnosis decided the repair: a passing first answer is returned as it is, a failed one
    # went to the policy (repaired, or the skip says why).
    if outcome["first"] is None:
        assert outcome["diagnosis"]["failure"] == "NoFailure" and outcome["repair"] is None
    else:
        assert outcome["first_diagnosis"]["failure"] != "NoFailure" and outcome["repair"] is not None

    proc = _cli(["ask", "   "], tmp_path)
    assert proc.returncode == 2 and "query is empty" in proc.stderr


def test_a_study_runs_under_its_name_with_its_own_options(tmp_path: Path) -> None:
    """`ragmend study` hands everything after the name to the study (its --help too), and names the
    studies it has when the name is unknown."""
    import json

    from ragmend.bench.studies import STUDIES

    rows = [{"set": "hotpotqa", "id": "1", "diagnosis": {"failure": "NoFailure"}}]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["study", "diagnosis-compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["study", "diagnosis-compare", "--help"])
    assert result.exit_code == 0 and "ragmend study diagnosis-compare" in result.output
    listed = runner.invoke(app, ["study", "--list"])
    assert listed.exit_code == 0 and all(name in listed.output for name in STUDIES)
    unknown = runner.invoke(app, ["study", "no-such-study"])
    assert unknown.exit_code == 2 and "unknown study" in unknown.output


def test_serve_refuses_to_start_keyless_on_an_open_address(tmp_path: Path) -> None:
    """On an address other than the loopback with no key, `serve` stops before loading anything and
    says how to open it on purpose."""
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "refusing to serve without keys on 0.0.0.0" in said and "server.allow_open" in said
