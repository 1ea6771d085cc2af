"""Ending a generation caught in a loop.

A small model decoding greedily can fall into a cycle and repeat it to the token limit: asked
"In which state is Paterson?", the default 0.5B generator answered "Paterson, New Jersey, New
Jersey, New Jersey, ..." for its whole 128 tokens, and the diagnosis passed it. A repetition
penalty would prevent that, but it changes every generation (names the question repeats are
penalised too) and so every answer the verdict was fitted on; this guard changes nothing until
a cycle has repeated `LOOP_REPEATS` times, then ends the sequence and trims the copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The longest cycle looked for, in tokens, and how many times in a row it must occur: a unit of
# one token needs more copies ("no, no, no" is a loop of three tokens, "very very very" may not be).
MAX_PERIOD = 16
LOOP_REPEATS = 3
SINGLE_TOKEN_REPEATS = 6


class LoopGuard:
    """A llama.cpp logits processor that forces end-of-sequence once the generated tokens end
    with one unit repeated (`LOOP_REPEATS` copies of a unit of 2 to `MAX_PERIOD` tokens, or
    `SINGLE_TOKEN_REPEATS` of one token) and the unit holds a letter (a Markdown table's "---|"
    or a row of zeros is no loop of words). `unit` is then the repeated text, for `trim`."""

    def __init__(self, eos: int, detokenize: Callable[[list[int]], str]) -> None:
        self._eos = eos
        self._detokenize = detokenize
        self._start: int | None = None
        self.unit: str | None = None  # the repeated text, once the guard has ended a loop

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np

        if self._start is None:
            self._start = len(input_ids)  # the prompt: only what follows it is looked at
            return scores
        if self.unit is None and (found := self._loop(list(input_ids[self._start :]))) is not None:
            self.unit = found
        if self.unit is not None:
            scores[:] = -np.inf
            scores[self._eos] = 0.0
        return scores

    def _loop(self, generated: list[int]) -> str | None:
        for period in range(1, MAX_PERIOD + 1):
            copies = SINGLE_TOKEN_REPEATS if period == 1 else LOOP_REPEATS
            if len(generated) < period * copies:
                break
            tail = generated[-period * copies :]
            unit = tail[-period:]
            if all(tail[i * period : (i + 1) * period] == unit for i in range(copies - 1)):
                text = self._detokenize(unit)
                if any(c.isalpha() for c in text):
                    return text
        return None

    def trim(self, text: str) -> str:
        """The text with its loop cut to one copy (`trim_repeats`); as it is where the guard did
        not stop the generation."""
        if self.unit is None:
            return text
        return trim_repeats(text, self.unit)


def trim_repeats(text: str, unit: str) -> str:
    """`text` with its loop cut to one copy. The loop is the longest end of the text that
    repeats with the unit's length as its period (the unit as the tokens fell may start anywhere
    in the cycle: " Jersey, New" of "New Jersey, New Jersey, New ..."); one period of it is kept
    from where it starts, and a separator it then ends with goes ("Paterson, New Jersey, New
    Jersey, New Jersey" -> "Paterson, New Jersey"). A text that does not end in two periods of
    the loop is returned as it is."""
    period = len(unit)
    start = len(text) - period  # the loop covers text[start:] once the walk below is done
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    if period == 0 or len(text) - start < 2 * period:
        return text
    return text[: start + period].rstrip(" ,;:-\n")
