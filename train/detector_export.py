"""`ragmend detector export`: the trained token-level detector to int8 ONNX (train/onnx_export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragmend.errors import InputError
from ragmend.train.onnx_export import export_encoder

_DETECTOR_SAMPLES = [
    ("Who met Bob?", ["Ann met Bob in Paris in 1999."], "Carl met Bob in Rome."),
    ("", ["A long source. " * 80], "A response with several tokens to read against every window."),
]


def export_detector(
    model_dir: Path, out_dir: Path, int8: bool = True, optimize: bool = True
) -> dict[str, Any]:
    """The token-level hallucination detector (train/detector_train.py) to ONNX, checked against
    PyTorch on sample responses (the largest token probability difference)."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from ragmend.models.detector import OnnxDetector, TorchDetector, window_settings
    from ragmend.models.runtime import quiet_transformers

    quiet_transformers()
    if not (model_dir / "config.json").exists():
        raise InputError(f"{model_dir} is not a transformers model directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    max_length, response_tokens = window_settings(model_dir)
    model.config.update({"window_max_length": max_length, "window_response_tokens": response_tokens})

    def check(work: Path) -> dict[str, float]:
        ref, got = TorchDetector(str(model_dir)), OnnxDetector(work)
        diff = 0.0
        for q, sources, response in _DETECTOR_SAMPLES:
            a, b = ref.detect(q, sources, response), got.detect(q, sources, response)
            diff = max(diff, *(abs(x[2] - y[2]) for x, y in zip(a.token_probs, b.token_probs, strict=True)))
        return {"max_abs_token_prob_diff": round(diff, 4)}

    def good(figures: dict[str, float]) -> bool:
        return figures["max_abs_token_prob_diff"] <= 0.2

    return export_encoder(model, tokenizer, out_dir, {0: "batch", 1: "sequence"}, check, good, int8, optimize)
