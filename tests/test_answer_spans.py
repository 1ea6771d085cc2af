"""Where an answer is unsupported: claims located as character ranges of the answer, given only
for a failing answer, with the real diagnoser on a wrong second sentence."""

from __future__ import annotations

import doctest

from ragmend.diagnosis import answer_spans
from ragmend.diagnosis.answer_spans import claim_range, sentence_ranges, unsupported_spans
from ragmend.diagnosis.types import HypothesisVerdict, NLIState, Verdict
from ragmend.engine import Engine
from ragmend.engine.checking import GivenPassage, given_passages

ANSWER = "The tower is in Paris [1].  It was finished  in 1925 by Edison."


def claim(text: str, state: NLIState = "entail", p: float | None = None) -> HypothesisVerdict:
    return HypothesisVerdict(hypothesis=text, state=state, best_passage=None, scores=(), p_unsupported=p)


def verdict(threshold: float) -> Verdict:
    return Verdict(
        p_unsupported=0.9,
        threshold=threshold,
        unsupported=True,
        rule_failure="WR",
        features={},
        profile="default",
        unsupported_by=("score",),
    )


def test_the_module_examples_run() -> None:
    assert doctest.testmod(answer_spans).failed == 0


def test_sentences_and_claims_keep_the_answer_s_own_characters() -> None:
    ranges = sentence_ranges(ANSWER)
    assert [ANSWER[a:b] for a, b in ranges] == [
        "The tower is in Paris [1].",
        "It was finished  in 1925 by Edison.",
    ]
    # The claim as split_claims gives it: the citation gone (its words are the span), a double
    # space one; a claim found nowhere verbatim is its sentence.
    a, b = claim_range(ANSWER, "The tower is in Paris.", ranges)
    assert ANSWER[a:b] == "The tower is in Paris"
    a, b = claim_range(ANSWER, "The tower stands in Paris.", ranges)
    assert ANSWER[a:b] == "The tower is in Paris [1]."
    a, b = claim_range(ANSWER, "It was finished in 1925 by Edison.", ranges)
    assert ANSWER[a:b] == "It was finished  in 1925 by Edison."
    # A bare answer's claim is the question's statement: the span is the whole answer.
    assert claim_range("  1889 ", "The tower was completed in 1889.") == (2, 6)


def test_only_a_failing_answer_has_spans_and_each_is_its_wanting_claims() -> None:
    claims = [claim("The tower is in Paris.", p=0.1), claim("It was finished in 1925 by Edison.", p=0.8)]
    assert unsupported_spans(ANSWER, claims, failed=False, verdict=verdict(0.5)) == ()
    (span,) = unsupported_spans(ANSWER, claims, failed=True, verdict=verdict(0.5))
    assert (span.claim, span.p_unsupported, span.text) == (1, 0.8, ANSWER[span.start : span.end])
    assert span.text.startswith("It was finished")
    # No claim reaches the threshold (the answer fails on what no claim shows): the weakest.
    (weakest,) = unsupported_spans(ANSWER, claims, failed=True, verdict=verdict(0.95))
    assert weakest.claim == 1
    # Without a verdict: every claim no passage entails.
    states = [
        claim("The tower is in Paris.", "contradict"),
        claim("It was finished in 1925 by Edison.", "neutral"),
    ]
    assert [s.claim for s in unsupported_spans(ANSWER, states, failed=True, verdict=None)] == [0, 1]


def test_the_diagnoser_points_at_the_wrong_sentence(engine: Engine) -> None:
    passage = (
        "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the company of "
        "Gustave Eiffel and completed in 1889 for the World's Fair."
    )
    answer = "The Eiffel Tower is a wrought-iron lattice tower in Paris. Thomas Edison designed it in 1925."
    passages = given_passages([GivenPassage(passage)])
    d = engine.diagnoser.diagnose("When was the Eiffel Tower completed?", passages, answer)
    assert d.failure != "NoFailure"
    assert [s.text for s in d.unsupported_spans] == ["Thomas Edison designed it in 1925."]
    right = engine.diagnoser.diagnose(
        "When was the Eiffel Tower completed?", passages, "It was completed in 1889."
    )
    assert right.failure == "NoFailure" and right.unsupported_spans == ()
