"""Latency of the policy per request: context build, select, update (docs/policy.md).

    python -m ragmend.bench.speed.policy [--rounds 10000] [--sqlite-rounds 2000] [--json]
    ragmend bench policy --json          (run_speed_bench: Sherman-Morrison against a per-call inverse)

run_kind: synthetic rounds through the Policy facade (lock included) with the default layout: a
384-d embedding projected to 16, so d = 35, and the six default actions, all feasible. Rewards
come from a fixed random linear model per arm, clipped to [0, 1], with noise. Each kind is timed
with the in-memory store (the algorithm's own cost) and with the SQLite store (what a live
server pays: one fsync'd transaction per update).

run_speed_bench: LinUCB's select + update at d = 64 (6 arms) and at the reference code's d = 786
(11 arms), side by side with InverseLinUCB, the same LinUCB with np.linalg.inv of every scored
arm's A at each select, on the same contexts and rewards; then the same steps through the Policy
facade with each store, for the in-memory / SQLite split.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.diagnosis.types import FAILURE_TYPES, KAPPAS, NLI_STATES
from ragmend.policy.context import ContextBuilder
from ragmend.policy.facade import Policy
from ragmend.policy.linear import LinUCB
from ragmend.policy.store import MemoryStore, PolicyStore, SQLiteStore
from ragmend.policy.types import POLICY_KINDS
from ragmend.settings import PolicySettings


def _percentiles(ns: list[int]) -> dict[str, float]:
    us = np.asarray(ns, dtype=np.float64) / 1000.0
    return {
        "p50_us": float(np.median(us)),
        "p90_us": float(np.percentile(us, 90)),
        "p99_us": float(np.percentile(us, 99)),
    }


def run_kind(kind: str, rounds: int, store: PolicyStore, seed: int = 0) -> dict[str, Any]:
    policy = Policy(PolicySettings.model_validate({"kind": kind, "seed": seed}), store, ACTION_NAMES)
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


# Two operating points: the default-ish layout, and the paper's reference code
# (a 786-feature context, 11 arms).
SMALL = (64, 6)
REFERENCE = (786, 11)
SIGNAL_FEATURES = ContextBuilder(context_dim=0).dim  # the context's non-embedding part (19)
TARGET_D64_US = 1000.0
TARGET_SPEEDUP_D786 = 50.0


class InverseLinUCB(LinUCB):
    """The same LinUCB (same scores, same decisions) with the textbook per-call inverse: each
    select inverts every scored arm's A (np.linalg.inv, O(d^3)); an update only adds to A and b.
    The baseline of speedup_d786; never used outside benchmarks."""

    def _score(self, arm: str, x: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
        m = self.models[arm]
        a_inv = np.linalg.inv(m.A)
        theta = a_inv @ m.b
        return float(x @ theta), self.alpha * math.sqrt(max(0.0, float(x @ a_inv @ x)))

    def _update(self, arm: str, x: np.ndarray, reward: float) -> None:
        m = self.models[arm]
        m.A += np.outer(x, x)
        m.b += reward * x

    def coefficients(self, arm: str) -> np.ndarray:
        m = self.models[self._known(arm)]
        return np.linalg.solve(m.A, m.b)


class Workload:
    """Contexts built the way the server builds them (ContextBuilder: a 384-d embedding projected
    to dim - 19, random diagnosis signals and budgets) and rewards from a fixed random linear model
    per arm, clipped to [0, 1], with noise: the same for every implementation timed on it."""

    def __init__(self, dim: int, n_arms: int, steps: int, seed: int = 0):
        if dim <= SIGNAL_FEATURES:
            raise ValueError(f"dim must be > {SIGNAL_FEATURES} (the context's signal features)")
        self.dim, self.arms = dim, tuple(f"arm_{i}" for i in range(n_arms))
        builder = ContextBuilder(context_dim=dim - SIGNAL_FEATURES)
        rng = np.random.default_rng(seed)
        self.truth = rng.uniform(-0.3, 0.3, size=(n_arms, dim))
        self.contexts = np.stack(
            [
                builder.build_from_signals(
                    rng.standard_normal(384),
                    failure=FAILURE_TYPES[int(rng.integers(1, len(FAILURE_TYPES)))],
                    e_q=NLI_STATES[int(rng.integers(len(NLI_STATES)))],
                    e_r=NLI_STATES[int(rng.integers(len(NLI_STATES)))],
                    kappa=KAPPAS[int(rng.integers(len(KAPPAS)))],
                    latency_left_s=float(rng.uniform(0, 30)),
                    memory_left_bytes=float(rng.uniform(0, 6 << 20)),
                )
                for _ in range(steps)
            ]
        )
        self.noise = rng.normal(0.0, 0.1, size=steps)

    def reward(self, step: int, arm: str) -> float:
        i = self.arms.index(arm)
        return float(np.clip(self.truth[i] @ self.contexts[step] + self.noise[step], 0.0, 1.0))


def _timed_steps(
    select: Callable[[np.ndarray], str],
    update: Callable[[str, np.ndarray, float], Any],
    work: Workload,
    steps: int,
    warmup: int,
) -> tuple[dict[str, Any], list[str]]:
    """Per step: one select over every arm, then one update of the chosen arm. The first `warmup`
    steps (first touch of the matrices' pages) are run but not timed."""
    sel, upd, total, choices = [], [], [], []
    for t in range(warmup + steps):
        x = work.contexts[t]
        t0 = time.perf_counter_ns()
        arm = select(x)
        t1 = time.perf_counter_ns()
        r = work.reward(t, arm)
        t2 = time.perf_counter_ns()
        update(arm, x, r)
        t3 = time.perf_counter_ns()
        choices.append(arm)
        if t >= warmup:
            sel.append(t1 - t0)
            upd.append(t3 - t2)
            total.append((t1 - t0) + (t3 - t2))
    figures = {
        "steps": steps,
        "select": _percentiles(sel),
        "update": _percentiles(upd),
        "select_plus_update": _percentiles(total),
    }
    return figures, choices


def time_bandit(
    bandit: LinUCB, work: Workload, steps: int, warmup: int = 3
) -> tuple[dict[str, Any], list[str]]:
    """select + update of a bandit on its own (no lock, no store): the algorithm's cost."""
    figures, choices = _timed_steps(
        lambda x: bandit.select(x, bandit.arms).arm, bandit.update, work, steps, warmup
    )
    impl = "inverse_per_select" if isinstance(bandit, InverseLinUCB) else "sherman_morrison"
    return {"implementation": impl, "dim": bandit.dim, "arms": len(bandit.arms), **figures}, choices


def time_policy(work: Workload, steps: int, store: PolicyStore, warmup: int = 3) -> dict[str, Any]:
    """The same steps through the Policy facade (lock, stored sums, persistence) over `store`."""
    cfg = PolicySettings(context_dim=work.dim - SIGNAL_FEATURES, enabled_actions=work.arms)
    policy = Policy(cfg, store, arms=work.arms)
    try:
        figures, _ = _timed_steps(
            lambda x: policy.select(x, policy.arms).arm, policy.update, work, steps, warmup
        )
    finally:
        policy.close()
    return {"dim": policy.dim, "arms": len(policy.arms), **figures}


def _blas_threads() -> int | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # only reported, never needed
        return None
    return sum(p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas") or None


def run_speed_bench(
    steps_d64: int = 3000,
    steps_d786: int = 300,
    steps_inverse: int = 20,
    store_steps: int = 300,
    workdir: Path | None = None,
    alpha: float = 2.0,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """µs per select + update (medians): LinUCB at d = 64 and d = 786, the per-call inverse at
    d = 786 on the same data, and the Policy facade with each store (store_steps at d = 64, a
    tenth of them at d = 786; 0 skips the stores)."""
    if min(steps_d64, steps_d786, steps_inverse) < 1 or store_steps < 0:
        raise ValueError("the step counts must be >= 1 (store_steps >= 0)")
    warmup = 3
    load_before = os.getloadavg()
    (d_small, k_small), (d_ref, k_ref) = SMALL, REFERENCE
    small = Workload(d_small, k_small, warmup + max(steps_d64, store_steps))
    ref = Workload(d_ref, k_ref, warmup + max(steps_d786, steps_inverse, store_steps // 10))
    log(f"d = {d_small}, {k_small} arms: {steps_d64} steps")
    d64, _ = time_bandit(LinUCB(small.arms, d_small, alpha=alpha), small, steps_d64, warmup)
    log(f"d = {d_ref}, {k_ref} arms: {steps_d786} steps")
    d786, choices = time_bandit(LinUCB(ref.arms, d_ref, alpha=alpha), ref, steps_d786, warmup)
    log(f"d = {d_ref}, {k_ref} arms, np.linalg.inv per select: {steps_inverse} steps")
    # One untimed step is warm-up enough here: it already inverts every arm's A.
    inverse, inverse_choices = time_bandit(InverseLinUCB(ref.arms, d_ref, alpha=alpha), ref, steps_inverse, 1)
    # Same seed, same data: both must make the same decisions (a check that the baseline is the
    # same algorithm), over the steps both ran.
    n = min(len(choices), len(inverse_choices))
    same = sum(a == b for a, b in zip(choices[:n], inverse_choices[:n], strict=True)) / n
    us64 = d64["select_plus_update"]["p50_us"]
    us786 = d786["select_plus_update"]["p50_us"]
    us786_inv = inverse["select_plus_update"]["p50_us"]
    stores: list[dict[str, Any]] = []
    if store_steps:
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=workdir, prefix="ragmend-policy-bench-") as tmp:
            for work, n_steps in ((small, store_steps), (ref, max(1, store_steps // 10))):
                for name in ("memory", "sqlite"):
                    log(f"Policy facade, {name} store, d = {work.dim}: {n_steps} steps")
                    store = (
                        MemoryStore() if name == "memory" else SQLiteStore(Path(tmp) / f"{work.dim}.sqlite")
                    )
                    stores.append({"store": name, **time_policy(work, n_steps, store, warmup)})
    return {
        "us_per_step_d64": us64,
        "us_per_step_d786": us786,
        "us_per_step_d786_inverse": us786_inv,
        "speedup_d786": round(us786_inv / us786, 1),
        "targets": {
            "d64_under_us": TARGET_D64_US,
            "d64_met": us64 < TARGET_D64_US,
            "speedup_d786_at_least": TARGET_SPEEDUP_D786,
            "speedup_d786_met": us786_inv / us786 >= TARGET_SPEEDUP_D786,
        },
        "same_choices_d786": {"steps": n, "fraction": same},
        "alpha": alpha,
        "runs": {"d64": d64, "d786": d786, "d786_inverse": inverse},
        "stores": stores,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "blas_threads": _blas_threads(),
        },
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m ragmend.bench.speed.policy", description=__doc__.splitlines()[0]
    )
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
    report: dict[str, Any] = {
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
