"""`ragmend bench check`: POST /v1/diagnose on RAGTruth TEST responses, against the diagnoser
called in-process the way `ragmend bench detect` calls it, and its speed on this machine.

Three passes over the same responses, one after the other (never side by side on the cores):
1. in-process: `Engine.diagnoser.diagnose(query, passages, response)`, as bench detect does;
2. a real server (`ragmend serve`, a process of its own, over real HTTP): one request an answer;
3. the same server: `/v1/diagnose/batch` of `batch` answers a request.
The server and the in-process engine read one configuration (the caller's, with the knowledge
graph off, as bench detect runs): the report says how many verdicts (failure type),
P(unsupported) and unsupported spans agree, the seconds per answer (p50, p99) and answers per
second of each pass, and, per RAGTruth task, what the endpoint's verdicts and spans score against
the labels (response-level precision / recall / F1; character-level span F1).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from ragmend.bench.speed.startup import free_port, start_server, stop, wait_ready
from ragmend.bench.stats import median
from ragmend.bench.suites.detect import decision_figures, span_figures
from ragmend.corpora.cases import RAGTRUTH_TEST, Case, ragtruth_cases
from ragmend.engine import Engine
from ragmend.settings import load_settings

Spans = tuple[tuple[int, int], ...]
Verdict = tuple[str, float | None, Spans]  # failure type, P(unsupported), unsupported spans


def request_body(case: Case) -> dict[str, Any]:
    return {
        "question": case.query,
        "answer": case.response,
        "passages": [{"id": p.id, "title": p.title, "text": p.text} for p in case.passages],
    }


def run_check_bench(
    config: Path | None,
    data_root: Path,
    limit: int | None,
    batch: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    cases = ragtruth_cases(data_root / RAGTRUTH_TEST, "test", limit)
    log(f"{len(cases)} RAGTruth TEST responses")
    with tempfile.TemporaryDirectory(prefix="ragmend-bench-check-") as tmp:
        settings_file = _settings_file(config, Path(tmp))
        inproc, inproc_s = _in_process(settings_file, cases, log)
        port = free_port()
        proc = start_server(settings_file, {}, port)
        try:
            wait_ready(port, proc)
            url = f"http://127.0.0.1:{port}"
            single, single_s = _over_http(url, cases, 1, log)
            batched, batched_s = _over_http(url, cases, batch, log)
        finally:
            stop(proc)
    return {
        "responses": len(cases),
        "data": f"{RAGTRUTH_TEST} ({'all' if limit is None else f'a sample of {limit}'})",
        "agreement": {"single": _agreement(inproc, single), "batched": _agreement(inproc, batched)},
        "scores": _scores(cases, single),
        "in_process": _speed(inproc_s),
        "single": _speed(single_s),
        f"batched_{batch}": _speed(batched_s, batch),
    }


def _settings_file(config: Path | None, tmp: Path) -> Path:
    """The caller's configuration with the graph off and a data directory of its own."""
    data: dict[str, Any] = (yaml.safe_load(config.read_text()) or {}) if config else {}
    data.setdefault("kg", {})["enabled"] = False
    data["data_dir"] = str(tmp / "data")
    path = tmp / "ragmend.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


Timed = tuple[list[Verdict], list[float]]  # verdicts in order, seconds per answer


def _in_process(settings_file: Path, cases: Sequence[Case], log: Callable[[str], None]) -> Timed:
    engine = Engine(load_settings(settings_file))
    try:
        out: list[Verdict] = []
        seconds: list[float] = []
        for n, case in enumerate(cases, start=1):
            t0 = time.perf_counter()
            d = engine.diagnoser.diagnose(case.query, case.passages, case.response)
            seconds.append(time.perf_counter() - t0)
            spans = tuple((s.start, s.end) for s in d.unsupported_spans)
            out.append((d.failure, d.verdict.p_unsupported if d.verdict else None, spans))
            if n % 50 == 0:
                log(f"in-process: {n}/{len(cases)}")
        return out, seconds
    finally:
        engine.close()


def _over_http(url: str, cases: Sequence[Case], batch: int, log: Callable[[str], None]) -> Timed:
    """Verdicts in order, and seconds per answer (a batch's wall time shared by its answers)."""
    out: list[Verdict] = []
    seconds: list[float] = []
    with httpx.Client(base_url=url, timeout=3600) as client:
        for start in range(0, len(cases), batch):
            group = cases[start : start + batch]
            t0 = time.perf_counter()
            if batch == 1:
                r = client.post("/v1/diagnose", json=request_body(group[0]))
                r.raise_for_status()
                replies = [r.json()]
            else:
                r = client.post("/v1/diagnose/batch", json={"items": [request_body(c) for c in group]})
                r.raise_for_status()
                replies = r.json()["data"]
            wall = time.perf_counter() - t0
            seconds += [wall / len(group)] * len(group)
            for reply in replies:
                d = reply["diagnosis"]
                spans = tuple((s["start"], s["end"]) for s in d["unsupported_spans"])
                out.append((d["failure"], d["verdict"]["p_unsupported"] if d["verdict"] else None, spans))
            if (start // batch + 1) % max(1, 50 // batch) == 0:
                log(f"{'single' if batch == 1 else f'batches of {batch}'}: {len(out)}/{len(cases)}")
    return out, seconds


def _agreement(a: Sequence[Verdict], b: Sequence[Verdict]) -> dict[str, Any]:
    same_failure = sum(x[0] == y[0] for x, y in zip(a, b, strict=True))
    same_p = sum(_same(x[1], y[1]) for x, y in zip(a, b, strict=True))
    same_spans = sum(x[2] == y[2] for x, y in zip(a, b, strict=True))
    flagged = (sum(x[0] != "NoFailure" for x in a), sum(y[0] != "NoFailure" for y in b))
    return {
        "same_failure": same_failure,
        "same_p_unsupported": same_p,
        "same_spans": same_spans,
        "of": len(a),
        "flagged": flagged,
    }


def _scores(cases: Sequence[Case], verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """Per RAGTruth task and overall: the verdicts against the labels (response level) and the
    spans against the labelled spans (character level)."""
    out: dict[str, Any] = {}
    for task in [*sorted({c.group for c in cases}), "all"]:
        rows = [(c, v) for c, v in zip(cases, verdicts, strict=True) if task in ("all", c.group)]
        flagged = np.array([v[0] != "NoFailure" for _, v in rows])
        labels = np.array([c.unsupported for c, _ in rows])
        out[task] = {
            "n": len(rows),
            "response": decision_figures(flagged, labels),
            "spans": span_figures([v[2] for _, v in rows], [c.spans for c, _ in rows]),
        }
    return out


def _same(p: float | None, q: float | None) -> bool:
    return p == q if p is None or q is None else abs(p - q) <= 1e-6


def _speed(seconds: Sequence[float], per_request: int = 1) -> dict[str, float]:
    total = sum(seconds)
    return {
        "p50_s": round(median(seconds), 3),
        "p99_s": round(float(np.percentile(np.asarray(seconds), 99)), 3) if seconds else 0.0,
        "answers_per_s": round(len(seconds) / total, 3) if total else 0.0,
        "answers_per_request": per_request,
    }
