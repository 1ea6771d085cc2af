"""The shipped NLI model (ragmend/assets/nli-minilm-l6): loaded by default, within the size
limit, documented, calibrated, and right on clear cases of the kind the diagnosis sees. Its
accuracy on the standard sets is `ragmend bench nli --suite` (docs/nli.md), not a test."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragmend.models import bundled
from ragmend.models.nli import OnnxNLI, load_nli
from ragmend.settings import load_settings

ASSET = bundled.RAGMEND_NLI.path()


@pytest.fixture(scope="module")
def nli() -> OnnxNLI:
    model = load_nli(load_settings().models)  # the default configuration
    assert isinstance(model, OnnxNLI)
    return model


def test_it_is_the_default_small_and_documented() -> None:
    assert load_settings().models.nli.model == "bundled:ragmend-nli-minilm-l6"
    assert (ASSET / "model.onnx").stat().st_size <= 60 * 1024 * 1024
    card = (ASSET / "MODEL_CARD.md").read_text()
    for section in ("## Training", "## Calibration", "## Evaluation", "make nli-model"):
        assert section in card
    calib = json.loads((ASSET / "calibration.json").read_text())
    assert calib["temperature"] > 0 and calib["ece_after"] <= calib["ece_before"]


PASSAGE = (
    "Marie Curie: Marie Curie was a Polish and naturalised-French physicist and chemist. She was "
    "born in Warsaw in 1867 and won the Nobel Prize in Physics in 1903."
)


def test_clear_cases(nli: OnnxNLI) -> None:
    batch = nli.predict(
        [
            (PASSAGE, "Marie Curie was born in Warsaw."),
            (PASSAGE, "Marie Curie was born in Berlin."),
            (PASSAGE, "Marie Curie had three brothers."),
            (PASSAGE, "Marie Curie won the Nobel Prize in Physics in 1903."),
            (PASSAGE, "Marie Curie was born in Paris."),
            (PASSAGE, "Marie Curie never won a Nobel Prize."),
            (PASSAGE, "Marie Curie was a chemist."),
        ]
    )
    labels = [("entailment", "neutral", "contradiction")[i] for i in batch.probs.argmax(axis=1)]
    assert labels == [
        "entailment",
        "contradiction",
        "neutral",
        "entailment",
        "contradiction",
        "contradiction",
        "entailment",
    ]
    # Known weakness (MODEL_CARD.md), not asserted: a wrong number ("won ... in 1911", "born in
    # 1900") sits between entailment and contradiction; the KG alignment checks numbers.
    assert np.allclose(batch.probs.sum(axis=1), 1.0, atol=1e-5)


def test_bad_input_has_a_defined_output(nli: OnnxNLI) -> None:
    long_premise = PASSAGE + " Filler sentence about nothing in particular." * 200
    batch = nli.predict(
        [("", "x"), (long_premise, "Marie Curie was born in Warsaw."), ("Le chat dort.", "猫")]
    )
    assert batch.truncated == (False, True, False)
    assert batch.probs[0].tolist() == [0.0, 1.0, 0.0]
    # The fact sits at the start of the premise: truncation kept it, and the verdict stands.
    assert batch.probs[1].argmax() == 0


def test_a_pair_gets_the_same_probabilities_whatever_its_batch_mates(nli: OnnxNLI) -> None:
    # The int8 graph takes each activation's scale over a whole run: batched, a claim's
    # P(entailment) moved with the other pairs of the diagnosis (up to 0.36 on HotpotQA windows).
    pair = ("Marie Curie was born in Warsaw in 1867.", "Marie Curie was born in Warsaw.")
    others = [
        ("The Warsaw Uprising began in 1944. " * 30, "The uprising began in 1944."),
        ("Paris is the capital of France.", "Berlin is the capital of France."),
        ("A", "B"),
    ]
    alone = nli.predict([pair]).probs[0]
    for mates in (others, others[:1], others[::-1]):
        together = nli.predict([*mates, pair]).probs[-1]
        np.testing.assert_allclose(together, alone, atol=1e-6)
