"""`ragmend bench generator`: the local GGUF's prefill and decode rates measured directly with
llama.cpp (its own performance counters), no ragmend, no litellm, no HTTP in between: the
machine's limit that a request's time to first token is set against.

Each measurement is cold: the KV cache is cleared, the prompt (text of the bundled corpus, cut to
the length asked) is evaluated in one llama_decode batch after another, and then `decode` tokens
are generated greedily one at a time. llama.cpp counts the prompt's tokens and milliseconds
(n_p_eval, t_p_eval_ms) apart from the generated ones (n_eval, t_eval_ms).

Thread settings are given as n_threads/n_threads_batch pairs (decode/prefill), e.g. "1/1,1/2,2/2";
with --busy-core each pair is measured again while another process keeps one core busy, as a
concurrent request's embedding or NLI would. With --cpu-variants portable,auto the wheel's
portable libraries and the AVX-512 build (ragmend/models/cpu_variant.py) are measured one after
the other, each in a process of its own.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragmend.bench.speed.pipeline import busy_core
from ragmend.errors import InputError, ModelUnavailable
from ragmend.models import cpu_variant
from ragmend.models.generator import generator_source
from ragmend.models.runtime import prepare_libraries
from ragmend.rag.documents import BUNDLED_CORPUS
from ragmend.settings import CpuVariant, Settings


def parse_threads(spec: str) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        decode, _, prefill = item.partition("/")
        try:
            pair = (int(decode), int(prefill or decode))
        except ValueError:
            raise InputError(f"--threads: '{item}' is not n_threads/n_threads_batch (e.g. 1/2)") from None
        if min(pair) < 1:
            raise InputError(f"--threads: '{item}': thread counts start at 1")
        pairs.append(pair)
    if not pairs:
        raise InputError("--threads: give at least one n_threads/n_threads_batch pair")
    return pairs


def run_generator_bench(
    settings: Settings,
    *,
    threads: list[tuple[int, int]],
    prompt_tokens: list[int],
    decode: int = 32,
    repeats: int = 3,
    busy: bool = False,
    variants: tuple[CpuVariant, ...] = ("auto",),
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Each of `variants` (llama.cpp's libraries: models.generator.cpu_variant values) measured
    in a process of its own, one after the other: the libraries load when llama_cpp is imported,
    so one process can hold only one set."""
    if settings.models.generator.model is not None:
        raise InputError(
            "bench generator measures the in-process GGUF; models.generator.model is a remote engine"
        )
    _, path = generator_source(settings.models.generator, settings.cache_dir)
    out: dict[str, Any] = {"model": path, "variants": {}}
    rows: list[dict[str, Any]] = []
    for variant in dict.fromkeys(variants):
        spec = {
            "path": path,
            "allow_hub": settings.models.allow_hub,
            "cache_dir": str(settings.cache_dir),
            "cpu_variant": variant,
            "threads": threads,
            "prompt_tokens": prompt_tokens,
            "decode": decode,
            "repeats": repeats,
            "busy": busy,
        }
        done = subprocess.run(
            [sys.executable, "-m", "ragmend.bench.speed.generator", json.dumps(spec)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ModelUnavailable(f"bench generator ({variant}) failed: {done.stderr.strip()[-2000:]}")
        measured = json.loads(done.stdout)
        out["variants"][variant] = {k: measured[k] for k in ("libraries", "loaded", "system_info")}
        for row in measured["runs"]:
            row = {"cpu_variant": variant, "loaded": measured["loaded"], **row}
            rows.append(row)
            log(f"generator: {row}")
    out["runs"] = rows
    return out


def _measure_libraries(spec: dict[str, Any]) -> dict[str, Any]:
    """One process's measurements: the libraries `spec["cpu_variant"]` selects, every pair."""
    libraries = cpu_variant.select(spec["cpu_variant"], Path(spec["cache_dir"]))
    prepare_libraries(spec["allow_hub"])
    import llama_cpp
    from llama_cpp import Llama

    prompt_tokens: list[int] = spec["prompt_tokens"]
    decode: int = spec["decode"]
    text = BUNDLED_CORPUS.read_text(encoding="utf-8")
    rows: list[dict[str, Any]] = []
    for contended in (False, True) if spec["busy"] else (False,):
        for n_threads, n_batch_threads in spec["threads"]:
            llm = Llama(
                model_path=spec["path"],
                n_ctx=max(prompt_tokens) + decode + 16,
                n_batch=512,
                n_threads=n_threads,
                n_threads_batch=n_batch_threads,
                verbose=False,
            )
            tokens = llm.tokenize(text.encode("utf-8"))
            if len(tokens) < max(prompt_tokens):
                raise InputError(f"the corpus has {len(tokens)} tokens, fewer than {max(prompt_tokens)}")
            with busy_core(contended):
                for n in prompt_tokens:
                    prefill, generated = [], []
                    for r in range(spec["repeats"]):
                        start = r * 97 % (len(tokens) - n)  # another stretch of text each time
                        counters = _measure(llm, tokens[start : start + n], decode)
                        prefill.append(counters.n_p_eval / (counters.t_p_eval_ms / 1000))
                        generated.append(counters.n_eval / (counters.t_eval_ms / 1000))
                    rows.append(
                        {
                            "n_threads": n_threads,
                            "n_threads_batch": n_batch_threads,
                            "one_core_busy": contended,
                            "prompt_tokens": n,
                            "prefill_tokens_per_s": round(statistics.median(prefill), 1),
                            "decode_tokens_per_s": round(statistics.median(generated), 1),
                        }
                    )
            llm.close()
    return {
        "libraries": libraries,
        "loaded": cpu_variant.loaded_variant(),
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "runs": rows,
    }


def _measure(llm: Any, prompt: list[int], decode: int) -> Any:
    """One cold prompt and `decode` greedy tokens; llama.cpp's counters for them."""
    import llama_cpp

    llm.reset()
    llm._ctx.kv_cache_clear()  # the KV cache too: no prefix reused
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(prompt)
    for _ in range(decode):
        llm.eval([llm.sample(temp=0.0)])
    return llama_cpp.llama_perf_context(llm.ctx)


if __name__ == "__main__":  # one variant's measurements, as run_generator_bench runs them
    print(json.dumps(_measure_libraries(json.loads(sys.argv[1]))))
