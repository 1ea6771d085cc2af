"""The value one generator call returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Generation:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str | None = None
    cached: bool = False  # served from the generation cache; `seconds` is the original call's
    # Each answer token's log-probability as the engine reported it; None where it reports none
    # (an engine without logprobs, or a cache entry written before they were recorded).
    token_logprobs: tuple[float, ...] | None = None
