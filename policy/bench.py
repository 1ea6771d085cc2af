"""Latency of the policy per request: context build, select, update (docs/policy.md).

    python -m policy.bench [--rounds 10000] [--sqlite-rounds 2000] [--json]

Synthetic rounds through the Policy facade (lock included) with the default layout: a 384-d
embedding projected to 16, so d = 35, and the six default actions, all feasible. Rewards come
from a fixed random linear model per arm, clipped to [0, 1], with noise. Each kind is timed
with the in-memory store (the algorithm's own cost) and with the SQLite store (what a live
server pays: one fsync'd transaction per update).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from diagnosis.types import FAILURE_TYPES, KAPPAS, NLI_STATES
from policy.core import Policy
from policy.store import MemoryStore, PolicyStore, SQLiteStore
from policy.types import POLICY_KINDS
from ragmend.settings import PolicySettings


def _percentiles(ns: list[int]) -> dict[str, float]:
    us = np.asarray(ns, dtype=np.float64) / 1000.0
    return {
        "p50_us": float(np.median(us)),
        "p90_us": float(np.percentile(us, 90)),
        "p99_us": float(np.percentile(us, 99)),
    }


def run_kind(kind: str, rounds: int, store: PolicyStore, seed: int = 0) -> dict[str, Any]:
    policy = Policy(PolicySettings(kind=kind, seed=seed), store)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    truth = rng.uniform(-0.3, 0.3, size=(len(policy.arms), policy.dim))
    build, select, update, total = [], [], [], []
    for _ in range(rounds):
        emb = rng.standard_normal(384)
        t0 = time.perf_counter_ns()
        x = policy.builder.build_from_signals(
            emb,
            failure=FAILURE_TYPES[int(rng.integers(1, 5))],
            e_q=NLI_STATES[int(rng.integers(3))],
            e_r=NLI_STATES[int(rng.integers(3))],
            kappa=KAPPAS[int(rng.integers(4))],
            latency_left_s=float(rng.uniform(0, 30)),
            memory_left_bytes=float(rng.uniform(0, 6 << 20)),
        )
        t1 = time.perf_counter_ns()
        d = policy.select(x, policy.arms)
        t2 = time.perf_counter_ns()
        i = policy.arms.index(d.arm)
        reward = float(np.clip(truth[i] @ x + rng.normal(0, 0.1), 0.0, 1.0))
        t3 = time.perf_counter_ns()
        policy.update(d.arm, x, reward)
        t4 = time.perf_counter_ns()
        build.append(t1 - t0)
        select.append(t2 - t1)
        update.append(t4 - t3)
        total.append((t2 - t1) + (t4 - t3))
    policy.close()
    return {
        "kind": kind,
        "rounds": rounds,
        "dim": policy.dim,
        "arms": len(policy.arms),
        "context": _percentiles(build),
        "select": _percentiles(select),
        "update": _percentiles(update),
        "select_plus_update": _percentiles(total),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policy.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10_000, help="rounds per kind with the memory store")
    ap.add_argument("--sqlite-rounds", type=int, default=2_000, help="rounds per kind with the SQLite store")
    ap.add_argument("--dir", type=Path, default=None, help="where the SQLite files go (default: a temp dir)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for kind in POLICY_KINDS:
            results.append({"store": "memory", **run_kind(kind, args.rounds, MemoryStore())})
            if args.sqlite_rounds:
                store = SQLiteStore(Path(tmp) / f"{kind}.sqlite")
                results.append({"store": "sqlite", **run_kind(kind, args.sqlite_rounds, store)})
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
        "load_average": os.getloadavg(),
        "results": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"load average {report['load_average'][0]:.2f}, {os.cpu_count()} CPUs, numpy {np.__version__}")
    cols = ("context", "select", "update", "select_plus_update")
    print(
        f"{'kind':8} {'store':7} {'rounds':>6} {'d':>3} " + " ".join(f"{c:>18}" for c in cols) + "  (p50 µs)"
    )
    for r in results:
        head = f"{r['kind']:8} {r['store']:7} {r['rounds']:6d} {r['dim']:3d} "
        print(head + " ".join(f"{r[c]['p50_us']:18.1f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
