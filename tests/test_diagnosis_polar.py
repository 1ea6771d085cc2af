"""A bare yes or no read as what it asserts (diagnosis/polar.py): the question's statement as its
atomic claims, and a "No" judged by the claim the evidence contradicts most."""

from __future__ import annotations

import pytest

from ragmend.diagnosis.diagnoser import response_claims
from ragmend.diagnosis.options import shipped_options
from ragmend.diagnosis.polar import denial, polar_reading, statement_claims
from ragmend.diagnosis.types import HypothesisVerdict, PassageScores

STATEMENTS = [
    (
        "Were H. G. Wells and Rubén Darío both English?",
        ("H. G. Wells was English.", "Rubén Darío was English."),
    ),
    (
        "Have Marc Rosset and Max Mirnyi both been professional tennis players?",
        (
            "Marc Rosset has been a professional tennis player.",
            "Max Mirnyi has been a professional tennis player.",
        ),
    ),
    (
        'Are both "Cooking Light" and "Vibe" magazines?',
        ('"Cooking Light" is a magazine.', '"Vibe" is a magazine.'),
    ),
    (
        "Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?",
        (
            "Elko Regional Airport is located in Michigan.",
            "Gerald R. Ford International Airport is located in Michigan.",
        ),
    ),
    # Gapped: the second clause shares the first one's verb.
    (
        "Is Karjiang a mountain and Sherpi Kangri a mountain peak?",
        ("Karjiang is a mountain.", "Sherpi Kangri is a mountain peak."),
    ),
    # Said of the two together: one claim.
    (
        "are the documentaries Out of Place and The Mosuo Sisters by the same director ?",
        ("The documentaries Out of Place and The Mosuo Sisters are by the same director.",),
    ),
    ("Is the Pacific Ocean larger than the Atlantic?", ("The Pacific Ocean is larger than the Atlantic.",)),
    (
        "Are the Beatles and the Rolling Stones both English bands?",
        ("The Beatles is an English band.", "The Rolling Stones is an English band."),
    ),
]


@pytest.mark.parametrize(("question", "claims"), STATEMENTS)
def test_a_yes_no_question_reads_as_the_claims_its_yes_makes(question: str, claims: tuple[str, ...]) -> None:
    assert statement_claims(question) == claims


@pytest.mark.parametrize(
    "question",
    [
        "Is Paris or Lyon bigger?",  # a choice: neither yes nor no answers it
        "Who directed Jaws?",  # not asked yes or no
        "Did the band that recorded Help! tour Japan?",  # no name opens its subject
        "Is it?",
    ],
)
def test_a_question_it_cannot_read_keeps_the_template(question: str) -> None:
    assert statement_claims(question) == ()
    assert polar_reading(question, "Yes") is None


def test_only_a_bare_yes_or_no_is_read_so() -> None:
    question = "Were H. G. Wells and Rubén Darío both English?"
    assert polar_reading(question, "No.") == polar_reading(question, " no ")
    reading = polar_reading(question, "No.")
    assert reading is not None and reading.denied
    yes = polar_reading(question, "Yes!")
    assert yes is not None and not yes.denied and yes.claims == reading.claims
    assert polar_reading(question, "No, Rubén Darío was Nicaraguan.") is None
    # What the verdict judges: not the template "The answer to the question ... is No.", but the
    # claims a "Yes" makes, and for a "No" one denial of them all.
    assert response_claims(question, "Yes", max_claims=8) == list(reading.claims)
    denied = "It is not true that H. G. Wells was English and Rubén Darío was English."
    assert reading.judged == (denied,) and response_claims(question, "No", max_claims=8) == [denied]


def _verdict(hypothesis: str, *scores: tuple[str, float, float]) -> HypothesisVerdict:
    rows = tuple(
        PassageScores(passage=p, entail=e, neutral=round(1 - e - c, 4), contradict=c) for p, e, c in scores
    )
    return HypothesisVerdict(hypothesis=hypothesis, state="neutral", best_passage=None, scores=rows)


def test_a_no_holds_where_the_evidence_contradicts_one_of_the_claims() -> None:
    t = shipped_options().thresholds
    wells = _verdict("H. G. Wells was English.", ("wells", 0.93, 0.02), ("dario", 0.01, 0.05))
    dario = _verdict("Rubén Darío was English.", ("wells", 0.02, 0.03), ("dario", 0.01, 0.91))
    denied = denial([wells, dario], t)
    assert denied.hypothesis == "It is not true that H. G. Wells was English and Rubén Darío was English."
    assert denied.state == "entail" and denied.best_passage == "dario"
    by_passage = {s.passage: s for s in denied.scores}
    # Each passage: entailed where it contradicts one claim, contradicted where it states them all.
    assert (by_passage["dario"].entail, by_passage["dario"].contradict) == (0.91, 0.01)
    assert (by_passage["wells"].entail, by_passage["wells"].contradict) == (0.03, 0.02)


def test_a_no_to_what_the_evidence_states_is_contradicted() -> None:
    t = shipped_options().thresholds
    airport = _verdict("Elko Regional Airport is located in Nevada.", ("elko", 0.95, 0.01))
    denied = denial([airport], t)
    assert denied.state == "contradict" and denied.best_passage == "elko"


def test_two_passages_read_together_deny_nothing() -> None:
    """A joint premise's contradiction of a claim is no passage's denial of it."""
    t = shipped_options().thresholds
    joint = _verdict("Rubén Darío was English.", ("joint", 0.0, 0.97), ("dario", 0.0, 0.2))
    denied = denial([joint], t)
    assert denied.state != "entail" and [s.passage for s in denied.scores] == ["dario"]
