"""Retrieval over one index snapshot: dense, BM25, hybrid (reciprocal-rank fusion), and rerank."""

from __future__ import annotations

from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.schema import NodeWithScore

from ragmend.models.reranker import Reranker
from ragmend.rag.store import Snapshot
from ragmend.rag.types import Passage
from ragmend.settings import RetrievalMode

RRF_K = 60  # the constant of Cormack et al.'s reciprocal-rank fusion


class SnapshotRetriever:
    """Retrieves from one immutable snapshot; build a new one when the index is swapped."""

    def __init__(self, snapshot: Snapshot, embed_model: Any):
        self.snapshot = snapshot
        self._vector_index: VectorStoreIndex = snapshot.vector_index(embed_model)

    def retrieve(self, query: str, mode: RetrievalMode, k: int) -> list[Passage]:
        if mode == "dense":
            return [_passage(n, "dense") for n in self._dense(query, k)]
        if mode == "bm25":
            return [_passage(n, "bm25") for n in self._bm25(query, k)]
        return self._hybrid(query, k)

    def _dense(self, query: str, k: int) -> list[NodeWithScore]:
        # A shared index holds several generations: the filter keeps this snapshot's.
        retriever = self._vector_index.as_retriever(similarity_top_k=k, filters=self.snapshot.filters)
        with self.snapshot.reading():
            return retriever.retrieve(query)

    def _bm25(self, query: str, k: int) -> list[NodeWithScore]:
        hits = self.snapshot.bm25_retriever(k).retrieve(query)
        return [h for h in hits if (h.score or 0.0) > 0.0]  # bm25s pads with zero-score rows

    def _hybrid(self, query: str, k: int) -> list[Passage]:
        depth = max(2 * k, 20)
        fused: dict[str, float] = {}
        nodes: dict[str, NodeWithScore] = {}
        for hits in (self._dense(query, depth), self._bm25(query, depth)):
            for rank, hit in enumerate(hits):
                fused[hit.node.node_id] = fused.get(hit.node.node_id, 0.0) + 1.0 / (RRF_K + rank + 1)
                nodes.setdefault(hit.node.node_id, hit)
        best = sorted(fused, key=lambda nid: -fused[nid])[:k]
        return [_passage(NodeWithScore(node=nodes[nid].node, score=fused[nid]), "hybrid") for nid in best]


def rerank(reranker: Reranker, query: str, passages: list[Passage], top_n: int) -> list[Passage]:
    if not passages:
        return []
    scores = reranker.score(query, [f"{p.title}: {p.text}" if p.title else p.text for p in passages])
    order = sorted(range(len(passages)), key=lambda i: -scores[i])[:top_n]
    return [passages[i].model_copy(update={"score": scores[i], "retriever": "rerank"}) for i in order]


def _passage(hit: NodeWithScore, retriever: str) -> Passage:
    node = hit.node
    return Passage(
        id=node.node_id,
        doc_id=str(node.metadata.get("doc_id", node.ref_doc_id or "")),
        title=str(node.metadata.get("title", "")),
        text=node.get_content(),
        score=float(hit.score or 0.0),
        retriever=retriever,
        trust=node.metadata.get("trust"),
    )
