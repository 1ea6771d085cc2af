"""The repair budgets: one value shared by the actions' masking, the policy's reward and the engine.

The paper states memory in MB of 2^20 bytes (its reference code divides bytes by 2^20), and so
does every figure ragmend reports.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1 << 20


@dataclass(frozen=True)
class Budgets:
    """Per-action budgets (the paper's: 3 s latency, 6 MB additional VRAM), or what is left of
    them for one repair pass."""

    latency_s: float = 3.0
    memory_bytes: float = 6 * MB

    def __post_init__(self) -> None:
        if not (self.latency_s > 0 and self.memory_bytes > 0):
            raise ValueError(f"budgets must be > 0, got {self.latency_s} s and {self.memory_bytes} bytes")

    def scaled(self, factor: float) -> Budgets:
        if not factor > 0:
            raise ValueError(f"budget scale must be > 0, got {factor}")
        return Budgets(self.latency_s * factor, self.memory_bytes * factor)
