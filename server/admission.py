"""Admission control of the model-calling endpoints: bounded concurrency, a bounded queue, a
deadline per request, and no work for nobody (docs/limits.md, "Overload").

At most `max_concurrency` requests do model work at once, each in a worker thread (never on the
event loop); at most `max_queue` more wait for a slot, first come first served.

Every request carries a deadline (ragmend/cancel.py): server.request_timeout_s, or the client's
own when it is shorter (server/deadline.py reads it from the request's headers). Work starts only
when it can finish before it:
  - on arrival, a request is refused (503, Retry-After) when the queue is full, or when the wait
    the queue predicts plus the service it predicts would end past its deadline;
  - a request waiting for a slot whose deadline passes leaves the queue with a 503;
  - when a slot comes, the request is refused (503) if its time left no longer covers the
    predicted service;
  - the repairer skips a repair that cannot end before the deadline (engine/repair.py).
Every refusal comes before any model work. Past the deadline, or when the client disconnects, the
request is cancelled: its work stops at the next safe point (the generator's next token, the next
stage) and its slot is freed when its thread has stopped; the client gets a 504 (or nothing: it
has gone), and the generator seconds it had spent are counted as wasted.

The predictions are measured online (ServiceTimes): a request's first pass (answer and
diagnosis) once it holds a slot, per kind of request and per number of requests running beside
it, as the 95th percentile of the last ones (a request needs 1.25x that left); and the interval
between two slots freeing while requests wait, from which the queue's wait follows (position p
waits about (p + 1) intervals).
Repairs are in that interval, not in the first pass: a repair is skipped when it no longer fits.
A request that shaped its own pass (its own max_tokens, stop, sampling, prompt: the result's
`learn` is false) is served like any other but measured by neither estimate (`is_measured`).
With a remote generator that serves requests in parallel the same measurements describe it:
nothing here assumes the in-process model. Until a few requests have been measured in the same
conditions there is no prediction, and only the queue bound and the deadline apply.

The worker threads run under this object's own anyio CapacityLimiter, sized to max_concurrency:
the default limiter (40 threads, shared with every other sync call of the app) is never the
hidden limit, and /metrics scrapes never wait behind model work.

Use, in any route that calls the models:

    token = admission.token(client_timeout_s)             # the request's deadline
    outcome = await admission.run(respond, query, token=token)   # respond runs in a worker thread
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar, runtime_checkable

from anyio import CapacityLimiter, to_thread

from ragmend import cancel
from ragmend.cancel import Cancellation
from ragmend.errors import Cancelled, Overloaded, RequestTimeout
from ragmend.instrumentation import NO_EVENTS, Events
from ragmend.server.events import (
    MAX_LABELLED,
    STOPPED_AT,
    GeneratorTimeSpent,
    RequestCancelled,
    RequestRefused,
    ServiceEstimated,
    SlotsChanged,
)
from ragmend.settings import ServerSettings

log = logging.getLogger("ragmend.admission")
T = TypeVar("T")

WINDOW = 64  # requests each estimate remembers
# How long a measurement counts. Refused requests add none, so without ageing a few slow passes
# (anyone can ask for one) would refuse every short deadline until a restart; once they age out
# there is no estimate, nothing is refused on it, and the next answers measure again.
MAX_AGE_S = 300.0
MIN_SAMPLES = 3  # before this many, no prediction: nothing is refused on a guess
FIRST_QUANTILE = 0.95  # a request is admitted on the first pass's 95th percentile, not its mean
# ...and only with this much more time left than that: work that starts and then misses its
# deadline is the waste admission exists to avoid, while a refusal costs the client a retry.
HEADROOM = 1.25
MAX_RETRY_AFTER_S = 3600


@runtime_checkable
class Served(Protocol):
    """What a request's result tells admission (engine/outcome.py Outcome has both)."""

    first_pass_s: float
    generator_busy_s: float


def is_measured(result: object) -> bool:
    """Whether a result's times may predict the next requests': not where the request shaped its
    own pass (Outcome.learn false); a result that does not say is measured."""
    return bool(getattr(result, "learn", True))


class ServiceTimes:
    """Online estimates, each from measurements made in the same conditions:

    - a request's first pass once it holds a slot, per kind (the served corpus) and per number of
      requests running when it started (itself included): with one in-process model, four
      running requests take about four times as long each as one alone, and a remote engine
      that serves them in parallel shows its own figures. The 95th percentile of the last WINDOW;
      no estimate for a count not yet seen (a server that measured only under load does not
      refuse an idle one's requests on those figures).
    - the interval between two slots freeing while requests wait (the queue's drain rate), the
      mean of the last WINDOW.

    Each reads only measurements of the last MAX_AGE_S seconds (`clock`'s).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._first: dict[tuple[str, int], deque[tuple[float, float]]] = {}
        self._gaps: deque[tuple[float, float]] = deque(maxlen=WINDOW)
        self._last_saturated_release: float | None = None

    def observe_first(self, kind: str, running: int, first_s: float) -> None:
        self._first.setdefault((kind, running), deque(maxlen=WINDOW)).append((self.clock(), first_s))

    def observe_release(self, now: float, saturated: bool, measured: bool = True) -> None:
        """A slot freed; `saturated`: requests were waiting for it; `measured`: the interval it
        closes is kept (not for a request that shaped its own pass, though it still starts the next)."""
        if saturated and measured and self._last_saturated_release is not None:
            self._gaps.append((now, now - self._last_saturated_release))
        self._last_saturated_release = now if saturated else None

    def first_s(self, kind: str, running: int) -> float | None:
        samples = self._recent(self._first.get((kind, running), ())) or self._recent(
            [s for (_, n), d in self._first.items() if n == running for s in d]
        )
        if len(samples) < MIN_SAMPLES:
            return None
        ordered = sorted(samples)
        return ordered[min(len(ordered) - 1, int(FIRST_QUANTILE * len(ordered)))]

    def slot_interval(self) -> float | None:
        gaps = self._recent(self._gaps)
        return statistics.fmean(gaps) if len(gaps) >= MIN_SAMPLES else None

    def _recent(self, samples: Iterable[tuple[float, float]]) -> list[float]:
        since = self.clock() - MAX_AGE_S
        return [value for at, value in samples if at >= since]


class Admission:
    """Slots for model work, a FIFO of waiters, and the request deadline. Event-loop only: every
    method runs on the loop (thread completions come back to it through task callbacks). What it
    does is told to `events` (server/events.py: slots, refusals, cancellations, generator time,
    its estimates)."""

    def __init__(
        self,
        max_concurrency: int,
        max_queue: int,
        timeout_s: float,
        retry_after_s: int = 5,
        *,
        events: Events = NO_EVENTS,
    ):
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.events = events
        self.service = ServiceTimes()
        self._running = 0  # slots taken: requests working, and cancelled work still stopping
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._background: set[asyncio.Task[Any]] = set()  # work that outlived its request
        self._limiter: CapacityLimiter | None = None  # made on the loop, at first use

    @classmethod
    def from_settings(cls, server: ServerSettings, *, events: Events = NO_EVENTS) -> Admission:
        s = server
        return cls(s.max_concurrency, s.max_queue, s.request_timeout_s, s.retry_after_s, events=events)

    # --- state --------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Slots taken (cancelled work still stopping included)."""
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _publish(self) -> None:
        self.events.emit(SlotsChanged(self._running, len(self._waiters)))

    def token(self, client_timeout_s: float | None = None) -> Cancellation:
        """A new request's deadline: the server's, or the client's when it is shorter."""
        now = time.monotonic()
        if client_timeout_s is not None and client_timeout_s < self.timeout_s:
            return Cancellation(now + client_timeout_s, f"the client's timeout, {client_timeout_s:g} s")
        return Cancellation(now + self.timeout_s, f"server.request_timeout_s = {self.timeout_s:g} s")

    # --- predictions --------------------------------------------------------------------------

    def _needed_s(self, kind: str, running: int) -> float | None:
        """The time a request must have left to start beside `running` requests (itself
        included): the predicted first pass with its headroom; None before any measurement."""
        first = self.service.first_s(kind, running)
        return None if first is None else first * HEADROOM

    def _refuse(self, at: str, message: str, retry_after_s: float | None = None) -> Overloaded:
        self.events.emit(RequestRefused(at))
        retry = self.retry_after_s if retry_after_s is None else retry_after_s
        return Overloaded(message, max(1, min(MAX_RETRY_AFTER_S, math.ceil(retry))))

    def _check_arrival(self, token: Cancellation, kind: str) -> None:
        """Refuse now what cannot be answered in time: the queue is full, or its predicted wait
        plus the predicted service ends past the request's deadline."""
        left = token.remaining()
        must_wait = self._running >= self.max_concurrency or bool(self._waiters)
        # It will start with every slot taken if it must wait, else beside those running now.
        first = self._needed_s(kind, self.max_concurrency if must_wait else self._running + 1)
        interval = self.service.slot_interval()
        if first is not None and left < first:
            raise self._refuse(
                "arrival",
                f"the request's deadline ({token.describe}) leaves {left:.1f} s, less than the "
                f"{first:.1f} s a request takes (its 95th percentile, with headroom)",
            )
        if must_wait and len(self._waiters) >= self.max_queue:
            raise self._refuse(
                "arrival",
                f"server busy: {self._running} requests running and {len(self._waiters)} waiting "
                f"(server.max_concurrency = {self.max_concurrency}, server.max_queue = {self.max_queue})",
                None if interval is None else interval * len(self._waiters),
            )
        if must_wait and first is not None and interval is not None:
            wait = interval * (len(self._waiters) + 1)
            if wait + first > left:
                raise self._refuse(
                    "arrival",
                    f"server busy: {len(self._waiters)} requests waiting; the predicted wait "
                    f"({wait:.1f} s) and answer ({first:.1f} s) would end past the request's "
                    f"deadline ({token.describe}, {left:.1f} s left)",
                    wait + first - left,
                )

    def _check_start(self, token: Cancellation, kind: str) -> None:
        """At a slot: the time left must still cover the predicted first pass."""
        first = self._needed_s(kind, self._running)
        left = token.remaining()
        if left <= 0 or (first is not None and left < first):
            raise self._refuse(
                "start" if left > 0 else "queue",
                f"server busy: the request waited for a slot until its deadline ({token.describe}) "
                f"left {left:.1f} s"
                + ("" if first is None else f", less than the {first:.1f} s a request takes"),
                self.service.slot_interval(),
            )

    # --- slots --------------------------------------------------------------------------------

    async def _acquire(self, token: Cancellation, kind: str) -> None:
        self._check_arrival(token, kind)
        if self._running < self.max_concurrency and not self._waiters:
            self._running += 1
            self._publish()
        else:
            loop = asyncio.get_running_loop()
            ticket: asyncio.Future[None] = loop.create_future()
            self._waiters.append(ticket)
            self._publish()
            try:
                async with asyncio.timeout(token.timeout()):
                    await ticket  # _release hands a slot over by setting the ticket's result
            except BaseException as exc:
                if ticket.done() and not ticket.cancelled():
                    self._release(ran=False)  # granted just as the wait ended: pass the slot on
                else:
                    ticket.cancel()
                    if ticket in self._waiters:
                        self._waiters.remove(ticket)
                    self._publish()
                if isinstance(exc, TimeoutError):
                    raise self._refuse(
                        "queue",
                        f"server busy: no worker slot became free before the request's deadline "
                        f"({token.describe})",
                        self.service.slot_interval(),
                    ) from None
                raise
            self._publish()
        try:
            self._check_start(token, kind)
        except Overloaded:
            self._release(ran=False)
            raise

    def _release(self, ran: bool = True, measured: bool = True) -> None:
        """Free a slot (to the oldest waiter); `ran`: work held it (a slot given back unused,
        by a request refused at its start, says nothing of how fast the queue drains);
        `measured`: its time counts in the queue's drain rate."""
        if ran:
            self.service.observe_release(time.monotonic(), saturated=bool(self._waiters), measured=measured)
        while self._waiters:
            ticket = self._waiters.popleft()
            if not ticket.done():
                ticket.set_result(None)  # the slot passes to the oldest waiter: _running unchanged
                self._publish()
                return
        self._running -= 1
        self._publish()

    async def run(
        self, fn: Callable[..., T], *args: object, token: Cancellation | None = None, kind: str = "default"
    ) -> T:
        """`fn(*args)` in a worker thread once a slot is free and the request can be answered
        in time, with `token` (default: the server's deadline) as its current cancellation."""
        token = token or self.token()
        await self._acquire(token, kind)
        running = self._running  # at its start, itself included: the condition of its estimate
        work: asyncio.Task[T] = asyncio.ensure_future(
            to_thread.run_sync(_in_scope, token, fn, *args, limiter=self.limiter())
        )
        try:
            # shield: the deadline (or a disconnect) must not cancel `work`, a thread that only
            # stops when it next looks at its token; its slot is freed when it really ends.
            async with asyncio.timeout(token.timeout()):
                result = await asyncio.shield(work)
        except TimeoutError:
            if work.done() and not work.cancelled() and work.exception() is None:
                result = work.result()  # it ended just as the deadline passed
            else:
                self._stop(work, token, "deadline")
                raise RequestTimeout(
                    f"the request ran past its deadline ({token.describe}); its work was stopped"
                ) from None
        except asyncio.CancelledError:  # the client went away
            self._stop(work, token, "disconnect")
            raise
        except Cancelled as e:  # the work saw its token first
            self._count_cancelled(e.reason, e.generator_s, e.stage)
            self._release()
            raise RequestTimeout(
                f"the request ran past its deadline ({token.describe}); its work stopped at {e.stage}"
            ) from None
        except BaseException:
            self._release()
            raise
        self._release(measured=is_measured(result))
        self._observe(kind, running, result)
        return result

    def _stop(self, work: asyncio.Task[Any], token: Cancellation, reason: cancel.Reason) -> None:
        """Cancel the request's work; its slot is freed when its thread has stopped."""
        token.cancel(reason)
        if work.done():
            self._release()
            self._account_ended(work, reason)
            return
        self._background.add(work)

        def ended(task: asyncio.Task[Any]) -> None:
            self._background.discard(task)
            self._release()
            self._account_ended(task, reason)

        work.add_done_callback(ended)

    def _account_ended(self, task: asyncio.Task[Any], reason: str) -> None:
        exc = None if task.cancelled() else task.exception()
        if isinstance(exc, Cancelled):
            self._count_cancelled(exc.reason, exc.generator_s, exc.stage)
        elif exc is None and not task.cancelled():  # it finished before it looked at its token
            result = task.result()
            spent = result.generator_busy_s if isinstance(result, Served) else 0.0
            self._count_cancelled(reason, spent, "finished")
        else:
            self._count_cancelled(reason, 0.0, "failed")
            log.info("cancelled request ended with %s", type(exc).__name__)

    def _count_cancelled(self, reason: str, generator_s: float, stopped_at: str) -> None:
        self.events.emit(RequestCancelled(reason, stopped_at if stopped_at in STOPPED_AT else "other"))
        if generator_s > 0:
            self.events.emit(GeneratorTimeSpent("wasted", generator_s))

    def _observe(self, kind: str, running: int, result: object) -> None:
        """A delivered answer: its first pass for the estimates, its generator seconds as answered."""
        if not isinstance(result, Served):
            return
        if is_measured(result):
            self.service.observe_first(kind, running, result.first_pass_s)
        if result.generator_busy_s > 0:
            self.events.emit(GeneratorTimeSpent("answered", result.generator_busy_s))
        if (f := self.service.first_s(kind, running)) is not None:
            self.events.emit(ServiceEstimated(f"first_pass_{min(running, MAX_LABELLED)}", f))
        if (gap := self.service.slot_interval()) is not None:
            self.events.emit(ServiceEstimated("slot_interval", gap))

    def limiter(self) -> CapacityLimiter:
        if self._limiter is None:
            self._limiter = CapacityLimiter(self.max_concurrency)
        return self._limiter

    # --- shutdown -----------------------------------------------------------------------------

    async def drain(self, timeout_s: float) -> bool:
        """Wait for cancelled work to stop; False if some still runs after `timeout_s`. The
        lifespan calls it before closing the engine."""
        pending = list(self._background)
        if not pending:
            return True
        log.info("waiting up to %g s for %d cancelled request(s) to stop", timeout_s, len(pending))
        _, still = await asyncio.wait(pending, timeout=timeout_s)
        if still:
            log.warning("%d cancelled request(s) still working at shutdown", len(still))
        return not still


def _in_scope(token: Cancellation, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` with `token` as the worker thread's current cancellation."""
    with cancel.scope(token):
        return fn(*args)
