"""A real Prometheus against a live ragmend: it scrapes the server every second with
deploy/prometheus/alerts.yml loaded, the server answers real traffic (answers, a repair, bad
requests), and then every PromQL query of the Grafana dashboards under deploy/ and every alert
rule expression returns data through Prometheus' HTTP API.

The prometheus binary comes from the Debian package: installed here when missing and this test
runs as root (or with passwordless sudo), as .ci/run installs it; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ragmend.bench.speed.startup import free_port
from ragmend.engine import Engine
from ragmend.models.registry import ModelRegistry
from ragmend.server.app import create_app
from ragmend.settings import settings_with
from tests.conftest import REPO, LiveServer, sample_questions

DEPLOY = REPO / "deploy"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"
UNANSWERABLE = "What is the name of the dragon that lives under the royal castle of Wawel?"
# Grafana's variables, filled in as Grafana would for a dashboard showing the last 10 minutes:
# every window covers the whole test, so rates see its traffic.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "15s", "$__range": "10m"}


def prometheus_binary() -> str:
    """The prometheus binary; installed from Debian's package when missing and possible."""
    found = shutil.which("prometheus")
    if found:
        return found
    if not shutil.which("apt-get"):
        pytest.skip("prometheus is not installed and this is not a Debian/Ubuntu machine (apt-get)")
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        pytest.skip("prometheus is not installed, and installing it needs root: apt-get install prometheus")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [*prefix, "apt-get", "install", "-y", "-q", "prometheus"]
    if subprocess.run(install, env=env, capture_output=True, timeout=900).returncode != 0:
        # Most often a stale package list: update it, and try once more.
        subprocess.run([*prefix, "apt-get", "update", "-q"], env=env, capture_output=True, timeout=900)
        subprocess.run(install, env=env, capture_output=True, timeout=900)
    found = shutil.which("prometheus")
    if not found:
        pytest.skip("apt-get install prometheus failed")
    return found


class Prometheus:
    """A prometheus process on a free loopback port, scraping `target` every second."""

    def __init__(self, binary: str, workdir: Path, target: str):
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ALERTS)],
            # job "ragmend", as in deploy/prometheus/prometheus.yml: the alerts select on it.
            "scrape_configs": [
                {
                    "job_name": "ragmend",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        path = workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={path}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                if httpx.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prometheus did not turn ready: " + self.log.read_text()
            time.sleep(0.1)

    def query(self, expr: str) -> list[dict[str, Any]]:
        r = httpx.get(self.url + "/api/v1/query", params={"query": expr}, timeout=30)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- what the deploy/ material asks of Prometheus ----------------------------------------------------


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL with Grafana's variables filled in) for every target of every dashboard."""

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))  # collapsed rows nest their panels

    out = []
    for path in sorted(DEPLOY.rglob("*.json")):
        dash = json.loads(path.read_text())
        if not isinstance(dash, dict) or "panels" not in dash:
            continue
        for p in panels(dash["panels"]):
            for t in p.get("targets", []):
                expr = t["expr"]
                for var, val in GRAFANA_VARIABLES.items():
                    expr = expr.replace(var, val)
                assert "$" not in expr, f"{path.name} {p['title']!r}: an unknown variable in {expr}"
                out.append((f"{path.name}: {p['title']}", expr))
    assert out
    return out


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


# Binary operators that decide whether an alert fires: comparisons and set operators. Their
# operands are what the rule computes; the comparison only filters them.
_DECIDING = re.compile(r"==|!=|>=|<=|>|<|\band\b|\bor\b|\bunless\b")
_MODIFIERS = re.compile(r"^\s*(bool\b|(on|ignoring)\s*\([^)]*\)|group_(left|right)(\s*\([^)]*\))?|\s)+")
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def deciding_operands(expr: str) -> list[str]:
    """The operands of `expr`'s top-level comparisons and set operators (the whole expression when
    it has none), without number literals.

    An alert expression is typically `<measure> > <threshold>`: while nothing is wrong the
    comparison filters every series out and the expression is rightly empty, so it says nothing
    about whether the measure can be computed at all. Each operand (the measure, the threshold
    when it is a query too) must return data; that the rule as a whole evaluates is checked
    separately, with its health on /api/v1/rules.
    """
    parts, depth, start, i = [], 0, 0, 0
    text = expr.strip()
    while i < len(text):
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1) + 1  # label values: no operators inside
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and (m := _DECIDING.match(text, i)) and not (c == "=" and text[i - 1] in "=!<>~"):
            parts.append(text[start:i])
            start = i = m.end()
            continue
        i += 1
    parts.append(text[start:])
    operands = [_MODIFIERS.sub("", p).strip() for p in parts]
    return [p for p in operands if p and not _NUMBER.match(p)]


def test_deciding_operands() -> None:
    assert deciding_operands('up{job="ragmend"} == 0') == ['up{job="ragmend"}']
    assert deciding_operands("sum by (instance) (rate(a[5m])) / sum(rate(b[5m])) > 0.1") == [
        "sum by (instance) (rate(a[5m])) / sum(rate(b[5m]))"
    ]
    assert deciding_operands("(x / y) < 0.5 * (z / w) and sum(increase(n[1h])) >= 10") == [
        "(x / y)",
        "0.5 * (z / w)",
        "sum(increase(n[1h]))",
    ]
    assert deciding_operands('a{b=~"x|y", c!="d"}') == ['a{b=~"x|y", c!="d"}']
    assert deciding_operands("a > bool on(instance) group_left b") == ["a", "b"]


# --- the live test ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def repair_engine(tmp_path_factory: pytest.TempPathFactory, engine: Engine) -> Iterator[Engine]:
    """The session engine's models and index, with its own policy state and budgets wide enough
    for two CPU generations on a loaded machine (so the repair is not masked)."""
    settings = settings_with(
        engine.settings,
        policy={
            "latency_budget_s": 120.0,
            "request_latency_budget_s": 600.0,
            "seed": 1,
            "state_path": str(tmp_path_factory.mktemp("prom-policy") / "policy.sqlite"),
        },
    )
    eng = Engine(settings, models=ModelRegistry.sharing(engine.models, settings))
    eng.load(build_index=False)
    yield eng
    eng.close()


def test_every_dashboard_query_and_alert_expression_returns_data(
    tmp_path: Path, repair_engine: Engine
) -> None:
    binary = prometheus_binary()
    with LiveServer(create_app(repair_engine.settings, engine=repair_engine)) as server:
        prom = Prometheus(binary, tmp_path, f"127.0.0.1:{server.port}")
        try:
            _traffic_then_check(server, prom)
        finally:
            prom.stop()


def _traffic_then_check(server: LiveServer, prom: Prometheus) -> None:
    # A first scrape before any traffic, so the rates see the counters rise.
    _until(lambda: prom.query('up{job="ragmend"} == 1'), "the first scrape")
    url = server.url + "/v1/answer"
    answers = 0
    for q in sample_questions()[:2]:
        r = httpx.post(url, json={"query": q["question"]}, timeout=600)
        assert r.status_code == 200, r.text
        answers += 1
    r = httpx.post(url, json={"query": UNANSWERABLE}, timeout=600)
    assert r.status_code == 200, r.text
    answers += 1
    repair = r.json()["repair"]
    assert repair and "action" in repair and repair["learned"], f"no repair ran: {repair}"
    assert httpx.post(url, json={"query": ""}).status_code == 400  # InputError
    assert httpx.post(url, json={"query": 42}).status_code == 400  # validation
    assert httpx.get(server.url + "/no-such-page").status_code == 404

    # Prometheus has scraped the traffic, and evaluated every rule since.
    _until(
        lambda: [
            s
            for s in prom.query('sum(ragmend_answers_total{pass="final"})')
            if float(s["value"][1]) == answers
        ],
        "a scrape after the traffic",
    )
    _until(lambda: _rules_evaluated(prom), "every alert rule evaluated")
    time.sleep(2)  # two more scrapes and evaluations: rates over the last samples

    empty = [f"{where}: {expr}" for where, expr in dashboard_queries() if not prom.query(expr)]
    assert not empty, "dashboard queries without data:\n" + "\n".join(empty)

    for rule in alert_rules():
        for operand in deciding_operands(rule["expr"]):
            assert prom.query(operand), f"alert {rule['alert']}: {operand} returns no data"
    rules = httpx.get(prom.url + "/api/v1/rules", timeout=30).json()["data"]["groups"]
    for group in rules:
        for rule in group["rules"]:
            assert rule["health"] == "ok" and not rule.get("lastError"), rule
    assert {r["name"] for g in rules for r in g["rules"]} == {r["alert"] for r in alert_rules()}

    # And the figures mean what they say: the answers and their latency are there.
    throughput = prom.query('sum(rate(ragmend_answers_total{pass="final"}[5m]))')
    assert float(throughput[0]["value"][1]) > 0
    p50 = prom.query(
        "histogram_quantile(0.5, sum by (le) (rate(ragmend_request_duration_seconds_bucket"
        '{stage="total"}[5m])))'
    )
    assert 0 < float(p50[0]["value"][1]) < 600
    errors = prom.query('sum(increase(ragmend_errors_total{code_class="4xx"}[5m]))')
    assert float(errors[0]["value"][1]) > 0


def _rules_evaluated(prom: Prometheus) -> bool:
    groups = httpx.get(prom.url + "/api/v1/rules", timeout=30).json()["data"]["groups"]
    return bool(groups) and all(r["health"] != "unknown" for g in groups for r in g["rules"])


def _until(condition: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)
