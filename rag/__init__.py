"""The retrieval-and-generation pipeline, on llama-index.

documents.py  loaders (directory of .txt/.md/.html/.pdf, or JSONL {id, title, text})
store.py      the persisted index: dense vectors + BM25, written aside and swapped atomically
ingest.py     incremental ingest (unchanged documents are not re-embedded)
retrieval.py  dense, BM25 and hybrid (reciprocal-rank fusion) retrieval; cross-encoder rerank
prompts.yaml  prompt templates (data, not code)
pipeline.py   answer(query, RAGConfig) -> Answer with evidence and per-stage timings
"""
