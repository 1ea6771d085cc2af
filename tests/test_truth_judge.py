"""The TruthfulQA answer judge: leave-one-out samples, the logistic fit, and the agreement figures."""

from __future__ import annotations

import numpy as np
import pytest

from ragmend.bench.suites.truth_judge import agreement, decide, fit_weights, leave_one_out


def test_leave_one_out_judges_each_reference_against_the_others() -> None:
    samples = leave_one_out("q?", ["a", "b"], ["x", "y", "z"])
    assert [(s.response, s.label) for s in samples] == [
        ("a", True),
        ("b", True),
        ("x", False),
        ("y", False),
        ("z", False),
    ]
    a, x = samples[0], samples[2]
    assert a.correct == ("b",) and a.incorrect == ("x", "y", "z")
    assert x.correct == ("a", "b") and x.incorrect == ("y", "z")
    # A lone reference cannot be left out: there would be nothing of its kind to compare with.
    assert [s.response for s in leave_one_out("q?", ["a"], ["x", "y"])] == ["x", "y"]


def test_fit_learns_the_informative_feature_with_classes_balanced() -> None:
    rng = np.random.default_rng(0)
    n = 600
    y = rng.random(n) < 0.2  # imbalanced, as TruthfulQA has more incorrect references than correct
    x = rng.normal(size=(n, 3))
    x[:, 1] += np.where(y, 1.5, -1.5)  # only feature 1 carries the label
    w = fit_weights(x, y)
    assert abs(w.coef[1]) > 5 * max(abs(w.coef[0]), abs(w.coef[2]))
    report = agreement(decide(w, x), y)
    # Balanced weighting: the minority class is not sacrificed for overall accuracy.
    assert report["correct_judged_correct"] > 85 and report["incorrect_judged_incorrect"] > 85


def test_agreement_counts_each_class_separately() -> None:
    y = np.array([True, True, False, False, False])
    pred = np.array([True, False, False, False, True])
    r = agreement(pred, y)
    assert (r["n"], r["n_correct"], r["n_incorrect"]) == (5, 2, 3)
    assert r["correct_judged_correct"] == 50.0
    assert r["incorrect_judged_incorrect"] == pytest.approx(66.7)
    assert r["balanced_accuracy"] == pytest.approx(58.3)
