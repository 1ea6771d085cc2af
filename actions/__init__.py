"""Repair actions: each a patch P -> P' of the frozen RAGConfig (rag.types).

Belongs here: query rewrite (paraphrase, simplify), cross-encoder rerank over a deeper list,
retrieval depth, dense <-> BM25 switch, and index refresh; each declares the failure types it
serves and its expected cost so infeasible actions are masked before the policy chooses; and the
cost meter (monotonic latency, NVML device memory or a labelled RSS fallback).
"""
