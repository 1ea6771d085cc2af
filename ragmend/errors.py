"""Error types shared by every layer, and the one wording of a validation error.

Each error carries a message meant for the person who caused it, and what each surface needs
to report it: the HTTP status and the error body's `type` (server/errors.py builds the body), the
`kind` that ragmend_errors_total counts it under (server/events.py ErrorAnswered), and the CLI's exit code. No
layer below the server and the CLI needs to know about any of them. A subclass inherits all of
them unless it names its own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, ClassVar, Literal, Protocol

# The `type` of an HTTP error body: OpenAI's error types (docs/api.md, "Errors", has the table).
ApiErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "rate_limit_error",
    "server_error",
]


class RagmendError(Exception):
    """Base class: anything ragmend raises on purpose."""

    http_status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1
    api_type: ClassVar[ApiErrorType] = "server_error"
    # The `kind` label of ragmend_errors_total (a closed set: METRIC_KINDS below).
    metric_kind: ClassVar[str] = "ragmend"
    # Seconds a client should wait before retrying (the HTTP Retry-After header); None: no header.
    retry_after_s: int | None = None


class InputError(RagmendError):
    """The caller's input is invalid (empty query, missing path, undecodable file...)."""

    http_status = 400
    exit_code = 2
    api_type: ClassVar[ApiErrorType] = "invalid_request_error"
    metric_kind = "input"


class PayloadTooLarge(InputError):
    http_status = 413
    metric_kind = "payload_too_large"


class NotFound(InputError):
    """A named thing does not exist (a collection, a document)."""

    http_status = 404
    api_type = "not_found_error"
    metric_kind = "not_found"


class Gone(NotFound):
    """A named thing existed but is no longer kept (feedback on an answer past its time to vote)."""

    http_status = 410
    metric_kind = "gone"


class Conflict(InputError):
    """The request does not fit the current state (a collection that exists, one with no documents)."""

    http_status = 409
    metric_kind = "conflict"


class Forbidden(InputError):
    """The caller may not do this with its key (a vote on an answer another key received)."""

    http_status = 403
    api_type = "permission_error"
    metric_kind = "forbidden"


class RateLimited(InputError):
    """The caller sent more than its rate allows (votes per key); it may retry after Retry-After."""

    http_status = 429
    api_type = "rate_limit_error"
    metric_kind = "rate_limited"

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ConfigError(RagmendError):
    """The configuration is invalid; the message names the offending key."""

    http_status = 500
    exit_code = 2
    metric_kind = "config"


class ModelUnavailable(RagmendError):
    """A model file is missing or corrupt; the message names the package that ships it."""

    http_status = 503
    exit_code = 3
    metric_kind = "model_unavailable"


class NotReady(RagmendError):
    """The service has not finished loading (models or index)."""

    http_status = 503
    exit_code = 3
    metric_kind = "not_ready"
    retry_after_s = 5


class IndexMissing(RagmendError):
    """No index has been built yet at the configured location."""

    http_status = 503
    exit_code = 2
    metric_kind = "index_missing"


class GeneratorError(RagmendError):
    """The generator call failed or timed out."""

    http_status = 502
    exit_code = 4
    metric_kind = "generator"


class GeneratorTimeout(GeneratorError):
    """A generator call ran past models.generator.timeout_s."""

    http_status = 504
    metric_kind = "generator_timeout"


class RequestTimeout(RagmendError):
    """A request ran past server.request_timeout_s (its work may still finish in the background)."""

    http_status = 504
    exit_code = 4
    metric_kind = "request_timeout"


class Cancelled(RequestTimeout):
    """The request was cancelled: its deadline passed, or its client went away. Its work stopped
    at `stage` (ragmend/cancel.py); `generator_s` is the generator's work for it by then (the
    in-process model held, or remote calls' time)."""

    def __init__(self, reason: str, stage: str, generator_s: float = 0.0):
        why = {"deadline": "ran past its deadline", "disconnect": "lost its client"}.get(reason, reason)
        super().__init__(f"the request {why}; its work stopped at {stage}")
        self.reason = reason
        self.stage = stage
        self.generator_s = generator_s


class ClientDisconnected(RagmendError):
    """The client closed its connection before the answer: the request's work was cancelled.
    Nobody reads the response; 499 is the status proxies log for it."""

    http_status = 499
    exit_code = 4
    metric_kind = "client_disconnected"


class Overloaded(RagmendError):
    """Every worker slot is busy and the wait queue is full (or the request waited past its deadline)."""

    http_status = 503
    exit_code = 3
    metric_kind = "overloaded"

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StoreUnavailable(RagmendError):
    """The shared store (PostgreSQL) cannot be reached or cannot serve right now."""

    http_status = 503
    exit_code = 3
    metric_kind = "store"
    retry_after_s = 2  # a restarting database or a failover: seconds, not minutes


class PeerUnavailable(RagmendError):
    """Another service a command talks to (a chat UI, a ragmend server) cannot be reached, or
    failed to answer."""

    http_status = 502
    exit_code = 3


def _descendants(cls: type[RagmendError]) -> list[type[RagmendError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _descendants(sub)
    return out


# Every metric kind of the classes above, computed when this module is imported (so before any
# subclass elsewhere exists): a subclass defined in another module inherits its base's kind, and a
# new kind belongs here, on a class of this module.
METRIC_KINDS: tuple[str, ...] = tuple(dict.fromkeys(c.metric_kind for c in _descendants(RagmendError)))


class _Invalid(Protocol):
    """A pydantic ValidationError or FastAPI's RequestValidationError: a list of error details."""

    def errors(self) -> Sequence[Any]: ...


def describe_validation(
    err: _Invalid, prefix: str = "", drop: Collection[str] = (), empty: str = "(root)"
) -> str:
    """Validation errors as one line, `key.path: message; ...`, the wording of every configuration
    and request error: each location joined with dots under `prefix`, the parts in `drop` left
    out (the HTTP layer's "body"), `empty` where nothing of the location is left."""
    parts = []
    for e in err.errors():
        if e.get("type") == "json_invalid":
            # FastAPI's location is ("body", character offset): "0: JSON decode error" says nothing.
            at = e.get("loc", ())[-1:]
            reason = (e.get("ctx") or {}).get("error", "")
            where = f" at character {at[0]}" if at and isinstance(at[0], int) else ""
            parts.append(f"the request body is not valid JSON ({reason or 'decode error'}{where})")
            continue
        key = ".".join(str(p) for p in (prefix, *e.get("loc", ())) if p != "" and p not in drop)
        parts.append(f"{key or empty}: {e.get('msg')}")
    return "; ".join(parts)
