"""Who uses the in-process model next: the request with the earliest deadline (for requests
with the same timeout, the oldest), then the order of arrival; a waiter whose request is
cancelled leaves the line.

llama.cpp contexts are not thread-safe, so one generation runs at a time. A plain lock hands the
model to whichever waiter the OS wakes: a request admitted first could wait behind several newer
ones, and the time a request takes once it holds a worker slot (what admission predicts,
server/admission.py) got a long tail. Ordered by the request's deadline, a request's repair pass
(which carries its request's deadline) goes before a newer request's first pass: what was
started is finished first, so each request holds its slot as briefly as the model allows.
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ragmend.cancel import Cancellation

# How often a waiter looks at its request's cancellation.
POLL_S = 0.05


class GateTimeout(Exception):
    """The waiter's request was cancelled, or its wait reached the caller's deadline."""


class ModelGate:
    """An ordered lock (see the module's docstring). Thread-safe; the thread that holds it may
    acquire it again (a diagnosis holding the cores that calls a generator), releasing as often."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._owner: int | None = None
        self._depth = 0
        self._line: list[tuple[float, int]] = []  # a heap: (the request's deadline, arrival)
        self._arrivals = itertools.count()
        self._thread = threading.local()  # each thread's seconds waiting in line

    def waited_s(self) -> float:
        """Seconds the calling thread has waited in line while others held the gate (a cost of
        the load, not of the work the thread then did)."""
        return float(getattr(self._thread, "waited", 0.0))

    @property
    def waiting(self) -> int:
        return len(self._line)

    def acquire(self, request: Cancellation, deadline: float) -> None:
        """Wait for the model's turn; GateTimeout if `request` is cancelled or the monotonic
        `deadline` (the call's own) passes first. Pair with release()."""
        place = (request.request_deadline, next(self._arrivals))
        me = threading.get_ident()
        with self._cond:
            if self._held and self._owner == me:
                self._depth += 1
                return
            heapq.heappush(self._line, place)
            queued = time.monotonic()
            try:
                while self._held or self._line[0] != place:
                    if request.cancelled:
                        raise GateTimeout("cancelled while waiting for the model")
                    if time.monotonic() >= deadline:
                        raise GateTimeout("waited past the call's deadline for the model")
                    self._cond.wait(POLL_S)
            except BaseException:
                self._line.remove(place)
                heapq.heapify(self._line)
                self._cond.notify_all()  # the next in line may be able to go now
                raise
            finally:
                self._thread.waited = self.waited_s() + time.monotonic() - queued
            heapq.heappop(self._line)
            self._held, self._owner = True, me

    def release(self) -> None:
        with self._cond:
            if self._depth:
                self._depth -= 1
                return
            self._held, self._owner = False, None
            self._cond.notify_all()

    @contextmanager
    def held(self, request: Cancellation, deadline: float = math.inf) -> Iterator[None]:
        """acquire() ... release() around the block."""
        self.acquire(request, deadline)
        try:
            yield
        finally:
            self.release()
