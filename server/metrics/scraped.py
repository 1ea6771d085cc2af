"""The gauges read at scrape time, from the policy, the router, the engine and the machine: state,
not events, so a value changed at run time (admin endpoint, hot reload) shows on the next scrape.
Each family is built from its declaration in metrics/declared.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from ragmend.server.metrics import declared as d

if TYPE_CHECKING:
    from ragmend.server.metrics.prometheus import Metrics


def families() -> Iterator[Metric]:
    """A new, empty family of every scraped declaration."""
    for declared in d.DECLARED:
        if declared.kind == "scraped_gauge":
            yield GaugeMetricFamily(declared.name, declared.doc, labels=list(declared.label_names))
        elif declared.kind == "scraped_info":
            yield InfoMetricFamily(declared.name, declared.doc)


class StateCollector(Collector):
    def __init__(self, metrics: Metrics):
        self.m = metrics

    def describe(self) -> Iterator[Metric]:
        # Names only (no values): describe() must not touch the engine at registration.
        yield from families()

    def collect(self) -> Iterator[Metric]:
        # Gauge and info families: each has its own add_metric signature, so they are kept untyped.
        fams: dict[str, Any] = {f.name: f for f in families()}

        def add(declared: d.Declared, value: Any, *labels: str) -> None:
            fams[declared.name].add_metric(list(declared.bound(labels)), value)

        m = self.m
        if m.ready is not None:
            add(d.READY, 1.0 if m.ready() else 0.0)
        if m.index_generation is not None:
            gen = m.index_generation()
            if gen:
                add(d.INDEX, {"generation": gen})
        self._policy(add)
        router = m.router()
        if router is not None:
            add(d.ROUTER_ENABLED, 1.0 if router.enabled else 0.0)
            for plan, st in router.policy.stats().items():
                add(d.ROUTER_PLAN_PULLS, st.pulls, plan)
                if st.mean_reward is not None:
                    add(d.ROUTER_PLAN_MEAN_REWARD, st.mean_reward, plan)
        state = "available" if m.nvml_status() == "available" else "unavailable"
        for status in ("available", "unavailable"):
            add(d.NVML_STATUS, 1.0 if status == state else 0.0, status)
        yield from fams.values()

    def _policy(self, add: Any) -> None:
        """The repair policy's budgets, settings and per-arm figures (from the settings in force
        when the policy is not loaded)."""
        p = self.m.policy()
        cfg = p.config if p is not None else self.m.current_settings().policy
        if p is not None:
            budgets = p.budgets_for()
            latency_budget, memory_budget = budgets.latency_s, budgets.memory_bytes
            kind, learn, alpha = p.kind, p.learn, p.alpha
        else:
            latency_budget = cfg.latency_budget_s * cfg.budget_scale
            memory_budget = cfg.memory_budget_bytes * cfg.budget_scale
            kind, learn = cfg.kind, cfg.learn
            alpha = cfg.alpha if cfg.kind == "linucb" else None
        add(d.ACTION_LATENCY_BUDGET, latency_budget)
        add(d.ACTION_MEMORY_BUDGET, memory_budget)
        add(d.REQUEST_LATENCY_BUDGET, cfg.request_latency_budget_s)
        add(d.BUDGET_SCALE, cfg.budget_scale)
        if alpha is not None:  # alpha is LinUCB's; other kinds have no such series
            add(d.ALPHA, alpha)
        mode = {"kind": kind, "mode": "learn" if learn else "frozen", "reward_variant": cfg.reward_variant}
        add(d.POLICY, {**mode, "repair": "on" if cfg.repair else "off"})
        add(d.LEARNING, 1.0 if learn else 0.0)
        if p is not None:
            for arm, s in p.stats().items():
                add(d.ARM_PULLS, s.pulls, arm)
                add(d.ARM_SUCCESSES, s.successes, arm)
                if s.mean_reward is not None:
                    add(d.ARM_MEAN_REWARD, s.mean_reward, arm)
