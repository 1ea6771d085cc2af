"""The request-body limits: one ASGI middleware for both kinds of body, its size and its time.

Two sizes: the admin routes (/admin/*, where documents are uploaded) take bodies up to
server.max_upload_bytes, every other route (the /v1 JSON APIs) up to server.max_body_bytes, so a
client of /v1 cannot send what only an upload needs. A body whose declared Content-Length is over
its limit (or not a number) is refused before it is read; a chunked body (Transfer-Encoding:
chunked, no Content-Length) declares nothing, so the bytes are counted as the app reads them.
The whole body must arrive within server.body_timeout_s of the request's start: a body sent
slower (a slowloris) is a 408 and its connection is closed. A pure ASGI middleware: it has to
wrap `receive`, which BaseHTTPMiddleware cannot.

The error for a body that grows past the limit, or is late, is a Starlette HTTPException raised
from `receive`: FastAPI re-raises an HTTPException met while reading a body (anything else it turns
into a 400), so the app's own HTTPException handler answers it, in the app's error shape. Should
something read the body outside the routes' exception handling, the 413 or 408 is sent here. It must be
the innermost middleware: a BaseHTTPMiddleware inside it reads through a task group, which wraps
the exception in an ExceptionGroup that FastAPI takes for an unparsable body (400).

Starlette's own RequestBodyLimitMiddleware (FastAPI(max_body_size=...)) is not used: it answers
in plain text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragmend.server.errors import error_response

# The routes whose bodies are uploads (documents, a policy import): server.max_upload_bytes.
UPLOAD_PREFIX = "/admin/"


class BodyLimit:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        upload_bytes: int | None = None,
        timeout_s: float | None = None,
        on_refusal: Callable[[int], None] | None = None,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.upload_bytes = upload_bytes if upload_bytes is not None else max_bytes
        self.timeout_s = timeout_s  # None: no deadline on the body
        self.on_refusal = on_refusal  # counts the refusals this middleware answers itself

    def limit(self, scope: Scope) -> tuple[int, str]:
        """The body limit of a request's route, and the setting that sets it."""
        path, root = scope["path"], scope.get("root_path", "")
        if root and path.startswith(root):  # served under a prefix: the route is what follows it
            path = path[len(root) :]
        if path.startswith(UPLOAD_PREFIX):
            return self.upload_bytes, "server.max_upload_bytes"
        return self.max_bytes, "server.max_body_bytes"

    def _declared(self, length: str | None, limit: int, setting: str) -> tuple[int, str] | None:
        """(status, message) for a declared length that cannot be read, or None."""
        if length is None:
            return None
        if not length.isdigit():
            return 400, "invalid Content-Length header"
        if int(length) > limit:
            return 413, f"request body is {length} bytes, over the limit of {limit} ({setting})"
        return None

    def _refused(self, status: int) -> None:
        if self.on_refusal is not None:
            self.on_refusal(status)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self.limit(scope)
        refusal = self._declared(Headers(scope=scope).get("content-length"), limit, setting)
        if refusal is not None:
            status, message = refusal
            self._refused(status)
            await error_response(status, message)(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout_s is None else loop.time() + self.timeout_s
        received = 0
        whole = False  # the body is in: later reads wait for the disconnect, with no deadline
        started = False

        async def bounded_receive() -> Message:
            nonlocal received, whole
            if whole or deadline is None:
                message = await receive()
            else:
                try:
                    message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
                except TimeoutError:
                    # Closed after the answer: uvicorn would otherwise read the rest for ever.
                    late = f"request body not received within {self.timeout_s:g} s (server.body_timeout_s)"
                    raise HTTPException(408, late, headers={"Connection": "close"}) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"request body is over the limit of {limit} bytes ({setting})")
                whole = not message.get("more_body", False)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracking_send)
        except HTTPException as e:
            if started or e.status_code not in (408, 413):
                raise
            self._refused(e.status_code)
            await error_response(e.status_code, e.detail, headers=e.headers)(scope, receive, send)
