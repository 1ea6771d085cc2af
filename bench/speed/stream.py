"""`ragmend bench stream`: what a user of streamed chat completions waits for, over real HTTP, one
request at a time, with cold prompts.

Without --url it starts its own `ragmend serve` on a free loopback port with the current
configuration and stops it afterwards.

Cold prompts: every measured request asks a question no earlier request of the run asked, so the
generator can reuse of the previous prompt only what every prompt shares (the fixed instructions
before the evidence), as for a user. The warm-up (model loading) asks a question kept apart from
the measured ones. The modes run one after the other on different questions of the bundled
sample (a third each: draft, live, verify_first), never the same question twice.

Figures per mode (docs/benchmarks.md, "Streaming"), and per first-pass plan its count and ttft:
  ttft_p50_s              seconds from sending the request to the first piece of text (a draft's
                          reasoning_content included: what the user first sees move)
  first_answer_p50_s      seconds to the first piece of content (the answer itself; in a draft
                          stream, the checked answer)
  total_p50_s             seconds to the end of the stream ([DONE]: diagnosis and repair included)
  total_unrepaired_p50_s  the same over the requests that ran no repair
  prompt_tokens_p50       the first pass's prompt, as the generator counted it
  retrieve_p50_s, generator_first_token_p50_s, generate_p50_s, diagnose_p50_s: per stage
  prefill_tokens_per_s_p50 prompt tokens / the generator's seconds to its first text
  decode_tokens_per_s_p50  completion tokens after the first / the seconds after it
With --prefill-rate (the machine's prefill rate measured directly, `ragmend bench generator`):
  ttft_vs_limit_p50       ttft / (prompt tokens / that rate + retrieval): 1.0 is the hardware.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from ragmend.bench.speed.load import load_questions, served
from ragmend.errors import InputError

MODES = ("draft", "live", "verify_first")


def timed_stream(base: str, question: str, mode: str, max_tokens: int, timeout_s: float) -> dict[str, Any]:
    """One streamed request: its time to first text and to the answer's first content, its total
    time, and the server's account of it (the `ragmend` extension of the last chunk: usage and
    seconds per stage)."""
    body = {
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "max_tokens": max_tokens,
        "stream_options": {"mode": mode},
    }
    t0 = time.perf_counter()
    first: float | None = None
    answer: float | None = None
    report: dict[str, Any] = {}
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=timeout_s) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "ttft_s": None, "total_s": time.perf_counter() - t0}
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            deltas = [c["delta"] for c in event.get("choices", ())]
            now = time.perf_counter() - t0
            if first is None and any(d.get("content") or d.get("reasoning_content") for d in deltas):
                first = now
            if answer is None and any(d.get("content") for d in deltas):
                answer = now
            report = event.get("ragmend") or report
    total = time.perf_counter() - t0
    return {"status": 200, "ttft_s": first, "first_answer_s": answer, "total_s": total} | _stages(report)


def _stages(report: dict[str, Any]) -> dict[str, Any]:
    """The first pass's figures from the server's report of one request."""
    if not report:
        return {}
    answer = (report.get("usage") or {}).get("by_purpose", {}).get("answer") or {}
    # `timings` are the pass the reply carries: a repaired reply's are the second pass's, and the
    # first pass's stages are then not reported (its tokens are, in usage).
    repair = report.get("repair") or {}
    timings = {} if repair.get("kept") == "repaired" else report.get("timings") or {}
    diagnosis = report.get("first_diagnosis") or report.get("diagnosis") or {}
    route = report.get("route") or {}
    return {
        "repaired": report.get("first_diagnosis") is not None,
        "plan": route.get("plan") or "configured",
        "prompt_tokens": answer.get("prompt_tokens"),
        "completion_tokens": answer.get("completion_tokens"),
        "retrieve_s": (timings.get("retrieve_s") or 0.0) + (timings.get("rerank_s") or 0.0)
        if timings
        else None,
        "generate_s": timings.get("generate_s"),
        "generator_first_token_s": timings.get("first_token_s"),
        "diagnose_s": sum((diagnosis.get("timings") or {}).values()) or None,
        "server_s": report.get("seconds"),
    }


def run_stream_bench(
    config: Path | None,
    overrides: dict[str, Any],
    *,
    requests: int,
    max_tokens: int = 64,
    url: str | None = None,
    timeout_s: float = 600.0,
    prefill_rate: float | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    questions = load_questions()
    warmup, measured = questions[-1], questions[:-1]
    if requests < 1 or requests * len(MODES) > len(measured):
        raise InputError(
            f"--requests must be between 1 and {len(measured) // len(MODES)}: each mode asks that "
            f"many questions, none asked twice ({len(measured)} sample questions besides the warm-up)"
        )
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    asked = {mode: measured[m * requests : (m + 1) * requests] for m, mode in enumerate(MODES)}
    with served(config, overrides, url, log) as (base, proc):
        timed_stream(base, warmup, "live", max_tokens, timeout_s)  # model loading; not counted
        for mode in MODES:
            for n, q in enumerate(asked[mode]):
                results[mode].append(timed_stream(base, q, mode, max_tokens, timeout_s))
                log(f"{mode} {n + 1}/{requests}")
    out: dict[str, Any] = {m: summarize(rs, prefill_rate) for m, rs in results.items()}
    out.update(
        each_request={
            m: [{"question": q} | r for q, r in zip(asked[m], rs, strict=True)] for m, rs in results.items()
        },
        requests_per_mode=requests,
        max_tokens=max_tokens,
        prompts="cold: every measured question asked once; the warm-up's question is not measured",
        prefill_rate_tokens_per_s=prefill_rate,
        url=base,
        server="started" if proc else "given",
    )
    return out


def _p50(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(float(np.median(kept)), 3) if kept else None


def summarize(rs: list[dict[str, Any]], prefill_rate: float | None = None) -> dict[str, Any]:
    ok = [r for r in rs if r["status"] == 200 and r["ttft_s"] is not None]
    if not ok:
        return {"ok": 0, "errors": len(rs)}
    prefill: list[float | None] = []
    decode: list[float | None] = []
    limit: list[float | None] = []
    for r in ok:
        tokens, first, total = r.get("prompt_tokens"), r.get("generator_first_token_s"), r.get("generate_s")
        prefill.append(tokens / first if tokens and first else None)
        after = (r.get("completion_tokens") or 0) - 1
        decode.append(after / (total - first) if first and total and after > 0 and total > first else None)
        if prefill_rate and tokens:
            limit.append(r["ttft_s"] / (tokens / prefill_rate + (r.get("retrieve_s") or 0.0)))
    unrepaired = [r["total_s"] for r in ok if not r.get("repaired")]
    plans: dict[str, list[float]] = {}
    for r in ok:
        plans.setdefault(r.get("plan") or "configured", []).append(r["ttft_s"])
    return {
        # The first passes' plans (the router's, or the configured pass) and each one's time to
        # first token: a large plan's prompt is evaluated at about half the speed.
        "plans": {p: {"n": len(v), "ttft_p50_s": _p50(list(v))} for p, v in sorted(plans.items())},
        "ok": len(ok),
        "errors": len(rs) - len(ok),
        "repaired": sum(bool(r.get("repaired")) for r in ok),
        "ttft_p50_s": _p50([r["ttft_s"] for r in ok]),
        "first_answer_p50_s": _p50([r.get("first_answer_s") for r in ok]),
        "total_p50_s": _p50([r["total_s"] for r in ok]),
        "total_unrepaired_p50_s": _p50(list(unrepaired)),
        "ttft_share_p50": _p50([r["ttft_s"] / r["total_s"] for r in ok]),
        "prompt_tokens_p50": _p50([r.get("prompt_tokens") for r in ok]),
        "retrieve_p50_s": _p50([r.get("retrieve_s") for r in ok]),
        "generator_first_token_p50_s": _p50([r.get("generator_first_token_s") for r in ok]),
        "generate_p50_s": _p50([r.get("generate_s") for r in ok]),
        "diagnose_p50_s": _p50([r.get("diagnose_s") for r in ok]),
        "prefill_tokens_per_s_p50": _p50(prefill),
        "decode_tokens_per_s_p50": _p50(decode),
        "ttft_vs_limit_p50": _p50(limit),
    }
