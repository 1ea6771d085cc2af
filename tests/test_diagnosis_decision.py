"""diagnosis/decision.py: the two rule tables on hand-made signals (no model), and the docs
generated from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragmend.diagnosis.decision import (
    RULES,
    VERDICT_RULES,
    Support,
    decide,
    gated_label,
    label_matches,
    markdown,
    unsupported_by,
    verdict_sure,
)
from ragmend.diagnosis.types import DecisionSignals, FailureType

DOC = Path(__file__).resolve().parents[1] / "docs" / "diagnosis.md"

# The states Algorithm 1 reads that make it decide each type (kappa aside).
RULE_STATES: dict[str, dict[str, Any]] = {
    "NoFailure": {"e_q": "entail", "e_r": "entail"},
    "IE": {"e_q": "neutral", "e_r": "entail"},
    "WR": {"e_q": "entail", "e_r": "neutral"},
    "LEM": {"e_q": "entail", "e_r": "entail", "label_matches": False},
}


def signals(rule: str = "NoFailure", kappa: str = "missing", **kw: Any) -> DecisionSignals:
    return DecisionSignals(kappa=kappa, **{**RULE_STATES[rule], **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kappa", "e_q", "e_r", "matches", "expected"),
    [
        ("conflict", "entail", "entail", None, "WP"),  # WP is checked first
        ("consistent", "neutral", "contradict", None, "IE"),  # IE before WR
        ("missing", "entail", "neutral", None, "WR"),
        ("no_triplet", "contradict", "contradict", None, "WR"),
        ("consistent", "entail", "entail", False, "LEM"),
        ("consistent", "contradict", "entail", True, "NoFailure"),
        ("missing", "entail", "entail", None, "NoFailure"),
    ],
)
def test_without_a_verdict_the_table_is_algorithm_1(
    kappa: str, e_q: str, e_r: str, matches: bool | None, expected: str
) -> None:
    d = decide(DecisionSignals(kappa=kappa, e_q=e_q, e_r=e_r, label_matches=matches))  # type: ignore[arg-type]
    assert d.failure == d.rule_failure == expected


def test_a_label_matches_when_it_says_what_the_evidence_says() -> None:
    assert label_matches("REFUTES", "contradict") and label_matches("supports", "entail")
    assert label_matches("REFUTES", "entail") is False
    assert label_matches(None, "entail") is None and label_matches("MAYBE", "entail") is None


@pytest.mark.parametrize(
    ("unsupported", "rule", "kappa", "answerable", "expected"),
    [
        (False, "IE", "missing", True, "NoFailure"),  # the verdict clears what the rule flagged
        (True, "NoFailure", "missing", True, "WR"),  # ... and flags what it passed
        (True, "NoFailure", "missing", False, "IE"),  # an unsupported answer, evidence that does not answer
        (True, "WR", "missing", False, "IE"),  # ... IE where the evidence does not answer
        (False, "NoFailure", "missing", False, "NoFailure"),  # a supported answer shows it does
        (True, "LEM", "missing", True, "LEM"),  # the rule's type stays where it found one
        (True, "IE", "missing", True, "WR"),  # ... but not IE: with e_q = answerability, the evidence answers
        (False, "NoFailure", "conflict", True, "WP"),  # a conflict with the graph always fails
    ],
)
def test_the_failure_type_with_a_verdict(
    unsupported: bool, rule: str, kappa: str, answerable: bool, expected: str
) -> None:
    assert decide(signals(rule, kappa, unsupported=unsupported, answerable=answerable)).failure == expected


def test_an_abstention_is_ie_or_a_miss_and_an_answer_off_the_question_wr() -> None:
    honest = decide(signals(unsupported=True, abstained=True, answerable=False, sure=True))
    assert (honest.failure, honest.decided_by, honest.grade) == ("IE", "abstained", "confident")
    # Evidence that answers the question: a miss the repair may mend, kept whatever the verdict.
    for sure in (True, False):
        missed = decide(signals(unsupported=True, abstained=True, answerable=True, sure=sure))
        assert (missed.failure, missed.decided_by, missed.grade) == ("WR", "missed_answer", "uncertain")
    # Algorithm 1 alone (no verdict) reads no abstention.
    assert decide(signals(abstained=True)).decided_by == "no_failure"
    off = decide(signals("WR", unsupported=False, off_question="subject"))
    assert off.failure == "WR" and off.decided_by == "off_question"
    assert decide(signals("WR", unsupported=True, answerable=False, off_question="subject")).failure == "IE"
    assert decide(signals("WR", unsupported=False, answerable=False, off_question="subject")).failure == "WR"


def test_an_answer_nothing_in_the_evidence_names_is_ie_where_the_question_is_unanswered() -> None:
    ungrounded = signals("WR", unsupported=False, answerable=False, grounded=False)
    assert decide(ungrounded).decided_by == "unanswered"
    assert decide(signals("WR", unsupported=False, answerable=True, grounded=False)).failure == "NoFailure"


@pytest.mark.parametrize(
    ("rule", "outcome", "addresses", "alone", "expected"),
    [
        ("NoFailure", "disagrees", True, True, "WR"),
        ("IE", "agrees", True, True, "NoFailure"),
        ("WR", "agrees", True, False, "WR"),  # more than the comparison is claimed
        ("WR", "agrees", False, True, "WR"),  # off the question (another relation, say)
        ("IE", "undecided", True, True, "IE"),
        ("NoFailure", None, True, True, "NoFailure"),
    ],
)
def test_the_passages_dates_settle_a_comparison(
    rule: str, outcome: str | None, addresses: bool, alone: bool, expected: FailureType
) -> None:
    off = None if addresses else "relation"
    s = signals(rule, comparison=outcome, only_the_pick=alone, off_question=off)
    assert decide(s).failure == expected
    # A conflict with the graph stands whatever the dates say.
    assert decide(signals(rule, "conflict", comparison=outcome, only_the_pick=alone)).failure == "WP"


def test_the_first_rule_that_applies_decides_and_every_one_that_applies_is_listed() -> None:
    # Dates that disagree with the pick outweigh a supported verdict.
    d = decide(signals(unsupported=False, comparison="disagrees", only_the_pick=True))
    assert d.failure == "WR" and d.decided_by == "comparison_disagrees"
    assert [(s.step, s.failure) for s in d.applied] == [
        ("comparison_disagrees", "WR"),
        ("supported", "NoFailure"),
        ("no_failure", "NoFailure"),
    ]
    # Agreeing alternatives decide nothing; disagreeing ones make the answer WR.
    assert decide(signals(alternatives="agrees", unsupported=False)).decided_by == "supported"
    assert decide(signals(alternatives="disagrees", unsupported=False)).failure == "WR"
    # An answer taking one side of a conflict in the evidence is not reported as supported, even
    # where the dates agree with its pick.
    conflict = decide(signals(unsupported=False, conflict=True, comparison="agrees", only_the_pick=True))
    assert conflict.failure == "WR" and conflict.decided_by == "evidence_conflict"
    # The rule's own type reads the answer without the verdict and the checks of its pick.
    assert decide(signals("IE", unsupported=False)).rule_failure == "IE"
    assert decide(signals(off_question="kind", unsupported=False)).rule_failure == "WR"


def test_the_table_always_decides_and_names_are_unique() -> None:
    assert RULES[-1].applies(signals()) and len({r.name for r in RULES}) == len(RULES)
    assert len({r.name for r in VERDICT_RULES}) == len(VERDICT_RULES)


def test_an_answer_is_unsupported_by_its_score_or_an_overrule() -> None:
    def why(p: float, **features: float) -> tuple[str, ...]:
        return unsupported_by(Support.of(p, 0.46, features, 0.8, 0.1))

    assert why(0.2, backing=0.03) == ("unbacked",)
    assert why(0.2, backing=0.5, refuted=0.5) == ()
    assert why(0.2, refuted=0.9) == ("refuted",) and why(0.5) == ("score",)
    assert why(0.9, refuted=0.86, backing=0.0) == ("score", "refuted", "unbacked")
    # An answer of several sentences: the contradiction of one claim is the score's to weigh.
    assert unsupported_by(Support.of(0.2, 0.46, {"refuted": 0.99}, 0.8, 0.1, sentences=3)) == ()
    # No bar, or no backing recorded (a claim given to check, a task over given text): the score.
    assert unsupported_by(Support.of(0.2, 0.46, {"backing": 0.03, "refuted": 0.99}, None, None)) == ()
    assert unsupported_by(Support.of(0.2, 0.46, {}, 0.8, 0.1)) == ()


def test_label_gate_abstains_only_in_claim_mode_on_ie_and_lem() -> None:
    assert gated_label("claim", "IE", "SUPPORTS") == "NOT ENOUGH INFO"
    assert gated_label("claim", "LEM", "REFUTES") == "NOT ENOUGH INFO"
    assert gated_label("claim", "WR", "SUPPORTS") == "SUPPORTS"
    assert gated_label("qa", "IE", None) is None


def test_the_docs_say_what_the_tables_hold() -> None:
    text = DOC.read_text()
    assert markdown() in text, "run python -m ragmend.diagnosis.rules_doc docs/diagnosis.md"


def test_a_failure_is_confident_where_a_sure_rule_or_a_sure_verdict_decides_it() -> None:
    unsure = signals("WR", unsupported=True, sure=False)
    assert decide(unsure).failure == "WR" and decide(unsure).grade == "uncertain"
    assert decide(signals("WR", unsupported=True, sure=True)).grade == "confident"
    # A sure rule's finding replaces the answer whatever the verdict's score.
    picked = signals("WR", unsupported=False, sure=False, comparison="disagrees")
    assert decide(picked).decided_by == "comparison_disagrees" and decide(picked).grade == "confident"
    # Sources that do not answer the question: as sure as the verdict is of the answer, since the
    # answerability model can be wrong too.
    unanswered = signals("WR", unsupported=True, sure=False, answerable=False)
    assert decide(unanswered).decided_by == "unanswered" and decide(unanswered).grade == "uncertain"
    sure = signals("WR", unsupported=True, sure=True, answerable=False)
    assert decide(sure).decided_by == "unanswered" and decide(sure).grade == "confident"
    # Without a verdict Algorithm 1 decides on discrete states: confident; no failure: no grade.
    assert decide(signals("WR")).grade == "confident"
    assert decide(signals(unsupported=False, sure=False)).grade is None


def test_the_verdict_is_sure_at_the_replace_point_or_by_a_sure_rule() -> None:
    assert verdict_sure(0.7, 0.6, ("score",)) and not verdict_sure(0.5, 0.6, ("score",))
    # No verdict rule is sure today (a refuted claim flagged right answers on DEV): each is graded.
    assert not any(rule.sure for rule in VERDICT_RULES)
    assert not verdict_sure(0.3, 0.6, ("refuted", "unbacked"))
    assert verdict_sure(0.2, None, ("score",))  # no replace point: every flag replaces
