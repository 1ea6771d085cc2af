"""The loop guard of the in-process generator (ragmend/models/loop_guard.py): it ends a
generation whose tokens repeat one unit, and trims the copies; it changes nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from ragmend.models.loop_guard import LOOP_REPEATS, LoopGuard, trim_repeats
from ragmend.models.registry import ModelRegistry

# A toy vocabulary: token ids as the text pieces a tokenizer would give back.
PIECES = {1: "Paterson", 2: ",", 3: " New", 4: " Jersey", 5: "---", 6: "|", 7: " very", 9: "</s>"}
EOS = 9


def detokenize(ids: list[int]) -> str:
    return "".join(PIECES[i] for i in ids)


def run(guard: LoopGuard, prompt: list[int], generated: list[int]) -> int | None:
    """Feed the guard the steps of a generation; the step (index into `generated`) at which it
    forced end-of-sequence, or None."""
    for step in range(len(generated) + 1):
        scores = np.zeros(10)
        out = guard(np.array(prompt + generated[:step]), scores)
        if np.isneginf(out).sum() == 9 and out[EOS] == 0.0:
            return step
    return None


def test_a_repeated_phrase_ends_the_generation_and_is_trimmed_to_one_copy() -> None:
    guard = LoopGuard(EOS, detokenize)
    loop = [1, 2] + [3, 4, 2] * 6  # "Paterson, New Jersey, New Jersey, ..."
    stopped = run(guard, [7, 7], loop)
    # Stopped as soon as a three-token unit was there three times: ", New Jersey" from the first
    # comma on (token 10), before the third " New Jersey," was complete.
    assert stopped == 1 + 3 * LOOP_REPEATS
    assert guard.unit == ", New Jersey"
    assert guard.trim(detokenize(loop[:stopped])) == "Paterson, New Jersey"


def test_text_without_a_loop_is_left_alone() -> None:
    guard = LoopGuard(EOS, detokenize)
    # Two copies are no loop; the prompt's own repetition is not looked at.
    assert run(guard, [3, 4, 3, 4, 3, 4, 3, 4], [1, 2, 3, 4, 2, 3, 4]) is None
    assert guard.unit is None
    assert guard.trim("Paterson, New Jersey, New Jersey") == "Paterson, New Jersey, New Jersey"


def test_a_repeated_unit_without_letters_is_no_loop_of_words() -> None:
    # A Markdown table's rule ("---|---|---|") repeats by design.
    assert run(LoopGuard(EOS, detokenize), [1], [6] + [5, 6] * 8) is None
    # One word needs more copies than a phrase: "very very very" is English.
    guard = LoopGuard(EOS, detokenize)
    assert run(guard, [1], [7, 7, 7]) is None
    assert run(LoopGuard(EOS, detokenize), [1], [7] * 10) == 6


def test_trim_keeps_one_copy_whichever_token_the_cycle_was_caught_at() -> None:
    assert trim_repeats("A, B, B, B", ", B") == "A, B"
    assert trim_repeats("A, B, B, B,", " B,") == "A, B"
    # Caught mid-phrase: the loop started at the text's first word.
    assert trim_repeats("New Jersey, New Jersey, New Jersey, New", " Jersey, New") == "New Jersey"
    assert trim_repeats("It is very very very very very very", " very") == "It is very"
    # No two periods of the loop at the end (the text was cut elsewhere): left alone.
    assert trim_repeats("A, B", ", B") == "A, B"
    assert trim_repeats("", "x") == ""


@pytest.mark.generator
def test_the_real_generator_caught_in_a_loop_stops_and_answers_one_copy(registry: ModelRegistry) -> None:
    # The tiny generator continues a repeated list greedily: without the guard it answers "New
    # Jersey, New Jersey, New Jersey, New Jersey," (12 tokens; the 0.5B default's loop on "In which
    # state is Paterson?" ran to the token limit).
    out = registry.generator.chat(
        [{"role": "user", "content": "List the states: New Jersey, New Jersey, New Jersey, New Jersey,"}],
        max_tokens=64,
        temperature=0.0,
    )
    assert out.completion_tokens <= 12 and out.finish_reason == "stop"
    assert out.text.count("New Jersey") == 1, out.text
