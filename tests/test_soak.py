"""`ragmend bench soak`: the fault schedule keeps clear of the windows it measures, bad options are
refused with exit code 2, and a short real soak (two `ragmend serve` processes on the tiny
generator sharing a PostgreSQL the soak starts, every fault kind) loses nothing it acknowledged,
answers nothing 5xx but 503, and reports the schema of reports/soak.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragmend.bench.speed.soak import SoakOptions, fault_kinds, merged
from ragmend.bench.speed.soak_faults import FAULT_KINDS, schedule, windows
from ragmend.cli.main import app
from ragmend.errors import InputError

runner = CliRunner()

# reports/soak.json: what the soak target reads.
SCHEMA = {
    "minutes",
    "requests",
    "status_counts",
    "goodput_first10",
    "goodput_last10",
    "rss_mb_start",
    "rss_mb_20",
    "rss_mb_end",
    "fds_start",
    "fds_end",
    "faults",
    "votes_acked",
    "votes_lost",
    "documents_acked",
    "documents_lost",
}


@pytest.mark.parametrize("minutes", [1.5, 10, 60])
def test_faults_come_between_the_goodput_windows_one_by_one(minutes: float) -> None:
    duration = minutes * 60
    w, _ = windows(duration)
    plan = schedule(duration, FAULT_KINDS)
    assert sorted(kind for _, kind in plan) == sorted(FAULT_KINDS)
    times = [at for at, _ in plan]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(w < at < duration - w for at in times)


def test_an_hour_kills_a_replica_before_the_rss_window_so_the_new_process_is_measured_whole() -> None:
    _, rss_start = windows(3600)
    (at, kind), *_ = schedule(3600, FAULT_KINDS)
    assert kind == "kill9" and at < rss_start


def test_fault_kinds_are_checked_against_the_setup() -> None:
    one = SoakOptions(duration_s=60, replicas=1)
    assert "pg_restart" not in fault_kinds(one) and "kill9" in fault_kinds(one)
    assert fault_kinds(SoakOptions(duration_s=60)) == FAULT_KINDS
    with pytest.raises(InputError, match="unknown"):
        fault_kinds(SoakOptions(duration_s=60, faults=("kill9", "meteor")))
    with pytest.raises(InputError, match="PostgreSQL"):
        fault_kinds(SoakOptions(duration_s=60, replicas=1, faults=("pg_restart",)))


def test_the_profile_overrides_one_section_not_the_whole_models_block() -> None:
    base = {"models": {"generator": {"profile": "default", "max_tokens": 64}, "escalation": None}}
    out = merged(base, {"models": {"generator": {"profile": "tiny"}}})
    assert out["models"] == {"generator": {"profile": "tiny", "max_tokens": 64}, "escalation": None}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "meteor", "--replicas", "1"], "unknown"),
        (["--faults", "pg_restart", "--replicas", "1"], "PostgreSQL"),
        (["--replicas", "9"], "replicas"),
        (["--minutes", "0"], "minutes"),
    ],
)
def test_bad_options_exit_2_with_a_message_before_any_server_starts(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["bench", "soak", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.slow
def test_a_short_soak_with_every_fault_loses_nothing(tmp_path: Path, small_corpus: Path) -> None:
    pytest.importorskip("pgserver", reason="the soak's replicas share a PostgreSQL from the pgserver wheel")
    out = tmp_path / "soak.json"
    # The suite's small corpus: the first replica builds its index in seconds, not the sample's.
    config = tmp_path / "ragmend.yaml"
    config.write_text(f"sources: [{json.dumps(str(small_corpus))}]\n")
    result = runner.invoke(
        app,
        [
            "--config",
            str(config),
            "--profile",
            "tiny",
            "bench",
            "soak",
            "--minutes",
            "1",
            "--rate",  # below the replicas' capacity: a probe after a fault waits for no backlog
            "0.35",
            "--bucket-s",
            "20",
            "--admin-every-s",
            "15",
            "--workdir",
            str(tmp_path / "work"),
            "--out",
            str(out),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) >= SCHEMA
    assert report["replicas"] == 2 and report["store"] == "postgres"
    assert sorted(f["kind"] for f in report["faults"]) == sorted(FAULT_KINDS)
    # Every replica answered again after each fault; nothing acknowledged is missing.
    assert all(f["recovered_s"] is not None for f in report["faults"]), report["faults"]
    assert report["votes_acked"] > 0 and report["votes_lost"] == 0
    assert report["documents_acked"] > 0 and report["documents_lost"] == 0
    logged = "".join(
        log.read_text(errors="replace") for log in sorted((tmp_path / "work").glob("replica-*.log"))
    )
    unhandled = logged[logged.find("unhandled error") :][:4000] if "unhandled error" in logged else ""
    assert report["targets"]["no_5xx_but_503"]["pass"], (report["status_counts"], unhandled)
    assert report["targets"]["policy_consistent"]["pass"], report["policy"]
    assert report["goodput_first10"] and report["goodput_first10"] > 0
    assert len(report["per_minute"]) >= 3 and report["rss_mb_end"] > 0 and report["fds_end"] > 0
