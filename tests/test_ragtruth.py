"""The RAGTruth hallucination-detection suite (the EGC paper's protocol): loader, rendering, metrics, and real
responses diagnosed end to end by the engine's Diagnoser."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragmend.bench.stats import auroc
from ragmend.bench.suites.ragtruth import (
    EGC_FEATURES,
    OVERRIDES,
    RAGTRUTH_FILE,
    RagTruthItem,
    cross_validated_scores,
    fold_of,
    load_ragtruth,
    run_ragtruth_suite,
    summarize_group,
    verdict_row,
)
from ragmend.corpora.cases import source_documents
from ragmend.diagnosis.answer_spans import locate_claims
from ragmend.diagnosis.compound import decompose
from ragmend.engine import Engine
from ragmend.errors import InputError
from ragmend.logistic import fit_logistic
from ragmend.models.registry import ModelRegistry
from ragmend.settings import settings_with
from tests.conftest import tiny_settings

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


@needs_data
def test_loader_keeps_the_responses_with_a_source() -> None:
    items, left_out = load_ragtruth(DATA / RAGTRUTH_FILE)
    assert len(items) == 400 and left_out == 200  # the QA rows of this copy have no passages
    assert {i.task_type for i in items} == {"Summary", "Data2txt"}
    assert sum(i.hallucinated for i in items) == 167
    assert all(i.documents and all(d.strip() for d in i.documents) for i in items)
    # Spans are offsets into the response and hold the labelled text.
    lines = (DATA / RAGTRUTH_FILE).read_text(encoding="utf-8").splitlines()
    row = next(json.loads(line) for line in lines if '"labels": [{' in line)
    item = next(i for i in items if i.id == str(row["id"]))
    s, e = item.spans[0]
    assert item.response[s:e] == row["labels"][0]["text"]


def test_a_structured_record_reads_as_sentences() -> None:
    docs = source_documents(
        {
            "name": "Tinker's Burgers",
            "city": "Summerland",
            "hours": {"Monday": "11:0-17:0"},
            "attributes": {
                "RestaurantsTakeOut": True,
                "WiFi": "no",
                "Music": None,
                "Parking": {"lot": False},
            },
            "review_info": [{"review_stars": 5.0, "review_text": "Best burgers!"}, {"review_text": "Slow"}],
        }
    )
    assert docs == (
        "name: Tinker's Burgers. city: Summerland.",
        "hours: monday: 11:0-17:0.",
        "attributes: restaurants take out: yes; wi fi: no; music: not given; parking: lot: no.",
        "review info: review stars: 5.0; review text: Best burgers!",
        "review info: review text: Slow.",
    )
    assert source_documents("  ") == () and source_documents("An article.") == ("An article.",)


def test_claims_are_placed_in_the_response() -> None:
    response = "It opens at 8. It closes at 5.\nIt has WiFi."
    assert locate_claims(response, ["It opens at 8.", "It closes at 5.", "It has WiFi.", "Gone."]) == [
        (0, 14),
        (15, 30),
        (31, 43),
        None,
    ]
    # The atomic parts of a compound sentence: the second is placed at its own predicate, so a
    # labelled span there is found by the part that says it.
    compound = "Bates is charged with manslaughter and has said the shooting was an accident."
    parts = decompose(compound)
    assert parts == ["Bates is charged with manslaughter.", "Bates has said the shooting was an accident."]
    assert [compound[a:b] for a, b in filter(None, locate_claims(compound, parts))] == [
        "Bates is charged with manslaughter",
        "has said the shooting was an accident",
    ]


def _record(hallucinated: bool, entail: list[float], source: str = "s", state: str = "neutral") -> dict:
    return {
        "id": source,
        "source_id": source,
        "task_type": "Summary",
        "model": "m",
        "hallucinated": hallucinated,
        "passages": 3,
        "claims": [
            {"text": "c", "state": state, "entail": e, "contradict": 0.1, "span": [0, 1]}
            | {"hallucinated": e < 0.5}
            for e in entail
        ],
        "e_r": state,
        "e_q": "entail",
        "failure": "NoFailure" if state == "entail" else "WR",
        "evidence_conflict": False,
        "egc": dict.fromkeys((*EGC_FEATURES, "score"), 0.5),
        "truncated": False,
        "diagnose_s": 0.1,
    }


def test_signals_read_as_hallucination_scores() -> None:
    records = [
        _record(False, [0.9, 0.8], "a", "entail"),
        _record(False, [0.95], "b", "entail"),
        _record(True, [0.9, 0.2], "c"),
        _record(True, [0.1], "d"),
    ]
    s = summarize_group(records)
    # The least-supported claim separates them perfectly; EGC is flat here: chance.
    assert s["signals"]["weakest_claim"]["auroc"] == 1.0
    assert s["signals"]["egc"]["auroc"] == 0.5
    assert s["verdicts"]["e_r_not_entail"] == {
        "flagged": 0.5,
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
        "macro_f1": 1.0,
    }
    assert s["claim_level"]["claims"] == 6 and s["claim_level"]["hallucinated"] == 2
    assert verdict_row(np.array([True, True]), np.array([True, False]))["precision"] == 0.5


def test_auroc_counts_ties_half() -> None:
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8, 0.8]), np.array([0, 0, 1, 1, 0], bool)) == pytest.approx(
        3.5 / 6
    )
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([True, True])))


def test_a_sign_constraint_holds_a_weight_at_zero_and_frees_the_rest() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=400) > 0
    free = fit_logistic(x, y).coef
    assert free[0] > 1.0 and free[1] < -0.5
    # Feature 1's weight may not be negative: held at 0, the others still fitted as before.
    held = fit_logistic(x, y, signs=np.array([1, 1, 0])).coef
    assert held[1] == 0.0 and held[0] > 1.0
    # A constraint the data agrees with changes nothing.
    agree = fit_logistic(x, y, signs=np.array([1, -1, 0])).coef
    assert np.allclose(agree, free, atol=1e-6)


def test_logistic_regression_is_cross_validated_by_source() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    y = x[:, 0] + 0.3 * rng.normal(size=200) > 0
    w = fit_logistic(x, y).coef
    assert w[0] > 1.0 and abs(w[1]) < w[0] / 3  # the informative feature carries the weight
    records = [_record(bool(h), [0.2 if h else 0.9], f"src{i // 3}") for i, h in enumerate(y)]
    folds: dict[str, set[int]] = {}
    for r in records:  # a source's responses share a fold: never trained on while scored
        folds.setdefault(r["source_id"], set()).add(fold_of(r["source_id"]))
    assert all(len(f) == 1 for f in folds.values()) and len({f for s in folds.values() for f in s}) == 5
    scores = cross_validated_scores(records)
    assert not np.isnan(scores).any() and auroc(scores, y) > 0.95


@pytest.mark.slow
@needs_data
def test_real_responses_are_diagnosed_and_reported(
    tmp_path: Path, registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tiny_settings(tmp_path, **OVERRIDES)
    engine = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    reports = tmp_path / "reports"
    summary = run_ragtruth_suite(engine, DATA, tmp_path / "work", reports, 6, "ragmend eval --suite ragtruth")
    records_path = tmp_path / "work" / "ragtruth.test.jsonl"
    records = [json.loads(line) for line in records_path.read_text().splitlines()]
    assert len(records) == 6 and summary["all"]["n"] == 6
    assert all(r["setup"]["nli"] == summary["_meta"]["nli"] for r in records)
    assert all(r["passages"] >= 1 and r["claims"] for r in records)
    probs = [c["entail"] for r in records for c in r["claims"]]
    assert all(0.0 <= p <= 1.0 for p in probs) and len(set(probs)) > 1  # real NLI scores
    assert "| weakest_claim |" in (reports / "ragtruth.md").read_text()
    assert (reports / "ragtruth-roc.png").stat().st_size > 1000
    assert json.loads((reports / "ragtruth.json").read_text())["_meta"]["max_claims"] == 32

    # A rerun with the same setup reads the records; a changed setup diagnoses again.
    def refuse(self: object, item: RagTruthItem) -> dict:
        raise AssertionError("records should have been reused")

    monkeypatch.setattr("ragmend.bench.suites.ragtruth.RagTruthRun.run_item", refuse)
    run_ragtruth_suite(engine, DATA, tmp_path / "work", reports, 6, "again")
    fewer = settings_with(settings, diagnosis={"max_claims": 4})
    changed = Engine(fewer, models=ModelRegistry.sharing(registry, fewer))
    with pytest.raises(AssertionError, match="reused"):
        run_ragtruth_suite(changed, DATA, tmp_path / "work", reports, 6, "changed")
    # A restart diagnoses again under the same setup (a changed diagnosis, the same weights),
    # and sets the earlier records aside rather than deleting them.
    with pytest.raises(AssertionError, match="reused"):
        run_ragtruth_suite(engine, DATA, tmp_path / "work", reports, 6, "restart", restart=True)
    assert not records_path.exists()
    assert [p.name for p in (tmp_path / "work" / "archive").glob("*/*")] == ["ragtruth.test.jsonl"]


def test_missing_data_is_a_clear_error(tmp_path: Path, registry: ModelRegistry) -> None:
    settings = tiny_settings(tmp_path, **OVERRIDES)
    engine = Engine(settings, models=ModelRegistry.sharing(registry, settings))
    with pytest.raises(InputError, match="not found"):
        run_ragtruth_suite(engine, tmp_path / "nowhere", tmp_path / "w", tmp_path / "r", 2, "x")
