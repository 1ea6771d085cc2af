"""Error types shared by every layer.

Each error carries a message meant for the person who caused it; the server maps them to HTTP
status codes and the CLI to exit codes, so no layer below needs to know about either.
"""

from __future__ import annotations


class RagmendError(Exception):
    """Base class: anything ragmend raises on purpose."""

    http_status = 500
    exit_code = 1
    # Seconds a client should wait before retrying (the HTTP Retry-After header); None: no header.
    retry_after_s: int | None = None


class InputError(RagmendError):
    """The caller's input is invalid (empty query, missing path, undecodable file...)."""

    http_status = 400
    exit_code = 2


class PayloadTooLarge(InputError):
    http_status = 413


class ConfigError(RagmendError):
    """The configuration is invalid; the message names the offending key."""

    http_status = 500
    exit_code = 2


class ModelUnavailable(RagmendError):
    """A model file is missing or corrupt; the message names the package that ships it."""

    http_status = 503
    exit_code = 3


class NotReady(RagmendError):
    """The service has not finished loading (models or index)."""

    http_status = 503
    exit_code = 3
    retry_after_s = 5


class IndexMissing(RagmendError):
    """No index has been built yet at the configured location."""

    http_status = 503
    exit_code = 2


class GeneratorError(RagmendError):
    """The generator call failed or timed out."""

    http_status = 502
    exit_code = 4


class GeneratorTimeout(GeneratorError):
    """A generator call ran past models.generator.timeout_s."""

    http_status = 504


class RequestTimeout(RagmendError):
    """A request ran past server.request_timeout_s (its work may still finish in the background)."""

    http_status = 504
    exit_code = 4


class Overloaded(RagmendError):
    """Every worker slot is busy and the wait queue is full (or the request waited past its deadline)."""

    http_status = 503
    exit_code = 3

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s
