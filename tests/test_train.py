"""Evaluation tasks, answer scoring, the replay clock and the warm start (`ragmend train`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmend import clock
from ragmend.bench.harness.evaluate import RunPlan
from ragmend.bench.harness.methods import METHODS_BY_NAME
from ragmend.bench.harness.workspace import Workspace
from ragmend.bench.suites.paper import run_paper_suite
from ragmend.cli.main import app
from ragmend.corpora.readers import Paragraph
from ragmend.corpora.scoring import answer_em, answer_f1, fever_label
from ragmend.corpora.tasks import TASKS, Corpus, EvalItem, Task, get_task
from ragmend.engine import Engine
from ragmend.engine.engine import open_policy
from ragmend.errors import InputError
from ragmend.fileio import atomic_write_json
from ragmend.models.nli import nli_identity
from ragmend.models.registry import ModelRegistry
from ragmend.settings import settings_with
from ragmend.train.warm_start import warm_start
from tests.conftest import SAMPLE_CORPUS, sample_questions, tiny_settings

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


@pytest.mark.parametrize(
    ("response", "gold", "em", "f1"),
    [
        ("The Eiffel Tower", "Eiffel Tower", True, 1.0),
        ("Paris, France.", "paris", False, 2 / 3),
        ("yes", "no", False, 0.0),
        ("no", "No", True, 1.0),
        ("Gustave Eiffel company", "Gustave Eiffel", False, 0.8),
        ("", "1889", False, 0.0),
    ],
)
def test_hotpotqa_em_and_f1(response: str, gold: str, em: bool, f1: float) -> None:
    assert answer_em(response, gold) is em
    assert answer_f1(response, gold) == pytest.approx(f1)


def test_fever_labels_from_responses() -> None:
    assert fever_label("SUPPORTS. The passage says so.") == "SUPPORTS"
    assert fever_label("Label: REFUTES - it was 1990") == "REFUTES"
    assert fever_label("NOT ENOUGH INFO.") == "NOT ENOUGH INFO"
    assert fever_label("Unverified") == "NOT ENOUGH INFO"
    assert fever_label("The claim is plausible.") is None


def test_fever_accuracy_counts_the_gated_abstention() -> None:
    fever = get_task("fever")
    nei = EvalItem(id="x", query="c", gold="NOT ENOUGH INFO", split="dev")
    sup = EvalItem(id="y", query="c", gold="SUPPORTS", split="dev")
    # The gated label (IE / LEM abstain) wins over the label the generator wrote.
    assert fever.score(nei, "SUPPORTS. yes", "NOT ENOUGH INFO") == {"accuracy": 1.0}
    assert fever.score(sup, "SUPPORTS. yes", "NOT ENOUGH INFO") == {"accuracy": 0.0}
    assert fever.score(sup, "SUPPORTS. yes", None) == {"accuracy": 1.0}
    assert fever.score(sup, "no idea", None) == {"accuracy": 0.0}


def test_unknown_dataset_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown dataset 'squad'"):
        get_task("squad")
    with pytest.raises(InputError, match="not found"):
        get_task("fever").load(Path("/nonexistent"))


@needs_data
def test_fever_corpus_never_holds_a_removed_fact_of_an_nei_claim() -> None:
    items, corpus = TASKS["fever"].load(DATA)
    labels = {i.gold for i in items}
    assert labels == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
    nei = {i.query for i in items if i.gold == "NOT ENOUGH INFO"}
    assert 0.25 < len(nei) / len(items) < 0.45  # near FEVER's third
    text = " ".join(p.text for p in corpus.paragraphs).lower()
    removed = [
        r
        for line in (DATA / "fever" / "sufficientfacts_fever.jsonl").read_text().splitlines()
        if (row := json.loads(line))["claim"] in nei and row["label_after"] == "NOT ENOUGH"
        for r in row["removed"]
    ]
    assert removed and not any(r.lower().strip() in text for r in removed)
    # Every SUPPORTS / REFUTES claim's original evidence is in the corpus.
    evidence = {
        json.loads(line)["claim"]: json.loads(line)["evidence"]
        for line in (DATA / "fever" / "fever_claims_with_evidence_text.jsonl").read_text().splitlines()
    }
    for i in items[:200]:
        if i.gold != "NOT ENOUGH INFO":
            assert all(e["sentence"].lower() in text for e in evidence[i.query])
    assert {i.split for i in items} == {"dev", "test"}


def test_the_clock_counts_replayed_calls_per_context() -> None:
    import contextvars

    def in_a_context() -> float:
        before = clock.now()
        clock.replay(5.0)
        return clock.now() - before

    base = clock.replayed()
    # Run in a copy of this context (as an anyio worker call is): the replay must not leak out.
    assert contextvars.copy_context().run(in_a_context) >= 5.0
    assert clock.replayed() == base


@pytest.mark.generator
def test_warm_start_runs_the_live_loop_and_persists_every_update(
    tmp_path: Path, registry: ModelRegistry, small_corpus: Path
) -> None:
    task = TASKS["hotpotqa"]
    ws = Workspace(task, tmp_path / "ws", DATA)
    # An entailment threshold no answer reaches: every first answer fails (WR or IE), so every
    # item exercises select -> act -> reward -> update.
    s = ws.settings(
        tiny_settings(tmp_path),
        sources=[str(small_corpus)],
        # Algorithm 1's rule decides (verdict off): the thresholds above then fail every answer.
        diagnosis={"entail_threshold": 0.999, "joint_entail_threshold": 0.999, "verdict": "off"},
        # Budgets a contended 2-core CI machine cannot overrun: this test is about the loop.
        policy={
            "state_path": str(tmp_path / "state.sqlite"),
            "enabled_actions": ["depth", "mode_switch"],
            "latency_budget_s": 300,
            "request_latency_budget_s": 600,
        },
        # One first pass for both epochs: a routed 1.5B pass would offer its repair only no_repair.
        router={"plans": ["default_hybrid"]},
    )
    engine = Engine(s, models=ModelRegistry.sharing(registry, s))
    engine.load()
    items = [
        EvalItem(id=q["id"], query=q["question"], gold=q["answer"], split="dev") for q in sample_questions(1)
    ]
    try:
        reports = warm_start(engine, items, epochs=2)
    finally:
        engine.close()
    assert [r.epoch for r in reports] == [1, 2] and all(r.items == 1 and r.errors == 0 for r in reports)
    repaired = sum(r.repaired for r in reports)
    assert all(r.failed == 1 for r in reports), [r.as_json() for r in reports]
    assert repaired == 2, [r.as_json() for r in reports]
    assert sum(r.actions[a] for r in reports for a in ("depth", "mode_switch")) == repaired
    # A fresh process's view of the state: every repair was an acknowledged, persisted update.
    reopened = open_policy(s)
    try:
        assert sum(v.pulls for v in reopened.stats().values()) == repaired
    finally:
        reopened.close()


def test_train_cli_refuses_bad_input_with_exit_code_2(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "train", "--dataset", "squad"])
    assert result.exit_code == 2 and "unknown dataset" in result.output
    result = runner.invoke(
        app, ["--data-dir", str(tmp_path), "train", "--dataset", "fever", "--data-root", str(tmp_path)]
    )
    assert result.exit_code == 2 and "not found" in result.output


def small_task() -> Task:
    """HotpotQA scoring over the test corpus: two dev and two test questions of the sample."""
    rows = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    questions = sample_questions()
    wanted = {t for q in questions for t in q["supporting_titles"]}
    paragraphs = tuple(
        Paragraph(f"p{i}", r["title"], r["text"])
        for i, r in enumerate([r for r in rows if r["title"] in wanted] + rows[:30])
    )

    def build(root: Path) -> tuple[list[EvalItem], Corpus]:
        items = [
            EvalItem(id=q["id"], query=q["question"], gold=q["answer"], split="dev" if n < 2 else "test")
            for n, q in enumerate(questions[:4])
        ]
        return items, Corpus(paragraphs, "sample paragraphs")

    hotpot = TASKS["hotpotqa"]
    return Task(
        name="small",
        title="Small",
        prompt="concise",
        max_tokens=24,
        primary="em",
        columns=hotpot.columns,
        build=build,
        score=hotpot.score,
        answer_in=hotpot.answer_in,
    )


@pytest.mark.generator
def test_paper_suite_writes_the_report_and_resumes(tmp_path: Path, registry: ModelRegistry) -> None:
    task = small_task()
    base = tiny_settings(tmp_path / "base")
    base = settings_with(
        base,
        diagnosis={"entail_threshold": 0.999, "joint_entail_threshold": 0.999},
        policy={"latency_budget_s": 300, "request_latency_budget_s": 600},
    )
    methods = [METHODS_BY_NAME["naive"], METHODS_BY_NAME["d2r_linucb"], METHODS_BY_NAME["d2r_linucb_frozen"]]
    plan = RunPlan(epochs=1)
    reports = tmp_path / "reports"

    def suite(chosen: list = methods, restart: bool = False) -> dict:
        return run_paper_suite(
            [task],
            chosen,
            base,
            tmp_path,
            tmp_path / "eval",
            reports,
            plan,
            "test",
            registry=registry,
            restart=restart,
        )

    data = suite()
    small = data["small"]
    assert {m.name for m in methods} <= set(small)
    for m in methods:
        assert small[m.name]["n"] == 2 and 0 <= small[m.name]["em"] <= 100
    # Every first answer fails; the repairing methods repaired, the baseline did not.
    assert small["naive"]["repaired"] == 0 and small["d2r_linucb"]["repaired"] == 100
    assert small["d2r_linucb"]["actions"] and "lift_vs_naive" in small["d2r_linucb"]
    # Whether the passages held the gold answer is known for every non-yes/no answer.
    golds = [i.gold for i in task.items(tmp_path, "test")]
    checkable = sum(g.lower() not in ("yes", "no") for g in golds)
    assert small["naive"]["answer_in_evidence_n"] == checkable
    warm = json.loads((tmp_path / "eval" / "small" / "policies" / "d2r_linucb.warm.json").read_text())
    assert warm["dev_items"] == 2 and warm["epochs"][0]["items"] == 2
    nli = nli_identity(base.models)
    assert "sha256" in nli and warm["nli"] == nli
    text = (reports / "paper.md").read_text()
    # The paper's figures are shown only for its own data sets.
    assert "Table 1" in text and "D2R-RAG (LinUCB)" in text and "(36.2)" not in text
    # The targets, checked from the records: the baselines not run are said to be so.
    assert "### Targets" in text and "| beats Query Paraphrase | - | not run yet |" in text
    assert data["_meta"]["small"]["targets"]["best_d2r"] == "d2r_linucb"
    # Methods not run leave the report interim, and it names them: here every other method.
    assert "Interim: rows short of their test items" in text and "small paraphrase (0)" in text
    assert "small naive (" not in text
    # Each method's run is logged as it ends.
    runs_path = tmp_path / "eval" / "results" / "small" / "runs.json"
    runs = json.loads(runs_path.read_text())
    assert [r["method"] for r in runs] == [m.name for m in methods] and {r["nli"] for r in runs} == {nli}
    assert f"; NLI {nli}" in text
    # A torn last record (a kill mid-write) is dropped and that item runs again; nothing else reruns.
    records = tmp_path / "eval" / "results" / "small" / "naive.test.jsonl"
    lines = records.read_text().splitlines()
    records.write_text(lines[0] + "\n" + lines[1][:20])
    again = suite()
    assert again["small"]["naive"]["n"] == 2
    assert records.read_text().splitlines()[0] == lines[0]
    # Records made under other NLI weights are never resumed under these ...
    other = [{**r, "nli": "other weights"} if r["method"] == "naive" else r for r in runs]
    atomic_write_json(runs_path, other)
    records.write_text(lines[0] + "\n")
    with pytest.raises(InputError, match=r"made with NLI other weights.*--restart"):
        suite([METHODS_BY_NAME["naive"]])
    # ... --restart sets them aside (nothing deleted) and runs the method afresh.
    fresh = suite([METHODS_BY_NAME["naive"]], restart=True)
    assert fresh["small"]["naive"]["n"] == 2
    (archived,) = (tmp_path / "eval" / "results" / "small" / "archive").glob("*/naive")
    assert (archived / "naive.test.jsonl").read_text() == lines[0] + "\n"
    assert [r["nli"] for r in json.loads((archived / "runs.json").read_text())] == ["other weights"]
    assert [r["nli"] for r in json.loads(runs_path.read_text()) if r["method"] == "naive"] == [nli]


@pytest.mark.generator
def test_a_warm_start_on_labelled_rows_learns_the_gold_answers_judgement_too(
    tmp_path: Path, registry: ModelRegistry, small_corpus: Path
) -> None:
    from ragmend.train.user_data import read_user_data

    rows = tmp_path / "mine.jsonl"
    q = sample_questions(1)[0]
    rows.write_text(json.dumps({"question": q["question"], "answer": q["answer"]}) + "\n")
    data = read_user_data(rows)
    assert data.kind == "qa" and data.overrides is None and data.items[0].gold == q["answer"]
    # The served engine itself (its corpus), not a workspace; every first answer fails.
    s = settings_with(
        tiny_settings(tmp_path),
        sources=[str(small_corpus)],
        diagnosis={"entail_threshold": 0.999, "joint_entail_threshold": 0.999, "verdict": "off"},
        policy={
            "state_path": str(tmp_path / "state.sqlite"),
            "enabled_actions": ["mode_switch"],
            "latency_budget_s": 300,
            "request_latency_budget_s": 600,
        },
    )
    engine = Engine(s, models=ModelRegistry.sharing(registry, s))
    engine.load()
    try:
        (report,) = warm_start(engine, data.items, epochs=1, overrides=data.overrides, judge=data.judge)
        pulls = engine.policy.stats()["mode_switch"].pulls
    finally:
        engine.close()
    assert report.repaired == 1 and report.right in (0, 1)
    # Two observations of the arm: the diagnosis's reward, then the gold answer's judgement.
    assert report.credited == 1 and pulls == 2


def test_user_data_is_refused_row_by_row_with_exit_code_2(tmp_path: Path) -> None:
    from ragmend.train.user_data import read_user_data

    def refused(text: str) -> str:
        path = tmp_path / "rows.jsonl"
        path.write_text(text)
        with pytest.raises(InputError) as e:
            read_user_data(path)
        return str(e.value)

    assert "rows.jsonl:2: not valid JSON" in refused('{"question": "a?", "answer": "b"}\n{oops\n')
    assert "must both be non-empty" in refused('{"question": "a?"}\n')
    assert "label must be one of" in refused('{"claim": "x", "label": "TRUE"}\n')
    assert "questions and claims in one file" in refused(
        '{"question": "a?", "answer": "b"}\n{"claim": "x", "label": "SUPPORTS"}\n'
    )
    assert "expected the keys" in refused('{"text": "x"}\n')
    assert "no rows" in refused("\n")
    claims = tmp_path / "claims.jsonl"
    claims.write_text('{"claim": "Paris is in France.", "label": "supports"}\n')
    data = read_user_data(claims)
    assert data.kind == "claim" and data.overrides == {"prompt": "claim"} and data.items[0].gold == "SUPPORTS"
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path), "train"]
    result = runner.invoke(app, [*base, "--data", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "no such file" in " ".join(result.output.split())
    result = runner.invoke(app, [*base, "--data", str(claims), "--dataset", "fever"])
    assert result.exit_code == 2 and "either --dataset" in " ".join(result.output.split())
