"""`ragmend bench stream`: time to first token against the whole request, for streamed chat
completions, live and verify_first side by side, over real HTTP (one request at a time).

Without --url it starts its own `ragmend serve` on a free loopback port with the current
configuration and stops it afterwards. Each question of the bundled sample is asked in both modes,
alternating which goes first, so the two see the same questions and the same machine state.

Figures per mode (docs/benchmarks.md, "Streaming"):
  ttft_p50_s      seconds from sending the request to the first piece of answer text
  total_p50_s     seconds to the end of the stream ([DONE]: diagnosis and any repair included)
  ttft_share_p50  the median of ttft / total per request
  and live against verify_first: the ratio of their ttft medians.
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

MODES = ("live", "verify_first")


def timed_stream(
    base: str, question: str, verify_first: bool, max_tokens: int, timeout_s: float
) -> dict[str, Any]:
    """One streamed request: its time to first text, its total time, and how it ended."""
    body = {
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "max_tokens": max_tokens,
        "stream_options": {"verify_first": verify_first},
    }
    t0 = time.perf_counter()
    first: float | None = None
    repaired = False
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=timeout_s) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "ttft_s": None, "total_s": time.perf_counter() - t0}
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if first is None and any(c["delta"].get("content") for c in event.get("choices", ())):
                first = time.perf_counter() - t0
            if "ragmend" in event:
                repaired = event["ragmend"].get("first_diagnosis") is not None
    return {"status": 200, "ttft_s": first, "total_s": time.perf_counter() - t0, "repaired": repaired}


def run_stream_bench(
    config: Path | None,
    overrides: dict[str, Any],
    *,
    requests: int,
    max_tokens: int = 64,
    url: str | None = None,
    timeout_s: float = 600.0,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    if requests < 1:
        raise InputError("--requests must be at least 1")
    questions = load_questions()
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with served(config, overrides, url, log) as (base, proc):
        timed_stream(base, questions[0], False, max_tokens, timeout_s)  # warm-up, not counted
        for n in range(requests):
            q = questions[n % len(questions)]
            order = MODES if n % 2 == 0 else MODES[::-1]  # alternate which mode goes first
            for mode in order:
                results[mode].append(timed_stream(base, q, mode == "verify_first", max_tokens, timeout_s))
            log(f"{n + 1}/{requests}")
    out: dict[str, Any] = {m: summarise(rs) for m, rs in results.items()}
    live, held = out["live"]["ttft_p50_s"], out["verify_first"]["ttft_p50_s"]
    out["ttft_ratio_live_to_verify_first"] = round(live / held, 3) if live and held else None
    out.update(requests=requests, max_tokens=max_tokens, url=base, server="started" if proc else "given")
    return out


def summarise(rs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rs if r["status"] == 200 and r["ttft_s"] is not None]
    if not ok:
        return {"ok": 0, "errors": len(rs)}
    ttft = np.array([r["ttft_s"] for r in ok])
    total = np.array([r["total_s"] for r in ok])
    return {
        "ok": len(ok),
        "errors": len(rs) - len(ok),
        "repaired": sum(bool(r.get("repaired")) for r in ok),
        "ttft_p50_s": round(float(np.median(ttft)), 3),
        "total_p50_s": round(float(np.median(total)), 3),
        "ttft_share_p50": round(float(np.median(ttft / total)), 3),
    }
