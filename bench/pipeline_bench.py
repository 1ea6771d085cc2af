"""`ragmend bench pipeline`: the speed of each pipeline stage on the HotpotQA corpus.

Everything runs through the same Engine the server uses. Retrieval quality (recall of the gold
supporting paragraphs) is reported beside its speed; questions come from the DEV split.
"""

from __future__ import annotations

import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.datasets import hotpotqa_paragraphs, load_hotpotqa, write_jsonl
from bench.stats import median, percentiles_ms
from engine import Engine
from rag.pipeline import format_context
from rag.prompts import get_prompt
from ragmend.settings import Settings, settings_with

STAGES = ("ingest", "retrieval", "rerank", "generate")
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

    corpus = workdir / "hotpotqa_paragraphs.jsonl"
    if "ingest" in stages or not engine.store.exists():
        paragraphs = hotpotqa_paragraphs(items)[:limit]
        write_jsonl((p.as_json() for p in paragraphs), corpus)
        log(f"ingest: {len(paragraphs)} paragraphs -> {workdir}")
        report = engine.ingest([corpus], rebuild=True)
        result["ingest"] = {
            "paragraphs": len(paragraphs),
            "chunks": report.chunks,
            "seconds": round(report.seconds, 2),
            "chunks_per_s": round(report.chunks_per_s, 1),
            "paragraphs_per_s": round(len(paragraphs) / report.seconds, 1),
        }
        log(f"ingest: {result['ingest']}")
    retriever = engine.index.retriever

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
        texts = [(q, [f"{p.title}: {p.text}" for p in ps]) for q, ps in cands]
        for q, ts in texts[:WARMUP]:
            reranker.score(q, ts)
        times = []
        for q, ts in texts:
            t0 = time.perf_counter()
            reranker.score(q, ts)
            times.append(time.perf_counter() - t0)
        result["rerank"] = {"candidates": 20} | percentiles_ms(times)
        log(f"rerank: {result['rerank']}")

    if "generate" in stages:
        result["generate"] = {}
        template = get_prompt("default")
        for profile in ("tiny", "default"):
            gen_settings = settings_with(settings, models={"generator": {"profile": profile}})
            gen_engine = Engine(gen_settings)
            t0 = time.perf_counter()
            generator = gen_engine.models.generator
            load_s = time.perf_counter() - t0
            generator.chat([{"role": "user", "content": "Say hello."}], max_tokens=4)  # warm-up
            times, rates, ntoks, ptoks = [], [], [], []
            for q in questions[:n_generations]:
                context, _ = format_context(
                    retriever.retrieve(q.question, "dense", 5), settings.rag.max_context_chars
                )
                g = generator.chat(template.messages(context=context, question=q.question))
                times.append(g.seconds)
                ntoks.append(g.completion_tokens)
                ptoks.append(g.prompt_tokens)
                if g.seconds > 0:
                    rates.append(g.completion_tokens / g.seconds)
            result["generate"][profile] = percentiles_ms(times) | {
                "model": generator.model,
                "load_s": round(load_s, 2),
                "prompt_tokens_median": median(ptoks),
                "completion_tokens_median": median(ntoks),
                "tokens_per_s_median": round(median(rates), 1),
            }
            log(f"generate {profile}: {result['generate'][profile]}")
    return result


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
