"""`ragmend bench router`: the router replayed on recorded first passes (bench/suites/router_replay.py),
over records written here in the evaluation's layout, so what each setting does is checked against
rewards known in advance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ragmend.bench.suites.router_replay import (
    ROW,
    Setting,
    fixed_plans,
    load_items,
    replay,
)
from ragmend.corpora.tasks import get_task
from ragmend.diagnosis.question_form import question_form
from ragmend.policy.plan_context import PlanContextBuilder

PLANS = ["default_hybrid", "large_hybrid"]
TASKS = [get_task("hotpotqa"), get_task("fever")]
PRIMARY = {t.name: t.primary for t in TASKS}


def record(item_id: str, right: bool, seconds: float, claim: bool) -> dict[str, object]:
    """A first pass as the evaluation records it: its verdict's P(unsupported) follows its judgement."""
    metric = "accuracy" if claim else "em"
    return {
        "id": item_id,
        "question_kind": "claim" if claim else "which",
        "first_p_unsupported": 0.1 if right else 0.9,
        "first_quality": 1.0 if right else 0.0,
        "first_failure": "NoFailure" if right else "WR",
        "first_kappa": "no_triplet",
        "latency_s": seconds,
        "scores": {metric: float(right)},
    }


def write_rows(results: Path, n: int, right_of: dict[tuple[str, str], object]) -> dict[str, str]:
    """n items per task; `right_of[(task, plan)]`: whether that plan answers item k right (a callable
    of k). Returns the queries by id."""
    queries: dict[str, str] = {}
    for task in TASKS:
        claim = task.name == "fever"
        (results / task.name).mkdir(parents=True)
        for plan in PLANS:
            rows = []
            for k in range(n):
                item_id = f"{task.name}-{k}"
                queries[item_id] = f"Claim number {k} is true." if claim else f"Which city is item {k} in?"
                right = right_of[(task.name, plan)](k)  # type: ignore[operator]
                rows.append(record(item_id, right, 3.0 if plan == "large_hybrid" else 1.0, claim))
            text = "\n".join(json.dumps(r) for r in rows) + "\n"
            (results / task.name / f"{ROW[plan]}.dev.jsonl").write_text(text)
    return queries


def test_the_replayed_router_learns_the_stronger_plan_for_questions_and_the_cheap_one_for_claims(
    tmp_path: Path,
) -> None:
    queries = write_rows(
        tmp_path,
        40,
        {
            ("hotpotqa", "default_hybrid"): lambda k: k % 4 == 0,
            ("hotpotqa", "large_hybrid"): lambda k: True,
            ("fever", "default_hybrid"): lambda k: k % 5 != 0,
            ("fever", "large_hybrid"): lambda k: k % 5 != 0,
        },
    )
    items = load_items(tmp_path, TASKS, PLANS, queries)
    assert [i.task for i in items[:4]] == ["hotpotqa", "fever", "hotpotqa", "fever"]  # interleaved
    online = replay(items, Setting(), warm=20, primary=PRIMARY)
    assert online["hotpotqa"]["plans"] == {"large_hybrid": 30} and online["hotpotqa"]["em"] == 100.0
    assert online["fever"]["plans"] == {"default_hybrid": 30}  # as accurate there, and cheaper
    fine = replay(items, Setting(kinds="fine"), warm=20, primary=PRIMARY)
    assert fine["hotpotqa"]["plans"] == {"large_hybrid": 30} and fine["fever"]["plans"] == {
        "default_hybrid": 30
    }
    fixed = fixed_plans(items, 20, PRIMARY)
    assert fixed["hotpotqa default_hybrid"]["em"] == round(100 * 7 / 30, 2)  # k = 12, 16, ..., 36 of 10..39


def test_with_the_evidence_read_first_the_router_sends_what_cannot_be_answered_to_the_cheap_plan(
    tmp_path: Path,
) -> None:
    """Half the questions' evidence answers them (P(answerable) 0.9): only the stronger plan is
    right there. The other half's does not (0.1): both plans abstain rightly, the default at a
    third of the seconds. Without the reading the questions look alike and share one plan; with
    it, each half gets its own."""
    task = get_task("hotpotqa")
    (tmp_path / task.name).mkdir(parents=True)
    queries = {}
    for plan in PLANS:
        rows = []
        for k in range(80):
            answerable = k % 2 == 0
            queries[f"q-{k}"] = f"Which city is item {k} in?"
            right = (answerable and plan == "large_hybrid") or not answerable
            row = record(f"q-{k}", right, 3.0 if plan == "large_hybrid" else 1.0, claim=False)
            rows.append({**row, "first_p_answerable": 0.9 if answerable else 0.1})
        text = "\n".join(json.dumps(r) for r in rows) + "\n"
        (tmp_path / task.name / f"{ROW[plan]}.dev.jsonl").write_text(text)
    items = load_items(tmp_path, [task], PLANS, queries)
    primary = {task.name: task.primary}
    blind = replay(items, Setting(), warm=20, primary=primary)["hotpotqa"]
    reading = replay(items, Setting(evidence=True), warm=20, primary=primary)["hotpotqa"]
    assert blind["plans"] == {"large_hybrid": 60} and blind["em"] == 100.0
    assert reading["em"] == 100.0 and reading["plans"]["default_hybrid"] >= 27  # of the 30 unanswerable
    assert reading["latency_s"] < 0.75 * blind["latency_s"]


def test_a_frozen_router_keeps_the_warm_start_picture_where_a_learning_one_follows_the_stream(
    tmp_path: Path,
) -> None:
    # The 0.5B is right on the warm items and wrong on every later one; the 1.5B always right.
    queries = write_rows(
        tmp_path,
        40,
        {
            ("hotpotqa", "default_hybrid"): lambda k: k < 10,
            ("hotpotqa", "large_hybrid"): lambda k: True,
            ("fever", "default_hybrid"): lambda k: True,
            ("fever", "large_hybrid"): lambda k: True,
        },
    )
    items = load_items(tmp_path, TASKS, PLANS, queries)
    frozen = replay(items, Setting(online=False), warm=20, primary=PRIMARY)
    learning = replay(items, Setting(), warm=20, primary=PRIMARY)
    assert frozen["hotpotqa"]["plans"] == {"default_hybrid": 30} and frozen["hotpotqa"]["em"] == 0.0
    assert learning["hotpotqa"]["plans"].get("large_hybrid", 0) > 20
    assert learning["hotpotqa"]["em"] > 60.0


def test_pooled_kinds_keep_the_claim_apart_and_every_other_feature_in_place() -> None:
    fine = PlanContextBuilder(context_dim=2, kinds="fine")
    pooled = PlanContextBuilder(context_dim=2)
    assert pooled.dim == fine.dim - 8 and pooled.feature_names()[2:4] == ("kind=claim", "kind=question")
    emb = np.ones(8) / np.sqrt(8)
    for query, claim, expected in (
        ("Paris is in France.", True, [1.0, 0.0]),
        ("Which city is larger?", False, [0.0, 1.0]),
        ("Who wrote it?", False, [0.0, 1.0]),
    ):
        x = fine.build(emb, question_form(query, claim=claim), False, 12.0)
        p = pooled.build(emb, question_form(query, claim=claim), False, 12.0)
        assert p[2:4].tolist() == expected
        assert p[:2].tolist() == x[:2].tolist() and p[4:].tolist() == x[12:].tolist()
