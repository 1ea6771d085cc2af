"""Admission control of the model-calling endpoints: bounded concurrency, a bounded queue, and a
per-request deadline (docs/limits.md).

At most `max_concurrency` requests do model work at once, each in a worker thread (never on the
event loop); at most `max_queue` more wait for a slot, first come first served. A request that
finds the queue full gets a 503 with Retry-After at once (Overloaded), before any work.

The deadline (`server.request_timeout_s`) counts from admission, the wait included. Past it, a
request still waiting leaves the queue with a 503 (Overloaded: the server is busy, retry later); a
request whose work is running gets a 504 (RequestTimeout) while its thread runs to the end in the
background: a Python thread cannot be stopped, and a generator call in it is bounded by
models.generator.timeout_s anyway. That thread keeps its slot until it ends, so the limit counts
the work really running, timed-out requests included, and the next request starts only when a
core is free for it.

The worker threads run under this object's own anyio CapacityLimiter, sized to max_concurrency:
the default limiter (40 threads, shared with every other sync call of the app) is never the
hidden limit, and /metrics scrapes never wait behind model work.

Use, in any route that calls the models:

    outcome = await admission.run(respond, query, overrides)   # respond runs in a worker thread

with `admission` from `request.app.state.admission`, or as a dependency:
`admission: Annotated[Admission, Depends(admission_of)]`. `slot()` is the underlying context
manager, for work that must hold a slot across more than one call.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from anyio import CapacityLimiter, to_thread
from fastapi import Request

from ragmend.errors import Overloaded, RequestTimeout
from ragmend.settings import ServerSettings

if TYPE_CHECKING:
    from prometheus_client import Gauge

log = logging.getLogger("ragmend.admission")
T = TypeVar("T")


class Admission:
    """Slots for model work, a FIFO of waiters, and the request deadline. Event-loop only: every
    method runs on the loop (thread completions come back to it through task callbacks)."""

    def __init__(
        self,
        max_concurrency: int,
        max_queue: int,
        timeout_s: float,
        retry_after_s: int = 5,
        *,
        queue_depth: Gauge | None = None,
        in_flight: Gauge | None = None,
    ):
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._queue_depth = queue_depth
        self._in_flight = in_flight
        self._running = 0  # slots taken: requests working, and timed-out work still running
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._background: set[asyncio.Task[Any]] = set()  # work that outlived its request
        self._limiter: CapacityLimiter | None = None  # made on the loop, at first use

    @classmethod
    def from_settings(
        cls, server: ServerSettings, *, queue_depth: Gauge | None = None, in_flight: Gauge | None = None
    ) -> Admission:
        return cls(
            server.max_concurrency,
            server.max_queue,
            server.request_timeout_s,
            server.retry_after_s,
            queue_depth=queue_depth,
            in_flight=in_flight,
        )

    # --- state --------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Slots taken (timed-out work that still runs included)."""
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _publish(self) -> None:
        if self._queue_depth is not None:
            self._queue_depth.set(len(self._waiters))
        if self._in_flight is not None:
            self._in_flight.set(self._running)

    # --- slots --------------------------------------------------------------------------------

    async def _acquire(self, deadline: float) -> None:
        if self._running < self.max_concurrency and not self._waiters:
            self._running += 1
            self._publish()
            return
        if len(self._waiters) >= self.max_queue:
            raise Overloaded(
                f"server busy: {self._running} requests running and {len(self._waiters)} waiting "
                f"(server.max_concurrency = {self.max_concurrency}, server.max_queue = {self.max_queue})",
                self.retry_after_s,
            )
        loop = asyncio.get_running_loop()
        ticket: asyncio.Future[None] = loop.create_future()
        self._waiters.append(ticket)
        self._publish()
        try:
            async with asyncio.timeout_at(deadline):
                await ticket  # _release hands a slot over by setting the ticket's result
        except BaseException as exc:
            if ticket.done() and not ticket.cancelled():
                self._release()  # granted just as the wait ended: pass the slot on
            else:
                ticket.cancel()
                if ticket in self._waiters:
                    self._waiters.remove(ticket)
                self._publish()
            if isinstance(exc, TimeoutError):
                raise Overloaded(
                    "server busy: no worker slot became free within server.request_timeout_s = "
                    f"{self.timeout_s:g} s",
                    self.retry_after_s,
                ) from None
            raise
        self._publish()

    def _release(self) -> None:
        while self._waiters:
            ticket = self._waiters.popleft()
            if not ticket.done():
                ticket.set_result(None)  # the slot passes to the oldest waiter: _running unchanged
                self._publish()
                return
        self._running -= 1
        self._publish()

    @asynccontextmanager
    async def slot(self, deadline: float | None = None) -> AsyncIterator[Slot]:
        """Wait for a slot (Overloaded when the queue is full or `deadline`, a loop time, passes
        first); the slot is freed on leaving the block, or, for work started with `Slot.run` that
        outlives it, when that work ends."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s if deadline is None else deadline
        await self._acquire(deadline)
        slot = Slot(self, deadline)
        try:
            yield slot
        finally:
            if not slot.detached:
                self._release()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in a worker thread once a slot is free, under the request deadline."""
        async with self.slot() as slot:
            return await slot.run(fn, *args)

    def limiter(self) -> CapacityLimiter:
        if self._limiter is None:
            self._limiter = CapacityLimiter(self.max_concurrency)
        return self._limiter

    # --- shutdown -----------------------------------------------------------------------------

    async def drain(self, timeout_s: float) -> bool:
        """Wait for work that outlived its request (timed out) to end; False if some still runs
        after `timeout_s`. The lifespan calls it before closing the engine."""
        pending = list(self._background)
        if not pending:
            return True
        log.info("waiting up to %g s for %d timed-out request(s) still working", timeout_s, len(pending))
        _, still = await asyncio.wait(pending, timeout=timeout_s)
        if still:
            log.warning("%d timed-out request(s) still working at shutdown", len(still))
        return not still


class Slot:
    """One taken slot. `run` may be called more than once; after a timeout the slot is detached:
    it belongs to the thread still running, which frees it when it ends."""

    def __init__(self, admission: Admission, deadline: float):
        self._admission = admission
        self.deadline = deadline
        self.detached = False

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        if self.detached:
            raise RuntimeError("this slot belongs to work that timed out")
        a = self._admission
        work: asyncio.Task[T] = asyncio.ensure_future(to_thread.run_sync(fn, *args, limiter=a.limiter()))
        try:
            # shield: the deadline (or a cancelled request) must not cancel `work`, which keeps
            # running in its thread anyway and frees the slot when it really ends (_detach).
            async with asyncio.timeout_at(self.deadline):
                return await asyncio.shield(work)
        except TimeoutError:
            if work.done() and not work.cancelled():
                return work.result()  # it ended just as the deadline passed
            self._detach(work)
            raise RequestTimeout(
                f"the request ran past server.request_timeout_s = {a.timeout_s:g} s; its work "
                "finishes in the background"
            ) from None
        except asyncio.CancelledError:
            if not work.done():
                self._detach(work)
            raise

    def _detach(self, work: asyncio.Task[T]) -> None:
        a = self._admission
        self.detached = True
        a._background.add(work)

        def done(task: asyncio.Task[T]) -> None:
            a._background.discard(task)
            a._release()
            if not task.cancelled() and task.exception() is not None:
                log.info("timed-out request ended with %s", type(task.exception()).__name__)

        work.add_done_callback(done)


def admission_of(request: Request) -> Admission:
    """FastAPI dependency: the app's Admission (set by create_app)."""
    admission: Admission = request.app.state.admission
    return admission
