"""`ragmend bench startup`: seconds from launching `ragmend serve` to /readyz answering 200.

Measured on an installed machine whose index is already built (the steady state of `make serve`);
the first start, which also builds the index from the sources, is reported separately.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ragmend.bench.stats import median

TIMEOUT_S = 600.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(config: Path | None, overrides: dict[str, Any], port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ragmend.cli"]
    if config:
        cmd += ["--config", str(config)]
    if "data_dir" in overrides:
        cmd += ["--data-dir", str(overrides["data_dir"])]
    profile = overrides.get("models", {}).get("generator", {}).get("profile")
    if profile:
        cmd += ["--profile", profile]
    cmd += ["serve", "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout_s: float = TIMEOUT_S) -> float:
    t0 = time.perf_counter()
    url = f"http://127.0.0.1:{port}/readyz"
    while time.perf_counter() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"server not ready after {timeout_s} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_startup_bench(
    config: Path | None, overrides: dict[str, Any], runs: int = 3, log: Callable[[str], None] = print
) -> dict[str, Any]:
    times = []
    first: float | None = None
    for i in range(runs + 1):
        port = free_port()
        t0 = time.perf_counter()
        proc = start_server(config, overrides, port)
        try:
            wait_ready(port, proc)
            seconds = time.perf_counter() - t0
        finally:
            stop(proc)
        if i == 0:
            first = seconds  # may include building the index and assembling the generator
            log(f"first start (warm-up, may build the index): {seconds:.2f} s")
        else:
            times.append(seconds)
            log(f"start {i}: {seconds:.2f} s")
    return {
        "runs": runs,
        "first_start_s": round(first or 0.0, 2),
        "ready_s_median": round(median(times), 2),
        "ready_s": [round(t, 2) for t in times],
    }
