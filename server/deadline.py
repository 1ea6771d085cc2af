"""A request's own deadline from its headers, and its client's disconnection.

A client may ask for a shorter deadline than the server's (server.request_timeout_s), in seconds:
  X-Request-Timeout: 20
or, as the official OpenAI clients send their `timeout` on every request, X-Stainless-Timeout.
The server's deadline caps either (a longer one is ignored). A value that is not a positive
number is a 400.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from contextlib import suppress
from typing import TypeVar

from fastapi import Request

from ragmend.errors import ClientDisconnected, InputError

T = TypeVar("T")
HEADERS = ("x-request-timeout", "x-stainless-timeout")  # the first one present counts


def client_timeout_s(request: Request) -> float | None:
    """The client's timeout in seconds from the request's headers, or None."""
    for name in HEADERS:
        raw = request.headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"header {name}: {raw!r} is not a positive number of seconds")
        return value
    return None


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; if the client disconnects first, cancel it (admission then stops its model
    work) and raise ClientDisconnected."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        with suppress(BaseException):
            await task
        raise ClientDisconnected("the client disconnected before the answer; its work was stopped")
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()


async def _disconnected(request: Request) -> None:
    """Returns when the ASGI server reports the client gone. The request's body was read
    already: the next message the server has for this request is its disconnection."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
