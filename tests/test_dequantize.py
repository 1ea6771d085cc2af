"""The shipped judge's float weights back from its int8 export: the base that continued training
starts from (train/dequantize.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragmend.models import bundled
from ragmend.models.nli import OnnxNLI, TransformersNLI
from ragmend.train.dequantize import float_model_from_onnx, float_state_dict


def test_dequantized_weights_are_the_exported_ones_within_a_quantization_step(
    random_nli_dir: Path, tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    from ragmend.train.nli_export import export_nli

    export_nli(random_nli_dir, tmp_path / "int8", int8=True)
    original = AutoModelForSequenceClassification.from_pretrained(random_nli_dir).state_dict()
    restored = float_state_dict(tmp_path / "int8" / "model.onnx")
    linear = [k for k in original if k.endswith(".weight") and original[k].ndim == 2]
    assert linear and set(linear) <= set(restored)
    for name in linear:
        want = original[name].numpy()
        step = (want.max() - want.min()) / 255  # the widest an int8 step can be
        assert restored[name].shape == want.shape, name
        assert np.abs(restored[name] - want).max() <= step, name
    rebuilt = float_model_from_onnx(tmp_path / "int8", tmp_path / "float")
    pairs = [("A cat sat on the mat.", "A cat sat."), ("Paris is in France.", "Rome is in France.")]
    ref = TransformersNLI(str(random_nli_dir), max_length=64).predict(pairs).probs
    got = TransformersNLI(str(rebuilt), max_length=64).predict(pairs).probs
    assert np.allclose(got, ref, atol=0.02)
    assert torch.equal(torch.as_tensor(got.argmax(1)), torch.as_tensor(ref.argmax(1)))


def test_the_shipped_judge_dequantized_reads_its_held_out_pairs_as_its_export_does(tmp_path: Path) -> None:
    asset = bundled.RAGMEND_NLI.path()
    rows = [json.loads(line) for line in (asset / "heldout.jsonl").read_text().splitlines()[:120]]
    pairs = [(r["premise"], r["hypothesis"]) for r in rows]
    exported = OnnxNLI(asset).predict(pairs).probs.argmax(1)
    rebuilt = float_model_from_onnx(asset, tmp_path / "float")
    restored = TransformersNLI(str(rebuilt)).predict(pairs).probs.argmax(1)
    # The export quantizes activations too, so a few pairs near a boundary may differ.
    assert (exported == restored).mean() >= 0.93


def test_an_export_without_its_config_is_refused(tmp_path: Path) -> None:
    from ragmend.errors import InputError

    with pytest.raises(InputError, match="no ONNX export"):
        float_model_from_onnx(tmp_path, tmp_path / "out")
