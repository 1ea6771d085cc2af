"""`ragmend bench pipeline`: the speed of each pipeline stage on the HotpotQA corpus.

Everything runs through the same Engine the server uses. Retrieval quality (recall of the gold
supporting paragraphs) is reported beside its speed; questions come from the DEV split.
"""

from __future__ import annotations

import contextlib
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ragmend.bench.stats import median, percentiles_ms
from ragmend.corpora.readers import hotpotqa_paragraphs, load_hotpotqa, write_jsonl
from ragmend.engine import Engine
from ragmend.models.generator import load_generator
from ragmend.rag.pipeline import format_context
from ragmend.rag.prompts import get_prompt
from ragmend.settings import Settings, settings_with

STAGES = ("ingest", "embed", "retrieval", "rerank", "generate")
WARMUP = 3


def run_pipeline_bench(
    settings: Settings,
    data: Path,
    stages: Sequence[str] | None = None,
    limit: int | None = None,
    n_queries: int = 200,
    n_generations: int = 10,
    workdir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    stages = list(stages or STAGES)
    unknown = set(stages) - set(STAGES)
    if unknown:
        from ragmend.errors import InputError

        raise InputError(f"unknown stage(s) {sorted(unknown)}; stages: {list(STAGES)}")
    if not data.exists():
        from ragmend.errors import InputError

        raise InputError(f"benchmark data not found: {data}")
    workdir = Path(workdir or tempfile.mkdtemp(prefix="ragmend-bench-"))
    settings = settings_with(settings, data_dir=workdir)
    items = load_hotpotqa(data)
    questions = [i for i in items if i.split == "dev"][:n_queries]
    engine = Engine(settings)
    result: dict[str, Any] = {
        "machine": {"cpus": _cpus(), "python": platform.python_version()},
        "data": str(data),
        "workdir": str(workdir),
    }

    if "embed" in stages:
        result["embed"] = _bench_embed(engine, hotpotqa_paragraphs(items)[: limit or 2000], log)

    corpus = workdir / "hotpotqa_paragraphs.jsonl"
    if "ingest" in stages or not engine.corpus.store.exists():
        paragraphs = hotpotqa_paragraphs(items)[:limit]
        write_jsonl((p.as_json() for p in paragraphs), corpus)
        log(f"ingest: {len(paragraphs)} paragraphs -> {workdir}")
        report = engine.corpus.ingest([corpus], rebuild=True)
        result["ingest"] = {
            "paragraphs": len(paragraphs),
            "chunks": report.chunks,
            "seconds": round(report.seconds, 2),
            "chunks_per_s": round(report.chunks_per_s, 1),
            "paragraphs_per_s": round(len(paragraphs) / report.seconds, 1),
            "chunk_s": round(report.chunk_s, 2),
            "embed_s": round(report.embed_s, 2),
            "write_s": round(report.write_s, 2),
        }
        log(f"ingest: {result['ingest']}")
    retriever = engine.corpus.index.retriever

    if "retrieval" in stages:
        result["retrieval"] = {}
        for mode in ("dense", "bm25", "hybrid"):
            for k in (5, 20):
                for q in questions[:WARMUP]:
                    retriever.retrieve(q.question, mode, k)
                times, recalls = [], []
                for q in questions:
                    t0 = time.perf_counter()
                    passages = retriever.retrieve(q.question, mode, k)
                    times.append(time.perf_counter() - t0)
                    got = {p.title for p in passages}
                    recalls.append(
                        sum(t in got for t in q.supporting_titles) / max(1, len(q.supporting_titles))
                    )
                key = f"{mode}_k{k}"
                result["retrieval"][key] = percentiles_ms(times) | {
                    "gold_recall_dev": round(sum(recalls) / len(recalls), 3)
                }
                log(f"retrieval {key}: {result['retrieval'][key]}")

    if "rerank" in stages:
        reranker = engine.models.reranker
        cands = [(q.question, retriever.retrieve(q.question, "dense", 20)) for q in questions]
        texts = [(query, [f"{p.title}: {p.text}" for p in ps]) for query, ps in cands]
        for query, ts in texts[:WARMUP]:
            reranker.score(query, ts)
        times = []
        for query, ts in texts:
            t0 = time.perf_counter()
            reranker.score(query, ts)
            times.append(time.perf_counter() - t0)
        result["rerank"] = {"candidates": 20} | percentiles_ms(times)
        log(f"rerank: {result['rerank']}")

    if "generate" in stages:
        result["generate"] = _bench_generate(settings, retriever, questions[:n_generations], log)
    return result


def _bench_embed(engine: Engine, paragraphs: list[Any], log: Callable[[str], None]) -> dict[str, Any]:
    """Chunk embedding throughput in file order and in length order, side by side."""
    from ragmend.rag.documents import SourceDocument

    ingestor = engine.corpus.ingestor()
    nodes = ingestor.chunk(
        [SourceDocument(id=p.id, title=p.title, text=p.text, source="bench") for p in paragraphs]
    )
    ingestor.embed(nodes[:64])  # warm-up
    out: dict[str, Any] = {"paragraphs": len(paragraphs), "chunks": len(nodes)}
    for length_sorted in (False, True):
        t0 = time.perf_counter()
        ingestor.embed(nodes, length_sorted=length_sorted)
        seconds = time.perf_counter() - t0
        out["length_sorted" if length_sorted else "file_order"] = {
            "seconds": round(seconds, 2),
            "chunks_per_s": round(len(nodes) / seconds, 1),
        }
    out["speedup"] = round(out["length_sorted"]["chunks_per_s"] / out["file_order"]["chunks_per_s"], 2)
    log(f"embed: {out}")
    return out


def _bench_generate(
    settings: Settings, retriever: Any, questions: list[Any], log: Callable[[str], None]
) -> dict[str, Any]:
    """Both profiles, at 1 thread and at every core, side by side on the same prompts.

    Each prompt is sent twice: with max_tokens=1 (prefill: the prompt is evaluated, all but the
    fixed instructions every prompt shares, as for a user's request) and then in full, streamed,
    whose tokens after the first time decoding. Latency is the full call's. `ragmend bench
    generator` measures the same rates with llama.cpp's own counters.
    """
    template = get_prompt("default")
    prompts = [
        template.messages(
            context=format_context(
                retriever.retrieve(q.question, "dense", 5), settings.rag.max_context_chars
            )[0],
            question=q.question,
        )
        for q in questions
    ]
    out: dict[str, Any] = {}
    # The last two rows repeat the tiny profile with one core kept busy by another process, as
    # concurrent requests' embedding and reranking would: llama.cpp's spinning workers suffer.
    runs = [(p, t, False) for p in ("tiny", "default") for t in sorted({1, _cpus()})]
    runs += [("tiny", t, True) for t in sorted({1, _cpus()})]
    for profile, threads, contended in runs:
        gen = {"profile": profile, "n_threads": threads}
        gen_settings = settings_with(settings, models={"generator": gen})
        t0 = time.perf_counter()
        generator = load_generator(gen_settings.models.generator, gen_settings)
        load_s = time.perf_counter() - t0
        generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=4)  # warm-up
        latency, prefill, decode, ptoks, ntoks = [], [], [], [], []
        with busy_core(contended):
            for messages in prompts:
                first = generator.chat(messages, max_tokens=1)
                full = generator.chat(messages, on_text=lambda _: None)
                latency.append(full.seconds)
                prefill.append(first.prompt_tokens / first.seconds)
                after = full.seconds - (full.first_token_s or 0.0)
                decode.append((full.completion_tokens - 1) / after if after > 0 else 0.0)
                ptoks.append(first.prompt_tokens)
                ntoks.append(full.completion_tokens)
        key = f"{profile}_threads{threads}" + ("_one_core_busy" if contended else "")
        out[key] = percentiles_ms(latency) | {
            "model": generator.model,
            "n_threads": threads,
            "one_core_busy": contended,
            "load_s": round(load_s, 2),
            "prompt_tokens_median": median(ptoks),
            "completion_tokens_median": median(ntoks),
            "prefill_tokens_per_s_median": round(median(prefill), 1),
            "decode_tokens_per_s_median": round(median(decode), 1),
        }
        log(f"generate {key}: {out[key]}")
    return out


@contextlib.contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """A process spinning on one core for the duration (bounded: it exits by itself after 600 s)."""
    if not on:
        yield
        return
    spin = "import time\nt = time.time()\nwhile time.time() - t < 600: pass"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
