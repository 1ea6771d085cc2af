"""Small typed events and the one interface their handlers implement.

What happens in a request is told as events: the engine's (engine/events.py: a plan chosen, an
answer diagnosed, a repair run or skipped, a request answered) and the server's
(server/events.py: slots taken, a request refused or cancelled, an error answered, a
configuration change). Whoever emits them holds an `Events`, a fixed tuple of handlers; the
Prometheus metrics are one handler (server/metrics/), the event log (`EventLog`) another. A
handler that fails is logged and skipped: an event never costs the caller its work.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Pinged(Event):
...     n: int
>>> class Seen:
...     def __init__(self): self.events = []
...     def handle(self, event): self.events.append(event)
>>> seen = Seen()
>>> events = Events((seen,))
>>> events.emit(Pinged(1))
>>> seen.events
[Pinged(n=1)]
>>> NO_EVENTS.emit(Pinged(2))  # no handler: nothing happens
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

log = logging.getLogger("ragmend.events")


@dataclass(frozen=True)
class Event:
    """One thing that happened; each subclass is a frozen dataclass of plain values."""


@runtime_checkable
class EventHandler(Protocol):
    def handle(self, event: Event) -> None:
        """Take one event (on the emitter's thread: keep it short, never block)."""


@dataclass(frozen=True)
class Events:
    """Where an emitter sends its events: each handler, in order."""

    handlers: tuple[EventHandler, ...] = ()

    def emit(self, event: Event) -> None:
        for handler in self.handlers:
            try:
                handler.handle(event)
            except Exception:  # a handler's fault never reaches the request that emitted the event
                log.exception("event handler %s failed on %s", type(handler).__name__, type(event).__name__)

    def emit_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.emit(event)

    def with_handler(self, handler: EventHandler) -> Events:
        return Events((*self.handlers, handler))


NO_EVENTS = Events()  # emits to nobody: work run outside a server (the CLI, the evaluation)


class EventLog:
    """A handler writing each event as one line at DEBUG on the "ragmend.events" logger.

    >>> EventLog.line(Event())
    'Event'
    """

    def __init__(self, logger: logging.Logger = log):
        self.logger = logger

    def handle(self, event: Event) -> None:
        if self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug("%s", self.line(event))

    @staticmethod
    def line(event: Event) -> str:
        fields = " ".join(f"{f.name}={getattr(event, f.name)!r}" for f in dataclasses.fields(event))
        return f"{type(event).__name__} {fields}".rstrip()
