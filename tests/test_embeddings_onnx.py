"""The embeddings role on onnxruntime: the bundled encoder exported once, the same vectors as
sentence-transformers in torch, a damaged cache rebuilt, unsupported models refused clearly."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from ragmend.errors import InputError, ModelUnavailable
from ragmend.models import bundled
from ragmend.models.embeddings import embeddings_runtime, load_embeddings, token_counter
from ragmend.models.embeddings_onnx import _length_batches, encoder_spec
from ragmend.settings import load_settings

TEXTS = [
    "Who founded The Conversation?",
    "Andrew Jaspan founded The Conversation, an online news outlet, in 2011 in Melbourne. " * 12,
    "x",
    "Elko Regional Airport is a public airport in Elko, Nevada.",
]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object, Path]:
    cache = tmp_path_factory.mktemp("cache")
    onnx = load_embeddings(load_settings(models={"embeddings": {"runtime": "onnx"}}).models, cache)
    torch = load_embeddings(load_settings(models={"embeddings": {"runtime": "torch"}}).models, cache)
    return onnx, torch, cache


def test_the_default_runs_the_bundled_encoder_on_onnxruntime(both: tuple[object, object, Path]) -> None:
    onnx, torch, _ = both
    assert load_settings().models.embeddings.runtime == "auto"
    assert embeddings_runtime(onnx) == "onnxruntime" and embeddings_runtime(torch) == "torch"
    spec = encoder_spec(bundled.EMBEDDINGS.path())
    assert spec is not None and spec.pooling == "mean" and spec.max_length == 256


def test_same_vectors_as_torch_in_a_batch_and_one_by_one(both: tuple[object, object, Path]) -> None:
    onnx, torch, _ = both
    want = np.asarray(torch.get_text_embedding_batch(TEXTS))  # type: ignore[attr-defined]
    batched = np.asarray(onnx.get_text_embedding_batch(TEXTS))  # type: ignore[attr-defined]
    single = np.asarray([onnx.get_text_embedding(t) for t in TEXTS])  # type: ignore[attr-defined]
    assert np.abs(want - batched).max() < 1e-5 and np.abs(want - single).max() < 1e-5
    q = np.asarray(onnx.get_query_embedding(TEXTS[0]))  # type: ignore[attr-defined]
    assert np.abs(q - want[0]).max() < 1e-5 and abs(float(np.linalg.norm(q)) - 1) < 1e-5
    # The chunker counts the same tokens either way.
    assert token_counter(onnx)(TEXTS[1]) == token_counter(torch)(TEXTS[1])


def test_exported_once_and_a_damaged_graph_is_exported_again(both: tuple[object, object, Path]) -> None:
    _, _, cache = both
    graphs = list((cache / "models" / "embeddings-onnx").iterdir())
    assert len(graphs) == 1 and not graphs[0].name.startswith(".")  # no temporary directory left
    graph = graphs[0] / "model.onnx"
    stamp = graph.stat().st_mtime_ns
    models = load_settings().models
    again = load_embeddings(models, cache)
    assert graph.stat().st_mtime_ns == stamp  # the next start loads it, it does not export again
    graph.write_bytes(b"half a graph")
    rebuilt = load_embeddings(models, cache)
    assert graph.stat().st_size > 1_000_000
    a, b = (np.asarray(m.get_text_embedding(TEXTS[3])) for m in (again, rebuilt))
    assert np.abs(a - b).max() < 1e-6


def test_onnx_refuses_what_it_cannot_reproduce(tmp_path: Path) -> None:
    # A directory that is not a Transformer -> Pooling sentence-transformers model.
    dense = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Dense"}]
    (tmp_path / "modules.json").write_text(json.dumps(dense))
    assert encoder_spec(tmp_path) is None
    s = load_settings(data_dir=tmp_path, models={"embeddings": {"model": str(tmp_path), "runtime": "onnx"}})
    with pytest.raises(InputError, match="runtime: auto or torch"):
        load_embeddings(s.models, tmp_path / "cache")


def test_batches_hold_texts_of_similar_length() -> None:
    lengths = [300, 10, 12, 256, 11, 40]
    batches = _length_batches(lengths, batch_size=2)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [sorted(lengths[i] for i in b) for b in batches] == [[10, 11], [12], [40], [256, 300]]


def test_auto_falls_back_to_torch_where_the_export_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Without the onnx package torch's exporter cannot write a graph; `auto` says so and serves the
    # same vectors from torch, `onnx` refuses with the install hint. (sys.modules entries set to
    # None make those imports fail, as on a machine without the package.)
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.setitem(sys.modules, "onnxscript", None)
    with caplog.at_level(logging.WARNING, logger="ragmend.models"):
        embed = load_embeddings(load_settings().models, tmp_path / "cache")
    assert embeddings_runtime(embed) == "torch" and "running on torch" in caplog.text
    forced = load_settings(models={"embeddings": {"runtime": "onnx"}}).models
    with pytest.raises(ModelUnavailable, match="pip install onnx"):
        load_embeddings(forced, tmp_path / "cache2")
