"""What one client connection may hold: uvicorn's configuration from server.* and the HTTP
protocol with deadlines on what a client sends (docs/operations.md, "Safe by default").

uvicorn bounds neither how long a client may take to send a request's headers nor how long a
connection may keep sending a body nobody reads (after a 401 or a 413 it discards the bytes, and
each one restarts its keep-alive timer): a few hundred slow connections (a slowloris) would hold
the server's sockets for ever. `SlowClientProtocol` is uvicorn's h11 protocol with two deadlines:

- a request's head must be in within server.header_timeout_s of the connection's opening (a
  connection that sends nothing included) or of the request's first byte after a keep-alive wait;
- a body still arriving after its response was sent must end within server.body_timeout_s.

Past either, the connection is closed. The body of a request the app reads is bounded by
server.body_timeout_s in `body_limit.BodyLimit` (a 408). Headers larger than h11's 16 KiB are a
400 (uvicorn's h11_max_incomplete_event_size); connections past server.max_connections get
uvicorn's 503.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from ragmend.settings import ServerSettings

log = logging.getLogger("ragmend.server")


class SlowClientProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head and on a body sent after its
    response (`with_deadlines` sets them)."""

    header_timeout_s: ClassVar[float] = 10.0
    body_timeout_s: ClassVar[float] = 60.0
    _head_timer: asyncio.TimerHandle | None = None
    _drain_timer: asyncio.TimerHandle | None = None

    @classmethod
    def with_deadlines(cls, header_timeout_s: float, body_timeout_s: float) -> type[SlowClientProtocol]:
        deadlines = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s}
        return type(cls.__name__, (cls,), deadlines)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_late)

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            # The first byte of the next request on a kept-alive connection starts its head's deadline.
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_late)
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel("_head_timer")
        if self.conn.their_state is not h11.SEND_BODY:
            self._cancel("_drain_timer")

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and self._drain_timer is None:
            # Answered before its body was read: the rest is discarded, within the body's deadline.
            self._drain_timer = self.loop.call_later(self.body_timeout_s, self._drained)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel("_head_timer")
        self._cancel("_drain_timer")
        super().connection_lost(exc)

    def _head_late(self) -> None:
        self._head_timer = None
        self._close("request head")

    def _drained(self) -> None:
        self._drain_timer = None
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.SEND_BODY:
            self._close("unread request body")

    def _close(self, what: str) -> None:
        if not self.transport.is_closing():
            log.debug("closed a connection from %s: its %s was too slow", self.client, what)
            self.transport.close()

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)


def uvicorn_options(server: ServerSettings) -> dict[str, Any]:
    """The options of uvicorn's run (or Config) that `ragmend serve` takes from the settings."""
    return {
        "http": SlowClientProtocol.with_deadlines(server.header_timeout_s, server.body_timeout_s),
        "limit_concurrency": server.max_connections,
        "timeout_keep_alive": server.keep_alive_s,
        "timeout_graceful_shutdown": server.shutdown_timeout_s,
    }
