"""The embeddings role on onnxruntime: a sentence-transformers encoder exported once to ONNX.

Why: a diagnosis embeds every passage it did not retrieve itself (a RAGTruth source, a Data2txt
record's reviews), and MiniLM in torch took 82 ms a response there against 26 ms for the same
graph on onnxruntime, with the same vectors (largest difference 2e-7 on 150 RAGTruth TEST
responses; reports/history/diagnosis.md). The graph is fp32, not int8: stored index
vectors were computed in torch, and a query must land where its passages did.

The graph holds the transformer only; pooling and normalisation are done here, as the model's
sentence-transformers modules say (mean or CLS pooling; anything else stays on torch). It is
exported on first use into the cache directory, keyed by the weights' digest, verified against
sentence-transformers before it is used, and renamed into place, so a crash never leaves a
half-written graph and two processes exporting at once cannot clash.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from ragmend.errors import ModelUnavailable

# Bumped when the export itself changes (inputs, outputs, opset): older graphs are then rebuilt.
EXPORT_VERSION = "1"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# The largest difference the export may show against sentence-transformers on unit vectors.
MAX_EXPORT_DIFF = 1e-4
_VERIFY_TEXTS = (
    "Paris is the capital and largest city of France.",
    "Who founded The Conversation?",
    "a",
    # Longer than any encoder's window: truncation must agree too.
    " ".join(["The review praised the fresh pasta, the slow service and the quiet patio."] * 40),
)
# A batch holds texts of similar length: padding a claim to a passage's length costs as much as
# encoding the passage again.
_LENGTH_SPREAD = 1.25
_LENGTH_SLACK = 8


@dataclass(frozen=True)
class EncoderSpec:
    """What a sentence-transformers directory's module files say about pooling and length."""

    pooling: str  # "mean" | "cls"
    max_length: int


def encoder_spec(model_dir: Path) -> EncoderSpec | None:
    """The spec of a Transformer -> Pooling (mean or CLS) [-> Normalize] model, else None: those
    are the pipelines this runtime reproduces exactly; anything else runs on torch."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
        bert = json.loads((model_dir / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True]
    mode = pooling.get("pooling_mode")
    if mode is None and len(modes) == 1:
        mode = modes[0].removeprefix("pooling_mode_")
    mode = {"mean_tokens": "mean", "cls_token": "cls"}.get(str(mode), mode)
    if mode not in ("mean", "cls") or not any((model_dir / f).exists() for f in WEIGHT_FILES):
        return None
    return EncoderSpec(mode, int(bert.get("max_seq_length") or 512))


def load_encoder(model_dir: Path, cache_dir: Path, spec: EncoderSpec) -> OnnxEncoder:
    """The encoder on its cached graph; a cached graph onnxruntime cannot load (a damaged disk,
    an edited file) is exported again, once."""
    graph = exported_graph(model_dir, cache_dir)
    try:
        return OnnxEncoder(graph / "model.onnx", model_dir, spec)
    except Exception:  # onnxruntime raises its own unexported exception types
        shutil.rmtree(graph, ignore_errors=True)
        return OnnxEncoder(exported_graph(model_dir, cache_dir) / "model.onnx", model_dir, spec)


def exported_graph(model_dir: Path, cache_dir: Path) -> Path:
    """The directory holding model.onnx for `model_dir`, exported and verified on first use."""
    weights = next(model_dir / f for f in WEIGHT_FILES if (model_dir / f).exists())
    digest = hashlib.sha256(EXPORT_VERSION.encode())
    for path in (model_dir / "config.json", weights):
        with path.open("rb") as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
    target = cache_dir / "models" / "embeddings-onnx" / f"{model_dir.name}-{digest.hexdigest()[:16]}"
    if (target / "model.onnx").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        _export(model_dir, work / "model.onnx")
        try:
            work.rename(target)
        except OSError:
            if not (target / "model.onnx").exists():  # not another process's finished export
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return target


def _export(model_dir: Path, out: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from ragmend.models.runtime import export_onnx

    reference = SentenceTransformer(str(model_dir), device="cpu")
    encoder: Any = reference[0].auto_model
    encoder.eval()
    tokenizer = reference.tokenizer
    sample = tokenizer(["a premise", "a"], return_tensors="pt", padding=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]

    class LastHidden(torch.nn.Module):
        # Keyword arguments: the encoder's forward takes more positional parameters than these.
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            return self.model(**dict(zip(names, inputs, strict=True))).last_hidden_state

    hidden = ("last_hidden_state", {0: "batch", 1: "sequence"})
    export_onnx(
        LastHidden(encoder), tuple(sample[n] for n in names), input_names=names, output=hidden, path=str(out)
    )
    spec = encoder_spec(model_dir)
    assert spec is not None  # the caller checked
    want = reference.encode(list(_VERIFY_TEXTS), normalize_embeddings=True)
    got = OnnxEncoder(out, model_dir, spec).encode(list(_VERIFY_TEXTS))
    diff = float(np.abs(want - got).max())
    if diff > MAX_EXPORT_DIFF:
        raise ModelUnavailable(
            f"the ONNX export of {model_dir} disagrees with sentence-transformers (largest difference "
            f"{diff:.2g}); set models.embeddings.runtime: torch"
        )


class OnnxEncoder:
    """Texts -> unit vectors, on one onnxruntime session (thread-safe; the tokenizer is locked,
    since a fast tokenizer borrowed by two threads at once raises)."""

    def __init__(self, graph: Path, model_dir: Path, spec: EncoderSpec) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        from ragmend.models.runtime import onnx_session_options

        self.spec = spec
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self._session = ort.InferenceSession(
            str(graph), onnx_session_options(), providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            ids = self.tokenizer(texts, truncation=True, max_length=self.spec.max_length)["input_ids"]
        out: list[np.ndarray | None] = [None] * len(texts)
        for batch in _length_batches([len(x) for x in ids], batch_size):
            width = max(len(ids[i]) for i in batch)
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)}
            hidden = self._session.run(None, {n: feeds[n] for n in self._inputs})[0]
            if self.spec.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                m = mask[..., None].astype(np.float32)
                pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.where(norms > 0, norms, 1.0)
            for row, i in enumerate(batch):
                out[i] = pooled[row]
        return np.stack([v for v in out if v is not None]).astype(np.float32)


def _length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by similar length (shortest first), at most batch_size a group."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    for i in order:
        current = batches[-1] if batches else None
        if (
            current is None
            or len(current) >= batch_size
            or lengths[i] > lengths[current[0]] * _LENGTH_SPREAD + _LENGTH_SLACK
        ):
            batches.append([i])
        else:
            current.append(i)
    return batches


class OnnxEmbedding(BaseEmbedding):
    """A llama-index embedding model over an OnnxEncoder: what the index, the ingest and the
    diagnosis call, in place of HuggingFaceEmbedding."""

    runtime: str = "onnxruntime"
    _encoder: OnnxEncoder = PrivateAttr()

    def __init__(self, encoder: OnnxEncoder, model_name: str, embed_batch_size: int) -> None:
        super().__init__(model_name=model_name, embed_batch_size=embed_batch_size)
        self._encoder = encoder

    @property
    def tokenizer(self) -> Any:
        return self._encoder.tokenizer

    @classmethod
    def class_name(cls) -> str:
        return "RagmendOnnxEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encoder.encode([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encoder.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encoder.encode(texts, self.embed_batch_size).tolist()
