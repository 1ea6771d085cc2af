"""The detector role: windows that read every source token beside every response token with the
real MiniLM tokenizer, the least-over-windows rule and its spans, and the training recipe run
for a few steps on real rows into a model that detects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from ragmend.corpora.grounded import Grounded
from ragmend.models import bundled
from ragmend.models.detector import OnnxDetector, TorchDetector, Window, Windows, detection, open_detector
from ragmend.train.detector_export import export_detector
from ragmend.train.detector_train import IGNORE, DetectorTrainConfig, example, train_detector

BASE = bundled.resolve_bundled("bundled:all-minilm-l6-v2", "embeddings").path()


@pytest.fixture(scope="module")
def windows() -> Windows:
    return Windows(
        Tokenizer.from_file(str(Path(BASE) / "tokenizer.json")), max_length=64, max_response_tokens=16
    )


def test_a_long_source_is_read_whole_in_overlapping_windows(windows: Windows) -> None:
    source = " ".join(f"Fact number {i} is about town {i}." for i in range(60))
    response = "Town 3 has a fact. " * 5
    ws = windows.windows("Which town?", [source], response)
    context = windows.context_ids("Which town?", [source])
    parts = windows.response_parts(response)
    assert len(parts) > 1 and len({w.response_part for w in ws}) == len(parts)
    for w in ws:
        assert len(w.ids) <= 64 and w.ids[0] == windows.cls and w.ids.count(windows.sep) == 2
    seen = [t for w in ws if w.response_part == 0 for t in w.ids[1 : w.ids.index(windows.sep)]]
    assert len(seen) > len(context)  # the windows overlap
    covered = {tuple(w.ids[1 : w.ids.index(windows.sep)]) for w in ws if w.response_part == 0}
    joined = [t for chunk in covered for t in chunk]
    assert set(context) <= set(joined)  # every context token is in some window


def test_a_token_is_as_supported_as_its_best_window() -> None:
    chars: list[tuple[int, int] | None] = [None, (0, 4), (5, 9), None]
    ws = [Window([0, 1, 2, 3], [0, 1, 1, 1], chars, 0), Window([0, 1, 2, 3], [0, 1, 1, 1], chars, 0)]
    d = detection(ws, [np.array([0, 0.9, 0.8, 0]), np.array([0, 0.2, 0.7, 0])], threshold=0.5)
    assert d.token_probs == ((0, 4, 0.2), (5, 9, 0.7)) and d.p_unsupported == 0.7
    assert d.spans == ((5, 9, 0.7),) and d.windows == 2


def test_training_labels_follow_the_spans(windows: Windows) -> None:
    g = Grounded(
        id="x",
        set="edit",
        task="qa",
        question="Who?",
        source=("Ann met Bob.",),
        response="Ann met Carl.",
        unsupported=True,
        spans=((8, 12),),
        group="x",
    )
    e = example(windows, g)
    marked = [c for c, y in zip(e.window.response_chars, e.token_labels, strict=True) if y == 1]
    assert marked and all(c is not None and g.response[c[0] : c[1]] in "Carl" for c in marked)
    unknown = example(
        windows,
        Grounded(
            id="y",
            set="begin",
            task="dialogue",
            question="",
            source=("k",),
            response="a b",
            unsupported=True,
            spans=None,
            group="y",
        ),
    )
    assert set(unknown.token_labels) == {IGNORE}


def test_the_recipe_trains_a_model_that_detects(tmp_path: Path) -> None:
    rows = [
        Grounded(
            id=f"{i}",
            set="edit",
            task="qa",
            question="Who met Bob?",
            source=("Ann met Bob in Paris.",),
            response=r,
            unsupported=bad,
            spans=sp,
            group=f"{i}",
        )
        for i, (r, bad, sp) in enumerate(
            [("Ann met Bob.", False, ()), ("Carl met Bob.", True, ((0, 4),))] * 4
        )
    ]
    cfg = DetectorTrainConfig(epochs=1, batch_size=4, max_length=64, max_response_tokens=16)
    result = train_detector(cfg, rows, tmp_path)
    assert result["finished"] and result["steps"] == 2
    trained = TorchDetector(result["model"])
    assert (trained.windows.max_length, trained.windows.max_response_tokens) == (64, 16)  # as it learned
    d = trained.detect("Who met Bob?", ["Ann met Bob in Paris."], "Carl met Bob.")
    assert 0.0 <= d.p_unsupported <= 1.0 and [a for a, _, _ in d.token_probs] == [0, 5, 9, 12]
    # Its int8 ONNX export reads the same windows and agrees with it.
    exported = export_detector(Path(result["model"]), tmp_path / "onnx")
    assert exported["max_abs_token_prob_diff"] <= 0.2 and (tmp_path / "onnx" / "model.onnx").exists()
    again = open_detector(tmp_path / "onnx")
    assert isinstance(again, OnnxDetector) and again.windows.max_length == 64
    e = again.detect("Who met Bob?", ["Ann met Bob in Paris."], "Carl met Bob.")
    assert [a for a, _, _ in e.token_probs] == [0, 5, 9, 12]
