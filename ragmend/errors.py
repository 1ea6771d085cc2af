"""Error types shared by every layer.

Each error carries a message meant for the person who caused it; the server maps them to HTTP
status codes and the CLI to exit codes, so no layer below needs to know about either.
"""

from __future__ import annotations


class RagmendError(Exception):
    """Base class: anything ragmend raises on purpose."""

    http_status = 500
    exit_code = 1


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


class IndexMissing(RagmendError):
    """No index has been built yet at the configured location."""

    http_status = 503
    exit_code = 2


class GeneratorError(RagmendError):
    """The generator call failed or timed out."""

    http_status = 502
    exit_code = 4
