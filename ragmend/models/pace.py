"""How long a generation on the in-process model is expected to take, from the last ones: its
prompt's evaluation (prompt tokens per second, the prefix llama.cpp reuses included, as it will
be for the next prompt) and its decoding (seconds per call).

A generation that cannot end before its request's deadline is not started
(LocalGGUF._generating): the prompt's evaluation cannot be interrupted, so one started a few
seconds before the deadline is work nobody receives, holding the model from requests that could
still be answered.
"""

from __future__ import annotations

import statistics
from collections import deque

WINDOW = 32  # calls each estimate remembers
MIN_CALLS = 3  # before this many, no estimate: nothing is refused on a guess


class Pace:
    """Measured by the model's own calls; read and written under the model's gate.

    A call's evaluation has a fixed part (the template, the first batch) that a short prompt's
    rate makes look like slow tokens: the rate for a prompt is taken from calls at least half
    its size when there are enough of them."""

    def __init__(self) -> None:
        self._calls: deque[tuple[int, float, float]] = deque(maxlen=WINDOW)  # tokens, prefill_s, decode_s

    def observe(self, prompt_tokens: int, prefill_s: float, decode_s: float) -> None:
        if prompt_tokens > 0 and prefill_s > 0:
            self._calls.append((prompt_tokens, prefill_s, max(0.0, decode_s)))

    def expected_s(self, prompt_tokens: int) -> float | None:
        """The median call's time for a prompt of `prompt_tokens`; None before MIN_CALLS."""
        if len(self._calls) < MIN_CALLS:
            return None
        alike = [c for c in self._calls if 2 * c[0] >= prompt_tokens]
        calls = alike if len(alike) >= MIN_CALLS else list(self._calls)
        rate = statistics.median(tokens / prefill_s for tokens, prefill_s, _ in calls)
        return prompt_tokens / rate + statistics.median(c[2] for c in self._calls)
