"""Figures for docs/kg.md: extraction speed, graph build and alignment latency.

    python -m ragmend.bench.speed.kg [--corpus rag/data/sample_corpus.jsonl] [--scale 100000] [--json]

1. spaCy triple extraction over every paragraph of the corpus (JSONL {id, title, text}):
   sentences/s and triples/s, parse and rules timed apart (models loaded before the clock starts),
   wall clock and this process's CPU time (on a shared machine the wall clock counts other jobs);
2. KGStore.sync of the corpus with real embeddings, then a no-change sync;
3. alignment of a few responses against that graph (median of repeats), with and without the
   embedding of the response's phrases;
4. with --scale N: alignment against a synthetic graph of N triples (random unit vectors from a
   hashing embedder: this measures the vectorised scan, not the semantics).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ragmend.kg.align import align
from ragmend.kg.phrases import Embed, embed_with, triple_phrases
from ragmend.kg.store import KGStore
from ragmend.kg.triples import SpacyTripleExtractor, Triple
from ragmend.models.embeddings import load_embeddings
from ragmend.models.spacy_model import load_spacy
from ragmend.rag.documents import BUNDLED_CORPUS
from ragmend.settings import load_settings

DEFAULT_CORPUS = BUNDLED_CORPUS
RESPONSES = (
    "Marie Curie was born in Warsaw.",
    "The Eiffel Tower is in Paris and was designed by Gustave Eiffel.",
    "Andrew Jaspan was the co-founder of The Conversation.",
)


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


class _HashEmbed:
    """Deterministic random unit vectors: the scale test needs speed, not meaning."""

    def __init__(self, dim: int = 384):
        self.dim = dim

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dim)
        return out


class _Memo:
    """An Embed that embeds each distinct list of texts once."""

    def __init__(self, embed: Embed):
        self.embed = embed
        self._seen: dict[tuple[str, ...], np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in self._seen:
            self._seen[key] = self.embed(texts)
        return self._seen[key]


class _Synthetic:
    """Texts "s<i> r<j> o<k>" become one triple each: a graph of any size, built fast."""

    name = "synthetic"

    def extract(self, texts: list[str]) -> list[list[Triple]]:
        out = []
        for text in texts:
            subject, relation, obj = text.split()
            out.append([Triple(subject=subject, relation=relation, object=obj)])
        return out


def run(corpus: Path, scale: int) -> dict[str, object]:
    settings = load_settings()
    nlp = load_spacy(settings.models)
    embed = embed_with(load_embeddings(settings.models, settings.cache_dir))
    extractor = SpacyTripleExtractor(nlp, max_triples_per_text=settings.kg.max_triples_per_chunk)
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [r["text"] for r in rows]
    extractor.extract(texts[:4])  # warm-up: first-call allocations

    c0, t0 = time.process_time(), time.perf_counter()
    docs = list(extractor.parse(texts))
    t1 = time.perf_counter()
    triples = [extractor.from_doc(d) for d in docs]
    c2, t2 = time.process_time(), time.perf_counter()
    sentences = sum(1 for d in docs for _ in d.sents)
    n_triples = sum(len(t) for t in triples)
    out: dict[str, object] = {
        "paragraphs": len(texts),
        "sentences": sentences,
        "triples": n_triples,
        "parse_s": round(t1 - t0, 3),
        "rules_s": round(t2 - t1, 3),
        "sentences_per_s": round(sentences / (t2 - t0), 1),
        "triples_per_s": round(n_triples / (t2 - t0), 1),
        # CPU seconds of this process: on a shared machine wall time also counts other jobs' turns.
        "cpu_s": round(c2 - c0, 3),
        "sentences_per_cpu_s": round(sentences / (c2 - c0), 1),
    }

    with tempfile.TemporaryDirectory() as tmp:
        store = KGStore(Path(tmp) / "kg.sqlite3", extractor, embed, embed_name="bench")
        c0 = time.process_time()
        first = store.sync({r["id"]: (r["text"], [(f"{r['id']}#0", r["text"])]) for r in rows})
        sync_cpu_s = time.process_time() - c0
        again = store.sync({r["id"]: (r["text"], [(f"{r['id']}#0", r["text"])]) for r in rows})
        stats = store.stats()
        response_triples = [t for ts in extractor.extract(list(RESPONSES)) for t in ts]
        phrases = sorted({p for t in response_triples for p in triple_phrases(t)})
        memo = _Memo(embed)
        align(response_triples, store, embed)  # loads the snapshot once
        out |= {
            "sync_s": round(first.seconds, 2),
            "sync_cpu_s": round(sync_cpu_s, 2),
            "sync_unchanged_s": round(again.seconds, 3),
            "graph": {"triples": stats.triples, "subjects": stats.subjects, "phrases": stats.phrases},
            "align_ms": _median_ms(lambda: align(response_triples, store, embed), 20),
            # The same with the response's phrase embeddings memoised: the graph scan alone.
            "align_scan_ms": _median_ms(lambda: align(response_triples, store, memo), 20),
            "embed_response_ms": _median_ms(lambda: embed(phrases), 20),
            "align_response_triples": len(response_triples),
        }

    if scale:
        out["scale"] = _scale(scale)
    return out


def _scale(n: int) -> dict[str, object]:
    hashing = _HashEmbed()
    rng = np.random.default_rng(0)
    # About as many distinct phrases per role as a real corpus: many subjects, few relations.
    subj, rel, obj = rng.integers(0, n // 3, n), rng.integers(0, 500, n), rng.integers(0, n // 2, n)
    texts = [f"s{a} r{b} o{c}" for a, b, c in zip(subj, rel, obj, strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        store = KGStore(Path(tmp) / "kg.sqlite3", _Synthetic(), hashing, batch_texts=10_000)
        t0 = time.perf_counter()
        store.sync({"synthetic": ("1", [(str(i), t) for i, t in enumerate(texts)])})
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        snap = store.snapshot()
        load_s = time.perf_counter() - t0
        queries = [
            Triple(subject=f"s{subj[i]}", relation=f"r{rel[i]}", object=f"o{obj[i] + 1}") for i in range(3)
        ]
        assert align(queries, store, hashing).kappa == "conflict"
        return {
            "triples": snap.size,
            "phrases": int(snap.vectors.shape[0]),
            "build_s": round(build_s, 2),
            "snapshot_load_s": round(load_s, 2),
            "align_ms_3_triples": _median_ms(lambda: align(queries, store, hashing), 10),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m ragmend.bench.speed.kg",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scale", type=int, default=100_000, help="synthetic graph size; 0 skips it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.corpus, args.scale)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
