"""`ragmend bench generator`: the local GGUF's prefill and decode rates measured directly with
llama.cpp (its own performance counters), no ragmend, no litellm, no HTTP in between: the
machine's limit that a request's time to first token is set against.

Each measurement is cold: the KV cache is cleared, the prompt (text of the bundled corpus, cut to
the length asked) is evaluated in one llama_decode batch after another, and then `decode` tokens
are generated greedily one at a time. llama.cpp counts the prompt's tokens and milliseconds
(n_p_eval, t_p_eval_ms) apart from the generated ones (n_eval, t_eval_ms).

Thread settings are given as n_threads/n_threads_batch pairs (decode/prefill), e.g. "1/1,1/2,2/2";
with --busy-core each pair is measured again while another process keeps one core busy, as a
concurrent request's embedding or NLI would.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from ragmend.bench.speed.pipeline import busy_core
from ragmend.errors import InputError
from ragmend.models.generator import generator_source
from ragmend.models.runtime import prepare_libraries
from ragmend.rag.documents import BUNDLED_CORPUS
from ragmend.settings import Settings


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
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    import llama_cpp
    from llama_cpp import Llama

    if settings.models.generator.model is not None:
        raise InputError(
            "bench generator measures the in-process GGUF; models.generator.model is a remote engine"
        )
    prepare_libraries(settings.models.allow_hub)
    _, path = generator_source(settings)
    text = BUNDLED_CORPUS.read_text(encoding="utf-8")
    out: dict[str, Any] = {"model": path, "system_info": llama_cpp.llama_print_system_info().decode()}
    rows: list[dict[str, Any]] = []
    for contended in (False, True) if busy else (False,):
        for n_threads, n_batch_threads in threads:
            llm = Llama(
                model_path=str(path),
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
                    for r in range(repeats):
                        start = r * 97 % (len(tokens) - n)  # another stretch of text each time
                        counters = _measure(llm, tokens[start : start + n], decode)
                        prefill.append(counters.n_p_eval / (counters.t_p_eval_ms / 1000))
                        generated.append(counters.n_eval / (counters.t_eval_ms / 1000))
                    row = {
                        "n_threads": n_threads,
                        "n_threads_batch": n_batch_threads,
                        "one_core_busy": contended,
                        "prompt_tokens": n,
                        "prefill_tokens_per_s": round(statistics.median(prefill), 1),
                        "decode_tokens_per_s": round(statistics.median(generated), 1),
                    }
                    rows.append(row)
                    log(f"generator: {row}")
            llm.close()
    out["runs"] = rows
    return out


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
