"""The request-body limit (server.max_body_bytes): one ASGI middleware for both kinds of body.

A body whose declared Content-Length is over the limit (or not a number) is refused before it is
read; a chunked body (Transfer-Encoding: chunked, no Content-Length) declares nothing, so the
bytes are counted as the app reads them. A pure ASGI middleware: it has to wrap `receive`, which
BaseHTTPMiddleware cannot.

The error for a body that grows past the limit is a Starlette HTTPException raised from
`receive`: FastAPI re-raises an HTTPException met while reading a body (anything else it turns
into a 400), so the app's own HTTPException handler answers it, in the app's error shape. Should
something read the body outside the routes' exception handling, the 413 is sent here. It must be
the innermost middleware: a BaseHTTPMiddleware inside it reads through a task group, which wraps
the exception in an ExceptionGroup that FastAPI takes for an unparsable body (400).

Starlette's own RequestBodyLimitMiddleware (FastAPI(max_body_size=...)) is not used: it answers
in plain text.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragmend.server.errors import error_response


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, on_refusal: Callable[[int], None] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.on_refusal = on_refusal  # counts the refusals this middleware answers itself

    def error(self) -> HTTPException:
        return HTTPException(413, f"request body is over the limit of {self.max_bytes} bytes")

    def _declared(self, length: str | None) -> tuple[int, str] | None:
        """(status, message) for a declared length that cannot be read, or None."""
        if length is None:
            return None
        if not length.isdigit():
            return 400, "invalid Content-Length header"
        if int(length) > self.max_bytes:
            return 413, f"request body is {length} bytes, over the limit of {self.max_bytes}"
        return None

    def _refused(self, status: int) -> None:
        if self.on_refusal is not None:
            self.on_refusal(status)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._declared(Headers(scope=scope).get("content-length"))
        if refusal is not None:
            status, message = refusal
            self._refused(status)
            await error_response(status, message)(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self.error()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except HTTPException as e:
            if started or e.status_code != 413:
                raise
            self._refused(413)
            await error_response(413, e.detail)(scope, receive, send)
