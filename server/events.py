"""The server's events (ragmend/instrumentation.py): what admission and the HTTP layer did with a
request beside answering it.

    SlotsChanged        model-work slots taken and requests waiting for one (admission)
    RequestRefused      a 503 before any model work, and where it was decided
    RequestCancelled    work stopped by a deadline or a disconnect, and where it stopped
    GeneratorTimeSpent  generator seconds a request used, answered or wasted
    ServiceEstimated    an estimate admission predicts with, as measured
    ErrorAnswered       a request answered with an error (its kind, status and model role)
    ConfigChanged       a runtime configuration change (admin request, changed file, SIGHUP)

The closed sets of the fields a metric labels with are named beside them, here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmend.errors import METRIC_KINDS, RagmendError
from ragmend.instrumentation import Event
from ragmend.models.registry import ROLES

MAX_LABELLED = 8  # first-pass estimates told per running count up to this (the last: "8 or more")
REFUSED_AT = ("arrival", "queue", "start")
CANCEL_REASONS = ("deadline", "disconnect")
STOPPED_AT = ("retrieval", "generator", "diagnosis", "repair", "finished", "failed", "other")
ESTIMATES = (*(f"first_pass_{n}" for n in range(1, MAX_LABELLED + 1)), "slot_interval")
GENERATOR_OUTCOMES = ("answered", "wasted")
# Error kinds: ragmend's own errors (each class carries its kind: RagmendError.metric_kind,
# ragmend/errors.py), the HTTP layer's errors, and anything unexpected. "auth": a missing or
# invalid key (401) or a key without the scope (403), server/auth.py.
ERROR_KINDS = (*METRIC_KINDS, "http", "validation", "auth", "internal")
MODEL_ROLES = (*ROLES, "rebel", "unknown")
CHANGE_SOURCES = ("admin", "file", "signal")
# The model role an error kind tells of (a ModelUnavailable does not say which role failed).
_ROLE_OF_KIND = {"generator": "generator", "generator_timeout": "generator", "model_unavailable": "unknown"}


@dataclass(frozen=True)
class SlotsChanged(Event):
    running: int  # slots taken: requests working, and cancelled work still stopping
    waiting: int


@dataclass(frozen=True)
class RequestRefused(Event):
    at: str  # REFUSED_AT


@dataclass(frozen=True)
class RequestCancelled(Event):
    reason: str  # CANCEL_REASONS
    stopped_at: str  # STOPPED_AT


@dataclass(frozen=True)
class GeneratorTimeSpent(Event):
    outcome: str  # GENERATOR_OUTCOMES: the answer reached its client, or it did not
    seconds: float


@dataclass(frozen=True)
class ServiceEstimated(Event):
    estimate: str  # ESTIMATES
    seconds: float


@dataclass(frozen=True)
class ErrorAnswered(Event):
    kind: str  # ERROR_KINDS
    status: int  # the HTTP status answered
    role: str | None = None  # MODEL_ROLES: the model role that failed, for a model's error

    @classmethod
    def of_exception(cls, exc: BaseException, status: int) -> ErrorAnswered:
        """The error an exception answered: its class's kind ("internal" for anything not
        ragmend's), and the generator role for a generator's error."""
        kind = exc.metric_kind if isinstance(exc, RagmendError) else "internal"
        return cls(kind, status, _ROLE_OF_KIND.get(kind))


@dataclass(frozen=True)
class ConfigChanged(Event):
    source: str  # CHANGE_SOURCES
    ok: bool
