"""Embeddings role: a sentence-transformers model behind llama-index's embedding interface, on
onnxruntime where it can be (ragmend/models/embeddings_onnx.py), else HuggingFaceEmbedding (torch)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ragmend.errors import InputError, ModelUnavailable
from ragmend.models import bundled
from ragmend.models.runtime import prepare_libraries, quiet_transformers
from ragmend.settings import ModelsSettings

log = logging.getLogger("ragmend.models")


def embeddings_source(models: ModelsSettings) -> tuple[str, str]:
    return bundled.resolve_spec(models.embeddings.model, "embeddings", models.allow_hub)


def load_embeddings(models: ModelsSettings, cache_dir: Path) -> Any:
    """A llama-index BaseEmbedding; `cache_dir` holds the exported ONNX graph."""
    prepare_libraries(models.allow_hub)
    quiet_transformers()
    from ragmend.models.embeddings_onnx import OnnxEmbedding, encoder_spec, load_encoder

    cfg = models.embeddings
    _, path = embeddings_source(models)
    local = Path(path)
    spec = encoder_spec(local) if local.is_dir() else None
    if cfg.runtime == "onnx" and (spec is None or cfg.device != "cpu"):
        raise InputError(
            f"models.embeddings.runtime: onnx needs a local sentence-transformers encoder with mean or "
            f"CLS pooling on device cpu; {path} on {cfg.device} is not one (use runtime: auto or torch)"
        )
    if cfg.runtime != "torch" and spec is not None and cfg.device == "cpu":
        try:
            encoder = load_encoder(local, cache_dir, spec)
            return OnnxEmbedding(encoder, model_name=path, embed_batch_size=cfg.batch_size)
        except Exception as e:  # the exporter raises its own types (a missing onnx, an odd graph)
            if cfg.runtime == "onnx":
                hint = "pip install onnx, or models.embeddings.runtime: torch"
                raise ModelUnavailable(f"embeddings on onnxruntime: {e} ({hint})") from e
            # auto: the same vectors from torch, slower; said once, at load.
            log.warning("embeddings: onnxruntime export failed (%s); running on torch", e)
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(
        model_name=path,
        device=cfg.device,
        embed_batch_size=cfg.batch_size,
        normalize=True,
        show_progress_bar=False,
    )


def embeddings_runtime(embed: Any) -> str:
    """Which runtime computes the vectors (said beside `ragmend models`' smoke test)."""
    return str(getattr(embed, "runtime", "torch"))


def token_counter(embed: Any) -> Any:
    """The embedding model's own tokenizer, as the callable llama-index's splitters expect.

    Chunk sizes are counted in the tokens the embedding model actually sees, so a 128-token
    chunk is never silently truncated by the encoder.
    """
    # OnnxEmbedding holds the tokenizer; HuggingFaceEmbedding holds the SentenceTransformer that does.
    tokenizer = getattr(embed, "tokenizer", None) or embed._model.tokenizer

    def tokenize(text: str) -> list[int]:
        # verbose=False: counting a long document's tokens is not an attempt to encode it whole.
        return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    return tokenize
