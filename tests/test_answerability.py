"""Answerability (diagnosis/answerability.py): its features on hand-made evidence, its fit on
synthetic rows, its file and the shipped one. The shipped model on questions the bundled corpus
can and cannot answer, with the real retrieval, cross-encoder and embeddings, is in
tests/test_diagnosis_cases.py (test_e_q_is_answerability_whatever_the_answer_says)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragmend.diagnosis.answerability import (
    BUNDLED,
    FEATURES,
    AnswerabilityModel,
    answerability_features,
    open_answerability,
    title_coverage,
)
from ragmend.errors import ConfigError
from ragmend.train.answerability import fit_answerability, youden_threshold


def test_title_coverage_counts_the_question_names_a_passage_is_titled_by() -> None:
    names = ["Arthur's Magazine", "First for Women"]
    assert title_coverage(names, ["Arthur's Magazine", "Women's History"]) == 0.5
    assert title_coverage(names, ["First for Women (magazine)", "Arthur's Magazine"]) == 1.0
    assert title_coverage([], ["Anything"]) == 1.0  # a question naming nothing is not penalised
    assert title_coverage(["Jaws"], ["Jawsome Records"]) == 0.0  # whole words, not prefixes


def test_features_read_the_question_names_in_the_evidence_and_its_titles() -> None:
    query = "Which magazine was started first, Arthur's Magazine or First for Women?"
    evidence = ["Arthur's Magazine: Arthur's Magazine was an American literary periodical.", "Other: text."]
    f = answerability_features(query, ["Arthur's Magazine", "Other"], evidence, np.array([0.9, 0.2]), None)
    assert set(f) == set(FEATURES)
    assert f["rel_max"] == 0.9 and f["rel_second"] == 0.2
    assert f["name_coverage"] == 0.5 and f["best_coverage"] == 0.5 and f["title_coverage"] == 0.5
    assert f["has_names"] == 1.0 and f["qsim_max"] == 0.0
    bare = answerability_features("What happens if you swallow gum?", [], [], None, None)
    assert bare["has_names"] == 0.0 and bare["rel_max"] == 0.0


def _rows(n: int, seed: int = 0) -> list[dict[str, object]]:
    """Answerable questions have relevant passages titled by their names; gold-removed ones keep
    relevance but lose their titles; out-of-corpus ones lose relevance."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for i in range(n):
        kind = ("answerable", "gold_removed", "out_of_corpus")[i % 3]
        rel = rng.uniform(0.5, 1.0) if kind != "out_of_corpus" else rng.uniform(0.0, 0.6)
        titled = rng.uniform(0.5, 1.0) if kind == "answerable" else rng.uniform(0.0, 0.55)
        features = {f: 0.5 for f in FEATURES} | {"rel_max": rel, "title_coverage": titled}
        rows.append({"id": f"q{i}", "kind": kind, "features": features})
    return rows


def test_the_fit_separates_the_kinds_and_its_threshold_is_chosen_out_of_fold(tmp_path: Path) -> None:
    rows = _rows(300)
    model = fit_answerability(rows)
    p = {r["id"]: model.probability(r["features"]) for r in _rows(300, seed=1)}  # type: ignore[arg-type]
    kinds = {r["id"]: r["kind"] for r in _rows(300, seed=1)}
    kept = np.mean([p[i] >= model.threshold for i in p if kinds[i] == "answerable"])
    flagged = np.mean([p[i] < model.threshold for i in p if kinds[i] != "answerable"])
    assert kept > 0.8 and flagged > 0.8
    weights = dict(zip(model.score.features, model.score.coef, strict=True))
    assert weights["title_coverage"] > 0 and weights["rel_max"] > 0  # the signs the module fixes
    model.save(tmp_path / "a.json")
    assert open_answerability(str(tmp_path / "a.json")) == model
    assert open_answerability("off") is None
    # diagnosis.answerable_threshold: the operating point moves, the fitted score does not.
    moved = open_answerability(str(tmp_path / "a.json"), threshold=0.6)
    assert moved is not None and moved.threshold == 0.6 and moved.score == model.score
    (tmp_path / "bad.json").write_text(
        '{"score": {"features": ["nope"], "mean": [0], "scale": [1], '
        '"coef": [1], "intercept": 0}, "threshold": 0.5}'
    )
    with pytest.raises(ConfigError, match="unknown features"):
        AnswerabilityModel.load(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="could not be read"):
        AnswerabilityModel.load(tmp_path / "missing.json")


def test_youden_threshold_weighs_each_unanswerable_kind_half() -> None:
    p = np.array([0.9, 0.8, 0.7, 0.3, 0.6, 0.1])
    kinds = np.array(["answerable"] * 3 + ["gold_removed", "gold_removed", "out_of_corpus"])
    t = youden_threshold(p, kinds == "answerable", kinds)
    assert 0.6 < t <= 0.7  # keeps every answerable question and flags every unanswerable one


def test_the_shipped_model_is_a_readable_file() -> None:
    model = open_answerability("bundled")
    assert model is not None and model.score.features == FEATURES and 0 < model.threshold < 1
    assert BUNDLED.exists()


def test_an_answerability_file_that_cannot_be_read_fails_the_start(tmp_path: Path) -> None:
    from ragmend.engine import Engine
    from ragmend.settings import load_settings

    engine = Engine(
        load_settings(data_dir=tmp_path, diagnosis={"answerability": str(tmp_path / "none.json")})
    )
    with pytest.raises(ConfigError, match="could not be read"):
        engine.load(roles=())
    assert engine.load_error is not None and "none.json" in engine.load_error
