"""The error body of every HTTP route, built in one place (docs/api.md, "Errors").

Every error response comes from `error_response`: the app's exception handlers (ragmend's errors,
including admission's Overloaded and RequestTimeout and the admin and OpenAI routes' InputError;
Starlette's 404/405 and unparsable bodies; request validation; a bug), auth (auth.py) and the
body limit (body_limit.py). The body is OpenAI's shape, schemas.ErrorResponse:

    {"error": {"message": "...", "type": "invalid_request_error", "code": 400}}

- `type`: OpenAI's error type. A ragmend error carries its own (RagmendError.api_type,
  ragmend/errors.py); an error of the HTTP layer gets its status's (`STATUS_TYPES`).
- `code`: the HTTP status, or OpenAI's code where one applies (`model_not_found`, with `param`).
- `error_class`: the ragmend error class, for errors that are one.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse

from ragmend.errors import ApiErrorType, InputError, RagmendError
from ragmend.server.schemas import ErrorBody, ErrorResponse

# The type of an error the HTTP layer answers itself (no ragmend error class): by its status.
STATUS_TYPES: dict[int, ApiErrorType] = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def status_type(status: int) -> ApiErrorType:
    """OpenAI's type for an HTTP status: STATUS_TYPES, else any 4xx is an invalid request and
    anything else a server error."""
    if status in STATUS_TYPES:
        return STATUS_TYPES[status]
    return "invalid_request_error" if 400 <= status < 500 else "server_error"


# Where the error classes of the published set are defined (error_class in a body names one).
PUBLIC_MODULES = frozenset({RagmendError.__module__, __name__})


class ParameterError(InputError):
    """A request field at fault, named in the body's `param` with OpenAI's `code`."""

    api_code = "invalid_value"

    def __init__(self, message: str, param: str | None):
        super().__init__(message)
        self.param = param


class ModelNotFound(ParameterError):
    """A request named a model this server does not serve (OpenAI's 404 model_not_found)."""

    http_status = 404
    api_code = "model_not_found"


class UnsupportedParameter(ParameterError):
    """A request asked for something ragmend does not serve (tools, JSON output...): refused, not
    silently ignored (OpenAI's 400 unsupported_parameter)."""

    api_code = "unsupported_parameter"


def error_response(
    status: int,
    message: str,
    type: ApiErrorType | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    error_class: str | None = None,
    code: str | None = None,
    param: str | None = None,
) -> JSONResponse:
    """The error response. `type` None: the status's (status_type). `code` (OpenAI's, which
    replaces the status in the body) comes with `param`, the request field at fault (None: null)."""
    fields: dict[str, object] = {"message": message, "type": type or status_type(status), "code": status}
    if code is not None:
        fields |= {"code": code, "param": param}
    if error_class is not None:
        fields["error_class"] = error_class
    # Validated against the published model; unset fields (param, error_class) stay out of the body.
    body = ErrorResponse(error=ErrorBody.model_validate(fields)).model_dump(mode="json", exclude_unset=True)
    return JSONResponse(body, status_code=status, headers=dict(headers) if headers else None)


def exception_response(exc: RagmendError) -> JSONResponse:
    """The response for one of ragmend's errors: its status, type and class, and Retry-After
    when it has one."""
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else None
    code, param = (exc.api_code, exc.param) if isinstance(exc, ParameterError) else (None, None)
    return error_response(
        exc.http_status,
        str(exc),
        exc.api_type,
        headers,
        error_class=public_class(exc),
        code=code,
        param=param,
    )


def public_class(exc: RagmendError) -> str:
    """The name of the nearest error class of the published set (ragmend/errors.py and this
    module; docs/api.md's table): a subclass elsewhere (policy's ArmsDisabled...) is named by it,
    so renaming an internal class never changes a response."""
    for cls in type(exc).__mro__:
        if cls.__module__ in PUBLIC_MODULES:
            return cls.__name__
    return RagmendError.__name__
