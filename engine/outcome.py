"""What one request produces: the answer and its diagnosis (and, with issue 5, the repair)."""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.types import Diagnosis
from rag.types import Answer


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    diagnosis: Diagnosis | None  # None when diagnosis.enabled is off
