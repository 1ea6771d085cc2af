"""The app's exception handlers: every error answered in the API's shape (server/errors.py) and
told as an event (server/events.py ErrorAnswered)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragmend.errors import RagmendError, describe_validation
from ragmend.instrumentation import Events
from ragmend.server.errors import error_response, exception_response
from ragmend.server.events import ErrorAnswered

log = logging.getLogger("ragmend.server")


def install_handlers(app: FastAPI, events: Events) -> None:
    @app.exception_handler(Exception)
    async def unhandled_error(request: Request, exc: Exception) -> JSONResponse:
        # A bug, not bad input: logged with its traceback, counted, and answered in the API's shape
        # (the message names no internals).
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        events.emit(ErrorAnswered("internal", 500))
        return error_response(500, "internal server error (logged)")

    @app.exception_handler(RagmendError)
    async def ragmend_error(request: Request, exc: RagmendError) -> JSONResponse:
        events.emit(ErrorAnswered.of_exception(exc, exc.http_status))
        return exception_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own errors (404, 405, an unparsable body) in the same shape as ours.
        events.emit(ErrorAnswered("http", exc.status_code))
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if message == "There was an error parsing the body":
            message = "the request body is not valid UTF-8 JSON"
        return error_response(exc.status_code, message, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        events.emit(ErrorAnswered("validation", 400))
        message = describe_validation(exc, drop={"body"}, empty="body")
        return error_response(400, message or "invalid request", "invalid_request_error")
