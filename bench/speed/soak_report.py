"""The figures of `ragmend bench soak` from what it recorded: per minute (or per --bucket-s), over
the run, against its targets, and as a table for a terminal.

Definitions (docs/benchmarks.md, "Soak"):
  goodput        answers that reached the client whole (/v1/answer 200, a streamed chat completion
                 to its [DONE]) per second, by the time they ended
  p50/p99        client-side latency of those answers
  window         min(10 minutes, a third of the run): goodput_first10 / goodput_last10 are over
                 the first and the last window
  rss window     the last min(40 minutes, two thirds of the run): RSS growth and descriptors are
                 compared from its start (rss_mb_20: at min(20 minutes, a third)) to the end, for
                 each replica process alive over the whole window (a restarted one is a new process);
                 rss_anon_growth: the same for the anonymous part alone (heap, where a leak shows;
                 the rest is mapped model files, paged in as they are read)
  status_counts  HTTP statuses of every request the traffic sent (probes and faults' own excluded);
                 "transport": no response (a killed replica's requests in flight), "unavailable":
                 no replica was up to send it to, "cut": a stream that ended before [DONE]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragmend.bench.speed.soak_faults import RECOVERY_TARGET_S, RESTARTS, Fault, windows

GOODPUT_KEPT = 0.90  # the last window's goodput at least this share of the first's
RSS_GROWTH_MAX = 0.05
FDS_GROWTH_MAX = (0.10, 8)  # flat: at most 10% or 8 descriptors more, whichever is larger


@dataclass(frozen=True)
class Record:
    """One request of the soak's traffic."""

    kind: str  # answer, chat, diagnose, vote, document, refresh, config_reload
    replica: str | None
    status: str  # an HTTP status, or transport / unavailable / cut / ok / not_seen
    started: float  # seconds since the soak's start
    ended: float
    answered: bool = False  # an answer reached the client whole: goodput


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the soak's start
    processes: dict[str, dict[str, Any]]  # replica name -> pid, start, rss_mb, fds
    state: dict[str, int | None]  # policy_rows, policy_bytes, ledger_rows, ledger_votes, ledger_bytes


def _q(values: Sequence[float], p: float) -> float | None:
    return round(float(np.percentile(np.asarray(values, dtype=np.float64), p)), 2) if values else None


def goodput(records: Sequence[Record], start: float, end: float) -> float | None:
    if end <= start:
        return None
    return round(sum(r.answered and start <= r.ended <= end for r in records) / (end - start), 4)


def _sample_at(samples: Sequence[Sample], t: float) -> Sample | None:
    """The first sample at or after `t` (the last one when none is)."""
    later = [s for s in samples if s.t >= t - 1e-6]
    return later[0] if later else (samples[-1] if samples else None)


def _total(sample: Sample | None, key: str) -> float | None:
    if sample is None:
        return None
    values = [p[key] for p in sample.processes.values() if p.get(key) is not None]
    return round(sum(values), 1) if values else None


def per_bucket(
    records: Sequence[Record], samples: Sequence[Sample], bucket_s: float, end: float
) -> list[dict[str, Any]]:
    rows = []
    n = max(
        1, math.ceil(end / bucket_s - 0.05)
    )  # a last sliver (the traffic's drain) joins the bucket before
    for k in range(n):
        a, b = k * bucket_s, end if k == n - 1 else (k + 1) * bucket_s
        done = [r for r in records if a <= r.ended and (r.ended < b or k == n - 1)]
        answers = [r.ended - r.started for r in done if r.answered]
        by_kind: dict[str, Counter[str]] = {}
        for r in done:
            by_kind.setdefault(r.kind, Counter())[r.status] += 1
        sample = _sample_at(samples, b)
        rows.append(
            {
                "minute": round(a / 60, 2),
                "seconds": round(b - a, 1),
                "requests": len(done),
                "answers": len(answers),
                "goodput_rps": round(len(answers) / (b - a), 4) if b > a else None,
                "p50_s": _q(answers, 50),
                "p99_s": _q(answers, 99),
                "status_counts": dict(sorted(Counter(r.status for r in done).items())),
                "errors_by_kind": {
                    kind: dict(sorted(c.items()))
                    for kind, c in sorted(by_kind.items())
                    if set(c) - {"200", "ok"}
                },
                "rss_mb": {n: p["rss_mb"] for n, p in sample.processes.items()} if sample else {},
                "anon_mb": {n: p.get("anon_mb") for n, p in sample.processes.items()} if sample else {},
                "fds": {n: p["fds"] for n, p in sample.processes.items()} if sample else {},
                **(sample.state if sample else {}),
            }
        )
    return rows


def _window_growth(samples: Sequence[Sample], start: float, key: str) -> dict[str, dict[str, Any]]:
    """For each replica process alive from `start` to the last sample: its `key` then and at the end."""
    first, last = _sample_at(samples, start), (samples[-1] if samples else None)
    out: dict[str, dict[str, Any]] = {}
    if first is None or last is None:
        return out
    for name, p in first.processes.items():
        q = last.processes.get(name, {})
        if (
            p.get("pid") is not None
            and p.get("pid") == q.get("pid")
            and p.get(key)
            and q.get(key) is not None
        ):
            out[name] = {"from": p[key], "to": q[key], "growth": round(q[key] / p[key] - 1, 4)}
    return out


def _target(ok: bool | None, value: Any, limit: str) -> dict[str, Any]:
    return {"pass": ok, "value": value, "limit": limit}


def summarize(
    *,
    records: Sequence[Record],
    samples: Sequence[Sample],
    faults: Sequence[Fault],
    duration_s: float,
    end: float,
    bucket_s: float,
    votes_acked: int,
    votes_lost: int,
    documents_acked: int,
    documents_lost: int,
    policy: dict[str, Any],
) -> dict[str, Any]:
    """The soak's report: `duration_s` asked for, `end` the traffic's actual end (later when a
    fault's recovery ran past it)."""
    w, s = windows(duration_s)
    statuses = Counter(r.status for r in records)
    first, last = goodput(records, 0.0, w), goodput(records, end - w, end)
    rss = _window_growth(samples, s, "rss_mb")
    fds = _window_growth(samples, s, "fds")
    other_5xx = sum(n for st, n in statuses.items() if st.isdigit() and int(st) >= 500 and st != "503")
    restarts = [f for f in faults if f.kind in RESTARTS]
    slowest = max((f.recovered_s for f in restarts if f.recovered_s is not None), default=None)
    start_sample, window_sample = _sample_at(samples, 0.0), _sample_at(samples, s)
    end_sample = samples[-1] if samples else None
    fd_limit = {n: max(g["from"] * FDS_GROWTH_MAX[0], FDS_GROWTH_MAX[1]) for n, g in fds.items()}
    targets = {
        "no_5xx_but_503": _target(other_5xx == 0, other_5xx, "0 responses 5xx other than 503"),
        "goodput_kept": _target(
            None if not first or last is None else last >= GOODPUT_KEPT * first,
            {"first": first, "last": last},
            f"last window >= {GOODPUT_KEPT:.0%} of the first",
        ),
        "rss_flat": _target(
            all(g["growth"] <= RSS_GROWTH_MAX for g in rss.values()) if rss else None,
            rss,
            f"<= {RSS_GROWTH_MAX:.0%} growth over the rss window, per replica process",
        ),
        "fds_flat": _target(
            all(g["to"] - g["from"] <= fd_limit[n] for n, g in fds.items()) if fds else None,
            fds,
            "at most 10% or 8 more descriptors over the rss window, per replica process",
        ),
        "nothing_lost": _target(
            votes_lost == 0 and documents_lost == 0,
            {"votes_lost": votes_lost, "documents_lost": documents_lost},
            "0 acknowledged votes or documents missing",
        ),
        "restarts_recovered": _target(
            all(f.recovered_s is not None and f.recovered_s <= RECOVERY_TARGET_S for f in restarts)
            if restarts
            else None,
            slowest,
            f"every replica answers within {RECOVERY_TARGET_S:g} s of a restart",
        ),
        "policy_consistent": _target(
            policy.get("consistent"), policy.get("pulls"), "replicas and store agree"
        ),
    }
    checked = [t["pass"] for t in targets.values() if t["pass"] is not None]
    return {
        "minutes": round(duration_s / 60, 3),
        "ran_s": round(end, 1),
        "requests": len(records),
        "status_counts": dict(sorted(statuses.items())),
        "window_minutes": round(w / 60, 3),
        "goodput_first10": first,
        "goodput_last10": last,
        "rss_window_start_minute": round(s / 60, 3),
        "rss_mb_start": _total(start_sample, "rss_mb"),
        "rss_mb_20": _total(window_sample, "rss_mb"),
        "rss_mb_end": _total(end_sample, "rss_mb"),
        "rss_anon_growth": _window_growth(samples, s, "anon_mb"),
        "fds_start": _total(start_sample, "fds"),
        "fds_end": _total(end_sample, "fds"),
        "faults": [f.report() for f in faults],
        "votes_acked": votes_acked,
        "votes_lost": votes_lost,
        "documents_acked": documents_acked,
        "documents_lost": documents_lost,
        "policy": policy,
        "targets": targets,
        "passed": all(checked) if checked else None,
        "per_minute": per_bucket(records, samples, bucket_s, end),
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        return "/".join(_fmt(x) for x in v.values()) or "-"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def table(result: dict[str, Any]) -> str:
    """The report for a terminal: one line per minute, the faults, the totals and the targets."""
    cols = (
        "minute",
        "requests",
        "answers",
        "goodput_rps",
        "p50_s",
        "p99_s",
        "errors",
        "rss_mb",
        "fds",
        "policy_rows",
        "ledger_rows",
    )
    lines = ["  ".join(f"{c:>11}" for c in cols)]
    for row in result["per_minute"]:
        errors = sum(n for st, n in row["status_counts"].items() if st not in ("200", "ok"))
        values = [row.get(c) for c in cols]
        values[cols.index("errors")] = errors
        lines.append("  ".join(f"{_fmt(v):>11}" for v in values))
    lines.append("")
    for f in result["faults"]:
        extra = ", ".join(f"{k} {v}" for k, v in f.items() if k not in ("kind", "at_s", "recovered_s"))
        recovered = _fmt(f["recovered_s"])
        lines.append(f"fault {f['kind']:<12} at {f['at_s']:>7} s  recovered after {recovered} s  ({extra})")
    lines.append("")
    lines.append(
        f"{result['requests']} requests in {result['ran_s']} s; status {result['status_counts']}; "
        f"goodput first {_fmt(result['goodput_first10'])} / last {_fmt(result['goodput_last10'])} answers/s "
        f"(windows of {result['window_minutes']} min)"
    )
    lines.append(
        f"RSS {_fmt(result['rss_mb_start'])} -> {_fmt(result['rss_mb_20'])} (minute "
        f"{result['rss_window_start_minute']}) -> {_fmt(result['rss_mb_end'])} MiB; fds "
        f"{_fmt(result['fds_start'])} -> {_fmt(result['fds_end'])}; "
        f"votes {result['votes_acked']} acknowledged, "
        f"{result['votes_lost']} lost; documents {result['documents_acked']} acknowledged, "
        f"{result['documents_lost']} lost"
    )
    for name, t in result["targets"].items():
        verdict = {True: "PASS", False: "FAIL", None: "n/a "}[t["pass"]]
        value = t["value"] if isinstance(t["value"], dict) else _fmt(t["value"])
        lines.append(f"{verdict}  {name}: {value} ({t['limit']})")
    return "\n".join(lines)
