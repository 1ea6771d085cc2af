"""Inputs that must not stall: a call run in a child process that is killed past a bound far above
a linear pass's time, so a backtracking regex or a quadratic loop fails the test instead of
hanging the suite. Not a speed measurement (benchmarks do that): a stall takes hours here."""

from __future__ import annotations

import subprocess
import sys

BOUND_S = 60.0  # the child's imports take seconds on 2 cores; the stalls found took hours


def finishes(code: str, bound_s: float = BOUND_S) -> str:
    """Run `code` in a fresh interpreter; its stdout, or AssertionError where it runs past the bound
    or fails."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=bound_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running after {bound_s:.0f} s: {code[:200]}") from None
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
