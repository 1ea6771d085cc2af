"""The evaluation's targets (bench/harness/targets.py) and the diagnosis evidence, from records
made up to test each rule."""

from __future__ import annotations

import pytest

from ragmend.bench.harness.report import summarize
from ragmend.bench.harness.targets import check_targets, diagnosis_evidence, paper_lift, targets_markdown
from ragmend.corpora.tasks import TASKS

FEVER = TASKS["fever"]


def _records(correct: list[bool], latency: float, flagged: list[bool] | None = None) -> list[dict]:
    flagged = flagged or [False] * len(correct)
    return [
        {
            "id": f"i{n}",
            "scores": {"accuracy": float(ok)},
            "latency_s": latency,
            "memory_bytes": None,
            "memory_source": "unavailable",
            "relevance": 0.0,
            "faithful": None,
            "first_failure": "WR" if f else "NoFailure",
            "action": "rerank" if f else None,
            "success": False,
            "kept": None,
        }
        for n, (ok, f) in enumerate(zip(correct, flagged, strict=True))
    ]


def test_the_paper_lift_is_its_best_d2r_policy_over_naive() -> None:
    assert paper_lift(FEVER) == 5.2  # Thompson sampling 61.5 - Naive 56.3
    assert paper_lift(TASKS["hotpotqa"]) == 4.2  # 40.4 - 36.2


def test_targets_are_checked_pairwise_and_a_miss_says_by_how_much() -> None:
    naive = _records([True] * 150 + [False] * 150, latency=5.0)
    # D2R flags 100 of the 150 wrong answers and fixes 12; flags 10 right ones and breaks 3.
    d2r_ok = [True] * 3 + [False] * 3 + [True] * 144 + [True] * 12 + [False] * 138
    flags = [True] * 10 + [False] * 140 + [True] * 100 + [False] * 50
    records = {
        "naive": naive,
        "d2r_linucb": _records(d2r_ok, latency=9.0, flagged=flags),
        "d2r_ts": _records([True] * 150 + [False] * 150, latency=6.0),
        "expansion": _records([True] * 100 + [False] * 200, latency=15.0),
    }
    summary = {m: summarize(FEVER, r) for m, r in records.items()}
    result = check_targets(FEVER, summary, records)
    assert result["best_d2r"] == "d2r_linucb"  # 159 right against Thompson sampling's 150
    checks = {c["target"]: c for c in result["checks"]}
    assert checks["beats Naive RAG"]["met"] and checks["beats Naive RAG"]["lift"] == 3.0
    assert checks["beats Query Paraphrase"]["met"] is None  # not run
    assert checks["beats Context Expansion (k'=20)"]["met"]
    assert checks["latency <= 1.6x Naive RAG"] == {
        "target": "latency <= 1.6x Naive RAG",
        "met": False,
        "value": 1.8,
    }
    lift = checks["lift over Naive RAG >= the paper's (+5.2)"]
    assert lift["met"] is False and lift["short_by"] == 2.2
    assert checks[">= 300 test items"]["met"]
    assert result["diagnosis"] == diagnosis_evidence(FEVER, naive, records["d2r_linucb"])
    assert result["diagnosis"] == {
        "naive_wrong": 150,
        "wrong_flagged": 100,
        "wrong_flagged_fixed": 12,
        "wrong_unflagged": 50,
        "naive_right": 150,
        "right_flagged": 10,
        "right_flagged_broken": 3,
        "naive_wrong_answer_in_evidence": (0, 0),  # FEVER: not decidable
        "flagged_still_wrong": 88,
        "flagged_still_wrong_answer_in_evidence": (0, 0),
    }
    text = "\n".join(targets_markdown(FEVER, result))
    assert "| latency <= 1.6x Naive RAG | **no** | 1.8 |" in text and "short by 2.20" in text
    assert "the diagnosis flagged 100 (67%)" in text and "generator's share, measured" not in text


def test_the_generators_share_is_measured_where_the_answer_can_be_found() -> None:
    from ragmend.corpora.tasks import EvalItem

    hotpot = TASKS["hotpotqa"]
    item = EvalItem(id="q", query="Where was Marie Curie born?", gold="Warsaw", split="test")
    assert hotpot.answer_in(item, ["Marie Curie was born in Warsaw, Poland."]) is True
    assert hotpot.answer_in(item, ["She was born in Paris."]) is False
    assert hotpot.answer_in(EvalItem(id="q", query="Is it?", gold="yes", split="test"), ["yes it is"]) is None
    assert FEVER.answer_in(item, ["Warsaw"]) is None

    def records(em: list[float], flagged: list[bool], held: list[bool | None]) -> list[dict]:
        rows = _records([bool(e) for e in em], 5.0, flagged)
        for r, e, h in zip(rows, em, held, strict=True):
            r["scores"] = {"em": e, "f1": e}
            r["answer_in_evidence"] = h
        return rows

    # Four wrong naive answers (three checkable, two of them with the answer in the passages).
    naive = records([0, 0, 0, 0, 1], [True, True, False, False, False], [True, True, False, None, True])
    d2r = records([1, 0, 0, 0, 1], [True, True, False, False, False], [True, True, False, None, True])
    d = diagnosis_evidence(hotpot, naive, d2r)
    assert d["naive_wrong_answer_in_evidence"] == (2, 3)
    assert d["flagged_still_wrong"] == 1 and d["flagged_still_wrong_answer_in_evidence"] == (1, 1)
    summary = summarize(hotpot, d2r)
    assert summary["answer_in_evidence"] == 75.0 and summary["answer_in_evidence_n"] == 4
    result = {"best_d2r": "d2r_linucb", "metric": "em", "checks": [], "diagnosis": d}
    text = "\n".join(targets_markdown(hotpot, result))
    assert "held the gold answer in 2 (67%)" in text and "held the answer in 1 (100%)" in text


def test_a_baseline_that_wins_is_explained_by_what_the_diagnosis_saw() -> None:
    naive = _records([False] * 10, latency=5.0)
    # Expansion: right on items 0-5; D2R: right on 0-1 and 8 only, and had flagged items 2 and 3.
    expansion = _records([True] * 6 + [False] * 4, latency=15.0)
    for r, held in zip(expansion, [True] * 5 + [None] + [False] * 4, strict=True):
        r["answer_in_evidence"] = held
    d2r = _records(
        [True, True, False, False, False, False, False, False, True, False],
        latency=6.0,
        flagged=[False, False, True, True] + [False] * 6,
    )
    records = {"naive": naive, "d2r_linucb": d2r, "expansion": expansion}
    summary = {m: summarize(FEVER, r) for m, r in records.items()}
    result = check_targets(FEVER, summary, records)
    checks = {c["target"]: c for c in result["checks"]}
    assert checks["beats Context Expansion (k'=20)"]["met"] is False
    assert result["baselines"] == {
        "expansion": {"wins": 4, "losses": 1, "wins_flagged": 2, "wins_answer_in_evidence": (3, 3)}
    }
    text = "\n".join(targets_markdown(FEVER, result))
    assert "it answered 4 items right that D2R got wrong (and 1 the other way)" in text
    assert "had flagged 2 of those 4, so 2 were out of every repair's reach" in text
    assert "held the gold answer in 3 of 3 checkable" in text
    # A baseline D2R beats gets no such paragraph.
    records["expansion"] = _records([False] * 10, latency=15.0)
    result = check_targets(FEVER, {m: summarize(FEVER, r) for m, r in records.items()}, records)
    assert result["baselines"] == {}


def test_markdown_table_is_the_reports_layout() -> None:
    from ragmend.bench.markdown import markdown_table

    assert markdown_table(["a", "n"], [["x", 1], ["y", None]]) == [
        "| a | n |",
        "|---|---|",
        "| x | 1 |",
        "| y | - |",
    ]
    assert markdown_table(["set", "n", "met"], [], align="lrl")[1] == "|---|---:|---|"
    with pytest.raises(ValueError):
        markdown_table(["a", "b"], [], align="l")


def test_repair_effects_count_answers_turned_right_and_wrong_and_their_extra_seconds() -> None:
    from ragmend.bench.harness.report import repair_effects

    def rec(first: float | None, final: float, kept: str | None, latency: float) -> dict:
        return {
            "scores": {"accuracy": final},
            # None: the reply carries the first answer (nothing replaced it)
            "first_scores": None if first is None else {"accuracy": first},
            "action": None if kept is None else "focus",
            "kept": kept,
            "latency_s": latency,
            "first_pass_s": 2.0,
        }

    records = [
        rec(0.0, 1.0, "repaired", 5.0),  # wrong -> right, 3 s extra
        rec(1.0, 0.0, "abstained", 2.0),  # right -> an abstention, no extra time
        rec(None, 0.0, "original", 4.0),  # kept the first (wrong) answer, 2 s extra
        rec(None, 1.0, None, 2.0),  # not repaired: not counted
    ]
    effects = repair_effects(records, "accuracy")
    assert (effects["turned_right_n"], effects["turned_wrong_n"]) == (1, 1)
    assert effects["turned_right"] == pytest.approx(100 / 3, abs=0.01)
    assert effects["abstained"] == 25.0  # of every request
    assert effects["extra_s_per_right"] == 5.0  # (3 + 0 + 2) s over one answer turned right
    # Records made before the first answer's scores were kept say nothing.
    assert repair_effects([{k: v for k, v in records[0].items() if k != "first_scores"}], "accuracy") == {}


def test_the_first_passes_targets_compare_ragmend_with_the_plans_it_routes_between() -> None:
    from ragmend.bench.harness.targets import router_targets

    hotpot = TASKS["hotpotqa"]

    def rows(right: int, latency: float) -> list[dict]:
        out = _records([True] * right + [False] * (300 - right), latency)
        for r in out:
            r["scores"] = {"em": r["scores"]["accuracy"], "f1": 0.0, "contains": 0.0}
        return out

    records = {
        "naive": rows(40, 1.0),
        "plan_large_hybrid": rows(90, 2.0),
        "plan_default_hybrid": rows(45, 1.0),
        "ragmend": rows(88, 1.9),
    }
    summary = {m: summarize(hotpot, r) for m, r in records.items()}
    checks = {c["target"]: c for c in router_targets(hotpot, summary, records)}
    lift = checks[">= +8 over Naive RAG, 95% CI above 0"]
    assert lift["met"] and lift["lift"] == pytest.approx(16.0)
    within = checks["within 1 of the most accurate fixed plan (plan_large_hybrid)"]
    assert within["met"] and within["value"] == pytest.approx(-0.67)  # 29.33 against 30.0
    assert checks["mean latency no more than plan_large_hybrid's"]["met"]
    # Slower than the best plan: that target is short, and says by how much.
    records["ragmend"] = rows(88, 2.5)
    summary = {m: summarize(hotpot, r) for m, r in records.items()}
    slower = {c["target"]: c for c in router_targets(hotpot, summary, records)}
    assert not slower["mean latency no more than plan_large_hybrid's"]["met"]
    assert router_targets(hotpot, {k: v for k, v in summary.items() if k != "ragmend"}, {}) == []
