"""`ragmend bench load`: loopback only (exit code 2 otherwise), the figures' definitions, and a
small real run against a live server (the session's, in this process)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from ragmend.bench.speed.load import Result, loopback_url, pid_listening_on, run_load_bench, summarize
from ragmend.cli.main import app
from ragmend.errors import InputError
from tests.conftest import LiveServer

runner = CliRunner()

KEYS = {
    "clients",
    "requests",
    "errors",
    "throughput_rps",
    "p50_s",
    "p99_s",
    "overhead_share",
    "rss_start_bytes",
    "rss_end_bytes",
}


@pytest.mark.parametrize(
    "url", ["http://example.com:8000", "http://10.0.0.7:8000", "http://0.0.0.0:8000", "ftp://127.0.0.1/"]
)
def test_a_non_loopback_url_is_refused_with_exit_code_2(url: str) -> None:
    result = runner.invoke(app, ["bench", "load", "--url", url, "--requests", "1"])
    assert result.exit_code == 2, result.output
    assert "only a loopback server" in result.output


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8000/", "http://127.0.0.9:1", "http://[::1]:80", "http://localhost"]
)
def test_loopback_urls_are_accepted(url: str) -> None:
    assert loopback_url(url) == url.rstrip("/")


def test_help_has_an_example() -> None:
    result = runner.invoke(app, ["bench", "load", "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_counts_are_bounded() -> None:
    with pytest.raises(InputError, match="--clients"):
        run_load_bench(None, {}, clients=0, requests=1, url="http://127.0.0.1:1")
    with pytest.raises(InputError, match="--requests"):
        run_load_bench(None, {}, clients=1, requests=10_001, url="http://127.0.0.1:1")
    assert runner.invoke(app, ["bench", "load", "--clients", "257"]).exit_code == 2


def test_overhead_is_the_non_generator_share_of_server_time() -> None:
    results = [
        Result(status=200, latency_s=5.0, seconds=4.0, generator_seconds=3.0),
        Result(status=200, latency_s=7.0, seconds=6.0, generator_seconds=5.4),
        Result(status=503, latency_s=0.01, error="Overloaded"),
        Result(status=None, latency_s=30.0, error="ReadTimeout"),
    ]
    s = summarize(results, wall_s=10.0)
    assert s["overhead_share"] == pytest.approx((1.0 + 0.6) / 10.0, abs=1e-4)
    assert s["overhead_s_per_wall_s"] == pytest.approx(1.6 / 10.0, abs=1e-4)
    assert s["queue_share"] == pytest.approx((12.0 - 10.0) / 12.0, abs=1e-4)
    assert s["ok"] == 2 and s["errors"] == 2 and s["throughput_rps"] == pytest.approx(0.2)
    assert s["status_counts"] == {"200": 2, "503": 1, "transport": 1}
    assert s["p50_s"] == pytest.approx(6.0)


def test_a_small_run_against_a_live_server(live_server: LiveServer) -> None:
    assert pid_listening_on(live_server.port) == os.getpid()  # LiveServer serves in this process
    result = run_load_bench(
        None, {}, clients=2, requests=3, url=live_server.url, timeout_s=600, log=lambda m: None
    )
    assert set(result) >= KEYS
    assert result["errors"] == 0 and result["ok"] == 3 and result["status_counts"] == {"200": 3}
    assert result["throughput_rps"] > 0 and 0 < result["p50_s"] <= result["p99_s"]
    assert 0 <= result["overhead_share"] < 1 and result["generator_seconds"] > 0
    assert result["rss_start_bytes"] > 0 and result["rss_end_bytes"] > 0 and result["server"] == "given"


def test_each_phase_is_read_against_one_client_alone_and_against_1x() -> None:
    from ragmend.bench.speed.overload import relative_goodput

    phases = [{"factor": 1.0, "goodput_rps": 0.30}, {"factor": 2.0, "goodput_rps": 0.27}]
    relative_goodput(phases, one_client_rps=0.36)
    assert [p["goodput_vs_1x"] for p in phases] == [1.0, 0.9]
    assert [p["goodput_vs_one_client"] for p in phases] == [0.833, 0.75]
    without_1x = [{"factor": 2.0, "goodput_rps": 0.27}]
    relative_goodput(without_1x, one_client_rps=0.0)
    assert without_1x[0]["goodput_vs_1x"] is None and without_1x[0]["goodput_vs_one_client"] is None
