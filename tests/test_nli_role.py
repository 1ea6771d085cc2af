"""The NLI role, its ONNX export and calibration, and `ragmend bench nli`, on a small randomly
initialised BERT cross-encoder: these pin the interface (label order, premise-only truncation,
defined output for empty input, ONNX parity) and the metrics, not accuracy. The shipped model's
accuracy is tested in test_nli_shipped.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmend.bench.harness.nli_eval import classification_metrics, evaluate_nli
from ragmend.cli.main import app
from ragmend.corpora.readers import NLIPair
from ragmend.errors import ModelUnavailable
from ragmend.models.nli import EMPTY_PAIR, TransformersNLI, label_permutation

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


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
    enc.pop("token_type_ids", None) if "token_type_ids" not in nli._accepted else None
    with torch.inference_mode():
        raw = torch.softmax(nli.model(**enc).logits, dim=-1).numpy()[0]
    assert np.allclose(batch.probs[0], raw[[1, 2, 0]], atol=1e-5)


def test_evaluate_and_cli(random_nli_dir: Path, tmp_path: Path) -> None:
    pairs = [
        NLIPair(premise="A dog runs.", hypothesis="An animal moves.", label="entailment"),
        NLIPair(premise="A dog runs.", hypothesis="A cat sleeps.", label="neutral"),
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
    neither = runner.invoke(app, ["bench", "nli", "--model", str(random_nli_dir)])
    assert neither.exit_code == 2 and "--data FILE or --suite" in neither.output


def test_the_hypothesis_is_never_cut_while_the_premise_has_tokens(random_nli_dir: Path) -> None:
    nli = TransformersNLI(str(random_nli_dir), max_length=32)
    hypothesis = "the quick brown fox jumps over the lazy dog near the river bank"
    enc = nli._encode(["word " * 100], [hypothesis])[0]
    hyp_ids = nli._tokenizer.encode(hypothesis, add_special_tokens=False).ids
    assert enc.truncated and len(enc.ids) == 32
    assert enc.ids[-len(hyp_ids) - 1 : -1] == hyp_ids  # [CLS] premise… [SEP] hypothesis [SEP]
    # A hypothesis longer than the limit on its own: a defined output, flagged, not an exception.
    batch = nli.predict([("premise", "word " * 200), ("Die Katze schläft.", "猫が寝ている。")])
    assert batch.truncated == (True, False) and np.allclose(batch.probs.sum(axis=1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def onnx_nli_dir(random_nli_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragmend.train.nli_export import export_nli

    out = tmp_path_factory.mktemp("onnx") / "nli"
    result = export_nli(random_nli_dir, out, int8=False)
    assert result["argmax_agreement"] == 1.0 and result["max_abs_prob_diff"] < 1e-3
    return out


def test_onnx_export_matches_pytorch_and_loads_by_default_path(
    random_nli_dir: Path, onnx_nli_dir: Path
) -> None:
    from ragmend.models.nli import OnnxNLI, open_nli

    assert isinstance(open_nli(str(onnx_nli_dir)), OnnxNLI)
    assert isinstance(open_nli(str(random_nli_dir)), TransformersNLI)
    pairs = [("A cat sat.", "A cat sat on a mat."), ("", "x"), ("The lighthouse. " * 80, "A lighthouse.")]
    ref = TransformersNLI(str(random_nli_dir), max_length=64).predict(pairs)
    got = OnnxNLI(onnx_nli_dir, max_length=64).predict(pairs)
    assert got.truncated == ref.truncated == (False, False, True)
    assert np.allclose(got.probs, ref.probs, atol=1e-4)


def test_int8_export_is_smaller_and_close(random_nli_dir: Path, tmp_path: Path) -> None:
    from ragmend.train.nli_export import export_nli

    fp32 = export_nli(random_nli_dir, tmp_path / "fp32", int8=False)
    int8 = export_nli(random_nli_dir, tmp_path / "int8", int8=True)
    assert int8["bytes"] < fp32["bytes"] and int8["max_abs_prob_diff"] < 0.05
    missing = runner_invoke(
        ["nli", "export", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "x")]
    )
    assert missing.exit_code == 2 and "no config.json" in missing.output


def runner_invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def test_fit_temperature_recovers_a_known_temperature() -> None:
    from ragmend.train.calibrate import expected_calibration_error, fit_temperature, nll

    rng = np.random.default_rng(0)
    true_logits = rng.normal(0, 2.0, size=(4000, 3))
    labels = np.array([rng.choice(3, p=np.exp(z) / np.exp(z).sum()) for z in true_logits])
    overconfident = true_logits * 3.0  # a model three times too sure of itself
    t = fit_temperature(overconfident, labels)
    assert t == pytest.approx(3.0, rel=0.1)
    assert nll(overconfident, labels, t) < nll(overconfident, labels)
    p = np.exp(overconfident / t) / np.exp(overconfident / t).sum(axis=1, keepdims=True)
    q = np.exp(overconfident) / np.exp(overconfident).sum(axis=1, keepdims=True)
    assert expected_calibration_error(p, labels) < expected_calibration_error(q, labels)


def test_calibrate_cli_writes_a_temperature_the_role_applies(onnx_nli_dir: Path, tmp_path: Path) -> None:
    from ragmend.models.nli import OnnxNLI

    model = tmp_path / "m"
    import shutil

    shutil.copytree(onnx_nli_dir, model)
    rows = [
        {
            "premise": f"Sentence number {i}.",
            "hypothesis": f"Claim {i % 7}.",
            "label": NLI_LABELS_CYCLE[i % 3],
        }
        for i in range(60)
    ]
    data = tmp_path / "held.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = OnnxNLI(model).predict([("a b", "c d")]).probs
    result = runner_invoke(["nli", "calibrate", "--model", str(model), "--data", str(data)])
    assert result.exit_code == 0, result.output
    record = json.loads((model / "calibration.json").read_text())
    assert record["n"] == 60 and record["nll_after"] <= record["nll_before"] + 1e-9
    after = OnnxNLI(model)
    assert after.temperature == pytest.approx(record["temperature"])
    assert after.predict([("a b", "c d")]).probs.argmax() == before.argmax()  # argmax is unchanged
    bad = runner_invoke(["nli", "calibrate", "--model", str(model), "--data", str(tmp_path / "none")])
    assert bad.exit_code == 2


NLI_LABELS_CYCLE = ("entailment", "neutral", "contradiction")


def test_suite_writes_its_section_and_keeps_the_rest(tmp_path: Path) -> None:
    from ragmend.bench.suites.nli import SUITE_END, SUITE_START, write_suite_section

    doc = tmp_path / "nli.md"
    doc.write_text("# Title\n\nprose\n")
    write_suite_section(doc, "table one\n")
    write_suite_section(doc, "table two\n")
    text = doc.read_text()
    assert text.startswith("# Title\n\nprose\n") and "table two" in text and "table one" not in text
    assert text.count(SUITE_START) == 1 and text.count(SUITE_END) == 1


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "nli").is_dir(), reason="shared data not mounted")
def test_suite_cli_on_a_few_pairs(onnx_nli_dir: Path) -> None:
    result = runner_invoke(
        ["bench", "nli", "--suite", "--model", str(onnx_nli_dir), "--limit", "20", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["sets"]) >= {
        "mnli_dev_matched",
        "snli_test",
        "fever_symmetric_test",
        "fever_claim_evidence_test",
        "hotpot_statement_test",
    }
    hotpot = out["sets"]["hotpot_statement_test"]
    assert hotpot["n"] == 20 and len([n for n in hotpot["confusion"].values() if sum(n.values())]) == 3
    sym = out["sets"]["fever_symmetric_test"]
    assert sym["n"] == 20 and "three_way" in sym and set(sym["confusion"]) == {"entailment", "contradiction"}
    assert out["sets"]["mnli_dev_matched"]["target"]["metric"] == "accuracy"
    assert out["speed"]["pairs"] > 0 and out["speed"]["load_s"] > 0
