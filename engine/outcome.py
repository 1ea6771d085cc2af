"""What one request produces: the answer, its diagnosis and, for a failed answer, the repair."""

from __future__ import annotations

from dataclasses import dataclass

from ragmend.diagnosis.types import Diagnosis
from ragmend.engine.repair import RepairSkip, RepairTrace
from ragmend.rag.types import Answer


@dataclass(frozen=True)
class Outcome:
    answer: Answer  # the answer the reply carries (the repaired one when it is better supported)
    diagnosis: Diagnosis | None  # its diagnosis; None when diagnosis.enabled is off
    first: Answer | None = None  # the first pass, when a repair ran
    first_diagnosis: Diagnosis | None = None
    repair: RepairTrace | RepairSkip | None = None  # None: no failure, or repair is off
    seconds: float = 0.0  # the whole request: first pass, diagnosis, repair
    # Of `seconds`, the time in generator calls (first pass, rewrites, repair pass), the wait for
    # the in-process model's lock included: what is left is ragmend's own work.
    generator_s: float = 0.0
