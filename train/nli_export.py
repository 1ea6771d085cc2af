"""`ragmend nli export`: a trained cross-encoder -> an ONNX graph for the NLI role, int8 by default.

The steps are train/onnx_export.py's; the export is checked against the PyTorch model on sample
pairs (argmax agreement and largest probability difference) before it is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ragmend.errors import InputError
from ragmend.train.onnx_export import export_encoder

_SAMPLES = [
    ("Marie Curie won the Nobel Prize in Physics in 1903.", "Marie Curie won a Nobel Prize."),
    ("The Eiffel Tower is in Paris.", "The Eiffel Tower is in Rome."),
    ("A man plays a guitar on stage.", "The man is a famous musician."),
    ("", "x"),
    ("Short.", "A much longer hypothesis that goes on for a while to vary the sequence length."),
]


def export_nli(model_dir: Path, out_dir: Path, int8: bool = True, optimize: bool = True) -> dict[str, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ragmend.models.nli import OnnxNLI, TransformersNLI
    from ragmend.models.runtime import quiet_transformers

    quiet_transformers()
    if not (model_dir / "config.json").exists():
        raise InputError(f"{model_dir} is not a transformers model directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()

    def check(work: Path) -> dict[str, float]:
        ref = TransformersNLI(str(model_dir)).predict(_SAMPLES).probs
        got = OnnxNLI(work).predict(_SAMPLES).probs
        return {
            "argmax_agreement": float((ref.argmax(1) == got.argmax(1)).mean()),
            "max_abs_prob_diff": round(float(np.abs(ref - got).max()), 4),
        }

    def good(figures: dict[str, float]) -> bool:
        return figures["argmax_agreement"] >= 0.6

    return export_encoder(model, tokenizer, out_dir, {0: "batch"}, check, good, int8, optimize)
