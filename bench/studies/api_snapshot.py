"""What a client of both HTTP APIs receives, on a fixed set of requests, written as JSON lines with
the ids, times, costs and learned scores masked: the "before" and "after" of a change that must
not change what a user sees (compare two snapshots with `cmp` or `diff`).

    PYTHONPATH=<tree> python -m ragmend.cli study api-snapshot --out <tree>.jsonl

A real server (`ragmend serve` on a free port, a process of its own) over the bundled sample
corpus with the tiny generator in both roles, the router and the repair policy frozen and budgets
no pass overruns (so no decision depends on a measured time), answered over real HTTP:
/v1/answer, /v1/chat/completions plain, streamed and verified first,
/v1/models, /healthz, /readyz and the error paths (an invalid body, an unknown model, a body over
the limit, bad JSON); last, GET /metrics: every series by name and labels, with the value of each
counter and each histogram's count (what a time or a learned score decides is masked).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

MASKED = re.compile(
    r"(^id$|_id$|^created$|_s$|_ms$|seconds|latency|memory|timing|reward|factor|cost|time_left|score"
    r"|exploit|explor|pulls|generation|version|path$)"
)
# The server's configuration beside `--profile tiny`: the router and the repair policy frozen, and
# budgets no pass can overrun, so no decision depends on a measured time.
CONFIG = {
    "kg": {"enabled": False},
    "policy": {
        "learn": False,
        "latency_budget_s": 3600.0,
        "request_latency_budget_s": 7200.0,
        "rss_memory_budget_bytes": 2**40,
    },
    "router": {"learn": False},
    "server": {"request_timeout_s": 7200.0},
}
QUESTIONS = (
    "Who designed the Eiffel Tower?",
    "When was the Eiffel Tower completed?",
    "What is the name of the dragon that lives under the royal castle of Wawel?",
)


def masked(value: Any, key: str = "") -> Any:
    """`value` with what changes from run to run replaced by "<masked>"."""
    if key and MASKED.search(key):
        return "<masked>"
    if isinstance(value, dict):
        return {k: masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"(chatcmpl|answer)-[0-9a-f]{32}", r"\1-<id>", value)
    return value


def requests(model: str) -> list[tuple[str, str, str, Any]]:
    """(name, method, path, JSON body or raw bytes) of every request, in order."""
    chat = {"model": model, "messages": [{"role": "user", "content": QUESTIONS[0]}]}
    follow = {
        "model": model,
        "messages": [
            {"role": "user", "content": QUESTIONS[0]},
            {"role": "assistant", "content": "Gustave Eiffel's company designed it."},
            {"role": "user", "content": "When was it completed?"},
        ],
    }
    return [
        ("healthz", "GET", "/healthz", None),
        ("readyz", "GET", "/readyz", None),
        ("models", "GET", "/v1/models", None),
        ("model", "GET", f"/v1/models/{model}", None),
        *[(f"answer {i}", "POST", "/v1/answer", {"query": q}) for i, q in enumerate(QUESTIONS)],
        ("answer bm25", "POST", "/v1/answer", {"query": QUESTIONS[1], "config": {"mode": "bm25"}}),
        ("chat", "POST", "/v1/chat/completions", chat),
        ("chat follow-up", "POST", "/v1/chat/completions", follow),
        ("chat stream", "POST", "/v1/chat/completions", {**chat, "stream": True}),
        (
            "chat stream verified",
            "POST",
            "/v1/chat/completions",
            {**chat, "stream": True, "stream_options": {"verify_first": True, "include_usage": True}},
        ),
        ("error: no query", "POST", "/v1/answer", {}),
        ("error: unknown model", "POST", "/v1/chat/completions", {**chat, "model": "no-such-model"}),
        ("error: bad json", "POST", "/v1/answer", b"{not json"),
        ("error: too large", "POST", "/v1/answer", b'{"query": "' + b"x" * 2_000_000 + b'"}'),
        ("metrics", "GET", "/metrics", None),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the snapshot (JSONL)")
    args = ap.parse_args(argv)

    import yaml

    import ragmend
    from ragmend.bench.speed.startup import free_port, start_server, stop, wait_ready

    print(f"ragmend: {ragmend.__file__}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ragmend-api-snapshot-") as tmp:
        config = Path(tmp) / "ragmend.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        port = free_port()
        proc = start_server(
            config, {"data_dir": Path(tmp) / "data", "models": {"generator": {"profile": "tiny"}}}, port
        )
        try:
            wait_ready(port, proc, timeout_s=900)
            url = f"http://127.0.0.1:{port}"
            lines = [_exchange(url, *r) for r in requests("ragmend")]
        finally:
            stop(proc)
    args.out.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    print(f"wrote {len(lines)} exchanges to {args.out}", file=sys.stderr)
    return 0


def _exchange(url: str, name: str, method: str, path: str, body: Any) -> dict[str, Any]:
    content = body if isinstance(body, bytes) else None
    payload = None if isinstance(body, bytes) or body is None else body
    headers = {"content-type": "application/json"} if content is not None else None
    r = httpx.request(method, url + path, json=payload, content=content, headers=headers, timeout=600)
    kind = r.headers.get("content-type", "").split(";")[0]
    if kind == "text/event-stream":
        events = [line.removeprefix("data: ") for line in r.text.splitlines() if line.startswith("data: ")]
        received: Any = [e if e == "[DONE]" else masked(json.loads(e)) for e in events]
    elif kind == "application/json":
        received = masked(r.json())
    elif path == "/metrics":
        received = exposed_series(r.text)
    else:
        received = r.text
    return {"name": name, "status": r.status_code, "content_type": kind, "body": received}


# Series whose values no time or learned score decides: counts of requests, answers and repairs.
COUNTED = re.compile(r"(_total|_count)$")


def exposed_series(text: str) -> list[str]:
    """Every sample of a Prometheus exposition as `name{labels} value`, sorted; the value masked
    unless the sample is a counter or a histogram's count (and not a time)."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k != "version")
            counted = COUNTED.search(s.name) and "seconds" not in s.name
            lines.append(f"{s.name}{{{labels}}} {s.value if counted else '<masked>'}")
    return sorted(lines)
