"""A llama-index vector store over one contiguous float32 matrix.

llama-index's SimpleVectorStore keeps embeddings as Python lists and rebuilds a NumPy array on
every query; at tens of thousands of chunks that dominates retrieval latency and its JSON
persistence is slow to load. This store keeps normalised vectors in one matrix (saved as .npy)
and answers with a single matrix-vector product and an argpartition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from pydantic import PrivateAttr


def normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.maximum(norms, 1e-12)


class NumpyVectorStore(BasePydanticVectorStore):
    stores_text: bool = True
    is_embedding_query: bool = True

    _nodes: list[TextNode] = PrivateAttr(default_factory=list)
    _matrix: np.ndarray = PrivateAttr(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def __init__(self, nodes: list[TextNode] | None = None, matrix: np.ndarray | None = None, **kw: Any):
        super().__init__(**kw)
        nodes = nodes or []
        if matrix is None:
            matrix = np.zeros((0, 0), dtype=np.float32)
        if len(nodes) != matrix.shape[0]:
            raise ValueError(f"{len(nodes)} nodes but {matrix.shape[0]} embeddings")
        self._nodes = list(nodes)
        self._matrix = normalise(matrix) if len(nodes) else matrix

    @classmethod
    def class_name(cls) -> str:
        return "NumpyVectorStore"

    @property
    def client(self) -> None:
        return None

    @property
    def nodes(self) -> list[TextNode]:
        return self._nodes

    @property
    def matrix(self) -> np.ndarray:
        return self._matrix

    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        if not nodes:
            return []
        vecs = normalise(np.stack([np.asarray(n.get_embedding(), dtype=np.float32) for n in nodes]))
        self._matrix = vecs if not len(self._nodes) else np.vstack([self._matrix, vecs])
        for n in nodes:
            # The matrix holds the vector; keeping a second copy on every node would double memory.
            stored = TextNode.model_validate(n.model_dump() | {"embedding": None})
            self._nodes.append(stored)
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        keep = [i for i, n in enumerate(self._nodes) if n.ref_doc_id != ref_doc_id]
        self._nodes = [self._nodes[i] for i in keep]
        self._matrix = self._matrix[keep] if keep else np.zeros((0, self._matrix.shape[1]), np.float32)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.filters is not None:
            raise NotImplementedError("NumpyVectorStore does not support metadata filters")
        if query.query_embedding is None or not len(self._nodes):
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        q = normalise(np.asarray(query.query_embedding, dtype=np.float32))
        scores = self._matrix @ q
        k = min(query.similarity_top_k, len(self._nodes))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        nodes = [self._nodes[i] for i in top]
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[float(scores[i]) for i in top], ids=[n.node_id for n in nodes]
        )
