"""Embeddings role: a llama-index HuggingFaceEmbedding over a sentence-transformers model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragmend.models import bundled
from ragmend.models.runtime import prepare_libraries, quiet_transformers
from ragmend.settings import ModelsSettings

if TYPE_CHECKING:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    quiet_transformers()


def embeddings_source(models: ModelsSettings) -> tuple[str, str]:
    return bundled.resolve_spec(models.embeddings.model, "embeddings", models.allow_hub)


def load_embeddings(models: ModelsSettings) -> HuggingFaceEmbedding:
    prepare_libraries(models.allow_hub)
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    quiet_transformers()

    _, path = embeddings_source(models)
    return HuggingFaceEmbedding(
        model_name=path,
        device=models.embeddings.device,
        embed_batch_size=models.embeddings.batch_size,
        normalize=True,
        show_progress_bar=False,
    )


def token_counter(embed: HuggingFaceEmbedding) -> Any:
    """The embedding model's own tokenizer, as the callable llama-index's splitters expect.

    Chunk sizes are counted in the tokens the embedding model actually sees, so a 128-token
    chunk is never silently truncated by the encoder.
    """
    tokenizer = embed._model.tokenizer  # the SentenceTransformer the wrapper holds

    def tokenize(text: str) -> list[int]:
        # verbose=False: counting a long document's tokens is not an attempt to encode it whole.
        return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    return tokenize
