"""Choices of attribute ("Which company is based in Kentucky, A or B?", diagnosis/alternatives.py):
the answer's claim with the other alternative in its place, and what the two supports decide."""

from __future__ import annotations

import pytest

from ragmend.diagnosis.alternatives import (
    check_alternatives,
    choice_statement,
    swap_alternative,
    without_echo,
)
from ragmend.diagnosis.types import HypothesisVerdict, PassageScores

KENTUCKY = "Which company is based in Kentucky, Vocelli Pizza or Fazoli's?"


@pytest.mark.parametrize(
    ("question", "response", "picked", "other"),
    [
        (KENTUCKY, "Vocelli Pizza is based in Kentucky.", 0, "Fazoli's is based in Kentucky."),
        (KENTUCKY, "Fazoli's is based in Kentucky.", 1, "Vocelli Pizza is based in Kentucky."),
        # A bare span is swapped as a span; the diagnoser reads both as statements.
        ("Which is in the pop genre, Capital Cities or Tweaker?", "Tweaker", 1, "Capital Cities"),
        # The alternative as the question words it ("the Scotch Collie"), capitalised where it
        # opens the sentence.
        (
            "Which dog's ancestors include Gordon and Irish Setters: the Manchester Terrier or the "
            "Scotch Collie?",
            "The Manchester Terrier includes Gordon and Irish Setters.",
            0,
            "The Scotch Collie includes Gordon and Irish Setters.",
        ),
    ],
)
def test_the_answer_with_the_other_alternative(question: str, response: str, picked: int, other: str) -> None:
    swap = swap_alternative(question, response)
    assert swap is not None
    assert swap.picked == picked
    assert swap.other_response == other


@pytest.mark.parametrize(
    ("question", "response"),
    [
        # Comparisons: no single passage holds both facts, and swapping makes "B is older than A".
        ("Which band has more constant members, Lilys or Ratatat?", "Lilys has more constant members."),
        ("Who is younger, Keisuke Kuwata or Moya Brennan?", "Moya Brennan is younger than Keisuke Kuwata."),
        ("Which band was formed first, Lit or Adorable?", "Lit was formed first."),
        # An answer naming both alternatives, or neither, or saying yes: nothing to swap.
        (KENTUCKY, "Fazoli's, not Vocelli Pizza, is based in Kentucky."),
        (KENTUCKY, "Papa John's is based in Kentucky."),
        ("Is Fazoli's based in Kentucky?", "Yes, Fazoli's is based in Kentucky."),
    ],
)
def test_no_swap(question: str, response: str) -> None:
    assert swap_alternative(question, response) is None


def test_a_bare_answer_to_a_choice_as_its_statement() -> None:
    assert choice_statement("Which is in the pop genre, Capital Cities or Tweaker?", "Tweaker") == (
        "Tweaker is in the pop genre."
    )
    assert choice_statement(KENTUCKY, "Fazoli's") == "Fazoli's is based in Kentucky."
    assert choice_statement("When was Marie Curie born?", "1867") is None


def _claim(entail: float, joint: float = 0.0) -> HypothesisVerdict:
    scores = (
        PassageScores(passage="p#0", entail=entail, neutral=1 - entail, contradict=0.0),
        PassageScores(passage="joint", entail=joint, neutral=1 - joint, contradict=0.0),
    )
    return HypothesisVerdict(hypothesis="a claim", state="neutral", best_passage="p#0", scores=scores)


def test_what_the_two_supports_decide() -> None:
    swap = swap_alternative(KENTUCKY, "Vocelli Pizza is based in Kentucky.")
    assert swap is not None
    # The DEV answer: its own claim hardly supported, the other's entailed by Fazoli's passage.
    check = check_alternatives(swap, _claim(0.02), _claim(0.91), entail=0.4)
    assert (check.outcome, check.support) == ("disagrees", (0.02, 0.91))
    assert check_alternatives(swap, _claim(0.91), _claim(0.02), entail=0.4).outcome == "agrees"
    assert check_alternatives(swap, _claim(0.95), _claim(0.95), entail=0.4).outcome == "undecided"
    assert check_alternatives(swap, _claim(0.1), _claim(0.2), entail=0.4).outcome == "undecided"
    # The joint premise never counts: two passages read together may hold both alternatives.
    assert check_alternatives(swap, _claim(0.02), _claim(0.1, joint=0.9), entail=0.4).outcome == "undecided"
    # Support is given in the order the question offers the alternatives.
    other = swap_alternative(KENTUCKY, "Fazoli's is based in Kentucky.")
    assert other is not None
    assert check_alternatives(other, _claim(0.9), _claim(0.02), entail=0.4).support == (0.02, 0.9)


def test_an_echo_of_the_other_alternative_is_no_claim() -> None:
    """The small generator repeats the question's tail after its pick; what it claims is what
    comes before. A tail that follows no named alternative is left as it is."""
    question = "Which director had the longest career, Alain Resnais or Scott Sidney?"
    assert without_echo(question, "Scott Sidney had the longest career, Alain Resnais.") == (
        "Scott Sidney had the longest career."
    )
    assert (
        without_echo(question, "Scott Sidney had the longest career.")
        == "Scott Sidney had the longest career."
    )
    odd = "Adam Latiff included more previously-known figures when it was formed, !!!"
    assert without_echo("Which band included more figures, !!! or Puddle of Mudd?", odd) == odd
    assert without_echo("Who directed Jaws?", "Steven Spielberg, Jaws.") == "Steven Spielberg, Jaws."
