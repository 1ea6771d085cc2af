"""The request clock: monotonic time plus the replayed time of cached model calls.

A generation served from the on-disk cache (evaluation reruns, models.generator.cache) returns in
milliseconds but stands for a call that took seconds. Timed by the wall clock, a rerun's repairs
would look free: the reward's latency factor, the budget masks and the reported latency would all
differ from the cold run they replay. So a cache hit advances this context's replayed time by the
seconds the call took when it was made, and the engine, the repair budgets and the cost meter read
`now()`: a rerun measures and budgets what the cold run did. With no cache nothing is replayed and
`now()` is time.monotonic().

The replayed time is a ContextVar: each thread (and each anyio worker call, which runs in a copy of
the caller's context) has its own, so concurrent requests never see each other's replays.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

_replayed: ContextVar[float] = ContextVar("ragmend_replayed_s", default=0.0)


def now() -> float:
    """Monotonic seconds, cached calls counted at their recorded duration."""
    return time.monotonic() + _replayed.get()


def replay(seconds: float) -> None:
    """Count a cached call's recorded `seconds` as if it had run now."""
    if seconds > 0:
        _replayed.set(_replayed.get() + seconds)


def replayed() -> float:
    """The replayed seconds of this context so far (differences of it are what matter)."""
    return _replayed.get()
