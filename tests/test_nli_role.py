"""The NLI role and `ragmend bench nli`, on a small randomly initialised BERT cross-encoder.

No trained NLI model exists here yet (issue 3): these tests pin the interface (label order,
premise-only truncation, defined output for empty input) and the metrics, not accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.datasets import NLIPair
from bench.nli_eval import classification_metrics, evaluate_nli
from ragmend.errors import ModelUnavailable
from ragmend.models.nli import EMPTY_PAIR, TransformersNLI, label_permutation
from server.cli import app


def test_metrics_on_a_hand_table() -> None:
    m = classification_metrics(
        ["entailment", "entailment", "neutral", "contradiction"],
        ["entailment", "neutral", "neutral", "contradiction"],
    )
    assert m["n"] == 4 and m["accuracy"] == 0.75
    assert m["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3, abs=1e-4)
    assert m["confusion"]["entailment"]["neutral"] == 1


def test_label_permutation() -> None:
    assert label_permutation({0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"}) == [1, 2, 0]
    assert label_permutation({0: "entailment", 1: "neutral", 2: "contradiction"}) == [0, 1, 2]
    with pytest.raises(ModelUnavailable, match="do not name"):
        label_permutation({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})


def test_predict_shapes_order_truncation_and_empty_input(random_nli_dir: Path) -> None:
    nli = TransformersNLI(str(random_nli_dir), max_length=64, batch_size=4)
    long_premise = "The lighthouse stands on the cliff. " * 60
    pairs = [
        ("A cat sat.", "A cat sat on a mat."),
        ("", "anything"),
        (long_premise, "A lighthouse exists."),
        ("text", "   "),
    ]
    batch = nli.predict(pairs)
    assert batch.probs.shape == (4, 3) and np.allclose(batch.probs.sum(axis=1), 1.0, atol=1e-5)
    assert np.array_equal(batch.probs[1], EMPTY_PAIR) and np.array_equal(batch.probs[3], EMPTY_PAIR)
    assert batch.truncated == (False, False, True, False)
    # Columns are reordered to (entailment, neutral, contradiction) from the model's own order.
    import torch

    enc = nli.tokenizer(["A cat sat."], ["A cat sat on a mat."], return_tensors="pt")
    with torch.inference_mode():
        raw = torch.softmax(nli.model(**enc).logits, dim=-1).numpy()[0]
    assert np.allclose(batch.probs[0], raw[[1, 2, 0]], atol=1e-5)


def test_evaluate_and_cli(random_nli_dir: Path, tmp_path: Path) -> None:
    pairs = [
        NLIPair("A dog runs.", "An animal moves.", "entailment"),
        NLIPair("A dog runs.", "A cat sleeps.", "neutral"),
    ]
    result = evaluate_nli(TransformersNLI(str(random_nli_dir)), pairs)
    assert set(result) >= {"n", "accuracy", "macro_f1", "confusion", "pairs_per_s"} and result["n"] == 2

    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p.as_json()) + "\n" for p in pairs))
    runner = CliRunner()
    ok = runner.invoke(app, ["bench", "nli", "--data", str(data), "--model", str(random_nli_dir), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["n"] == 2
    missing = runner.invoke(app, ["bench", "nli", "--data", str(tmp_path / "nope.jsonl"), "--model", "x"])
    assert missing.exit_code == 2
    unconfigured = runner.invoke(app, ["bench", "nli", "--data", str(data)])
    assert unconfigured.exit_code == 3 and "no NLI model configured" in " ".join(unconfigured.output.split())
