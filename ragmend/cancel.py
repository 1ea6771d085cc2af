"""A request's deadline and its cancellation, seen by every stage that does model work.

The server makes one per request: the deadline is server.request_timeout_s, or the client's own
when it is shorter; the request is cancelled when that deadline passes or its client disconnects.
Cancelling is cooperative: the work stops at its next safe point, where it calls `check()`:
  - the in-process generator, at every token (the sequence is ended, the model left clean),
    while it waits for its turn at the model (ragmend/models/gate.py), and before it starts a
    generation the time left cannot cover (ragmend/models/pace.py); a remote generator's call is
    bounded by the time left;
  - the engine, between the first pass, the diagnosis and the repair;
  - the repairer, which skips a repair that cannot finish before the deadline.
A prompt's evaluation already under way is not interrupted (llama.cpp offers only a callback per
graph node, which would take Python's lock hundreds of times a token): a cancelled request stops
after it, at its first token.

The token travels in a ContextVar, as ragmend.clock's replayed time does: anyio runs each worker
call in a copy of the caller's context, so the token set in the request's task is the one its
worker thread sees, and concurrent requests never see each other's. Work run outside a request
(the CLI, evaluation) sees NEVER: no deadline, never cancelled.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from ragmend.errors import Cancelled

Reason = Literal["deadline", "disconnect", "shutdown"]


class Cancellation:
    """One request's deadline (a time.monotonic() value; inf: none) and its cancelled flag.
    Thread-safe: the event loop cancels, worker threads check."""

    def __init__(
        self, deadline: float = math.inf, describe: str = "no deadline", parent: Cancellation | None = None
    ) -> None:
        self.deadline = deadline
        self.describe = describe  # where the deadline comes from, for messages
        self.parent = parent
        self._event = threading.Event()
        self.reason: Reason | None = None

    def child(self, deadline: float, describe: str) -> Cancellation:
        """A token for part of the work that must end by `deadline` (capped by this one's),
        cancelled too when this one is: the repairer runs its pass under one, so a pass that
        would overrun the request's deadline is abandoned and the first answer still sent."""
        return Cancellation(min(deadline, self.deadline), describe, parent=self)

    @property
    def request_deadline(self) -> float:
        """The whole request's deadline (a child's is its root's): what orders the requests
        waiting for the in-process model (ragmend/models/gate.py)."""
        return self.deadline if self.parent is None else self.parent.request_deadline

    def cancel(self, reason: Reason) -> None:
        """Ask the work to stop; the first reason given is the one kept."""
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        """Cancelled, or past the deadline (which cancels it with reason "deadline")."""
        if not self._event.is_set():
            if self.parent is not None and self.parent.cancelled:
                self.cancel(self.parent.reason or "deadline")
            elif time.monotonic() >= self.deadline:
                self.cancel("deadline")
        return self._event.is_set()

    def timeout(self) -> float | None:
        """remaining(), or None without a deadline (asyncio.timeout's "never")."""
        return None if math.isinf(self.deadline) else self.remaining()

    def remaining(self) -> float:
        """Seconds to the deadline (inf without one; 0 once cancelled)."""
        if self.cancelled:
            return 0.0
        return max(0.0, self.deadline - time.monotonic())

    def check(self, stage: str) -> None:
        """Raise Cancelled if the request was cancelled; `stage` names where it stopped."""
        if self.cancelled:
            raise Cancelled(self.reason or "deadline", stage)

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to `timeout_s` or until cancelled; True if cancelled."""
        self._event.wait(min(timeout_s, self.remaining()))
        return self.cancelled


NEVER = Cancellation()  # outside a request: no deadline; nothing cancels it
_current: ContextVar[Cancellation] = ContextVar("ragmend_cancellation", default=NEVER)


def current() -> Cancellation:
    """The running request's token (NEVER outside one)."""
    return _current.get()


@contextmanager
def scope(token: Cancellation) -> Iterator[Cancellation]:
    """Make `token` the current one inside the block (in this context and its copies)."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)
