"""The diagnosis rules on hand-made inputs: aggregation, Algorithm 1, the label gate, EGC, stage
attribution and hypothesis construction. Pure functions: no model needed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ragmend.diagnosis.aggregate import hypothesis_state, signal_state
from ragmend.diagnosis.conflict import conflict_on_claims
from ragmend.diagnosis.egc import egc_features
from ragmend.diagnosis.hypotheses import parse_claim_label, split_claims
from ragmend.diagnosis.options import shipped_options
from ragmend.diagnosis.stage import StageEvidence, attribute_stage
from ragmend.diagnosis.statement import question_statement
from ragmend.diagnosis.types import PassageScores

# The rule's tests read at thresholds of their own, away from the shipped 0.4 / 0.35, so each
# case sits clearly on one side of them.
T = replace(shipped_options().thresholds, entail=0.6, contradict=0.7)


def s(pid: str, e: float, c: float) -> PassageScores:
    return PassageScores(passage=pid, entail=e, neutral=round(1 - e - c, 4), contradict=c)


def test_aggregation_rule_per_hypothesis() -> None:
    assert hypothesis_state("h", [s("a", 0.1, 0.1), s("b", 0.65, 0.0)], T).state == "entail"
    v = hypothesis_state("h", [s("a", 0.1, 0.75), s("b", 0.3, 0.1)], T)
    assert v.state == "contradict" and v.best_passage == "a"
    # Entailment wins over contradiction from another passage: the answer is supported.
    assert hypothesis_state("h", [s("a", 0.0, 0.9), s("b", 0.61, 0.0)], T).state == "entail"
    # Just under both thresholds: neutral, with no deciding passage.
    v = hypothesis_state("h", [s("a", 0.59, 0.0), s("b", 0.0, 0.69)], T)
    assert v.state == "neutral" and v.best_passage is None
    assert hypothesis_state("h", [], T).state == "neutral"


def test_signal_state_over_claims() -> None:
    ent, neu, con = (hypothesis_state("h", [x], T) for x in (s("a", 0.9, 0), s("a", 0.2, 0.2), s("a", 0, 1)))
    assert signal_state([ent, ent]) == "entail"
    assert signal_state([ent, neu]) == "neutral"  # every claim needs support
    assert signal_state([ent, neu, con]) == "contradict"  # one false claim is enough
    assert signal_state([]) == "neutral"


def test_a_conflict_needs_one_passage_for_and_another_against_the_same_claim() -> None:
    def negations(pairs: list[tuple[str, str]]) -> list[list[float]]:  # NLI rows: entail, neutral, contradict
        return [[0.05, 0.05, 0.9] if " not " in premise else [0.8, 0.1, 0.1] for premise, _ in pairs]

    passages = [("a", "Paris is the capital."), ("b", "It is old. Paris is not the capital."), ("c", "Lyon.")]
    scores = [s("a", 0.9, 0.0), s("b", 0.05, 0.8), s("c", 0.3, 0.3)]
    claim = hypothesis_state("Paris is the capital.", scores, T)
    found = conflict_on_claims([claim], passages, 0.6, negations)
    assert found is not None and found.strength == 0.8
    assert [(side.passages, side.takes_answer) for side in found.sides] == [(("a",), True), (("b",), False)]
    assert found.sides[1].says == "Paris is not the capital."  # quoted: its most contradicting sentence
    assert found.sides[0].says == "Paris is the capital."  # the answer's side quoted from its passage too
    # Below the bar on either side, or against the joint premise only: passages that merely differ.
    weak = hypothesis_state("h", [s("a", 0.9, 0.0), s("b", 0.05, 0.5)], T)
    joint = hypothesis_state("h", [s("a", 0.9, 0.0), s("joint", 0.0, 0.9)], T)
    assert conflict_on_claims([weak], passages, 0.6, negations) is None
    assert conflict_on_claims([joint], passages, 0.6, negations) is None
    # A passage read whole may contradict where none of its sentences does: no quote says the
    # other side, so there is no conflict to show.
    whole_only = [("a", "Paris is the capital."), ("b", "It is old. It is large."), ("c", "Lyon.")]
    assert conflict_on_claims([claim], whole_only, 0.6, negations) is None
    # A passage the answer follows for another of its claims tells the answer's own account: what
    # it contradicts is one part of that account against another, not the other side.
    from_b = hypothesis_state("It is old.", [s("a", 0.1, 0.0), s("b", 0.9, 0.0)], T)
    assert conflict_on_claims([claim, from_b], passages, 0.6, negations) is None
    unrelated = hypothesis_state("It is old.", [s("a", 0.1, 0.0), s("b", 0.5, 0.0)], T)
    assert conflict_on_claims([claim, unrelated], passages, 0.6, negations) is not None


def test_egc_features_on_a_hand_graph() -> None:
    e = np.eye(4)
    q = e[0]
    evidence = np.stack([e[0], e[1], (e[0] + e[1]) / np.sqrt(2)])  # e0~q, e1 off-topic, e2 both
    claims = np.stack([e[1], e[3]])  # claim 0 supported by e1 and e2, claim 1 by nothing
    f = egc_features(q, evidence, claims, tau=0.4)
    assert f.coverage == 0.5 and f.isolation == 0.5
    assert f.support_density == pytest.approx((2 / 3 + 0) / 2, abs=1e-4)
    # E-E edges: (e0,e2) and (e1,e2) both at cos 0.707.
    assert f.agreement == pytest.approx(0.7071, abs=1e-3)
    assert f.connectivity == 0.5  # q -> e0 -> e2 -> claim 0
    assert f.score == pytest.approx((0.5 + 1 / 3 + 0.5 - 0.5) / 3, abs=1e-3)
    empty = egc_features(q, evidence[:0], claims, tau=0.4)
    assert empty.coverage == 0.0 and empty.isolation == 1.0


def test_stage_cascade() -> None:
    base: dict[str, Any] = dict(reranked=False, on_topic=True, best_query_similarity=0.6, cut_evidence=False)
    assert attribute_stage(StageEvidence(failure="NoFailure", e_q="entail", **base))[0] == "none"
    assert attribute_stage(StageEvidence(failure="WR", e_q="entail", **base))[0] == "generation"
    assert (
        attribute_stage(StageEvidence(failure="IE", e_q="neutral", **(base | {"reranked": True})))[0]
        == "reranking"
    )
    assert (
        attribute_stage(StageEvidence(failure="IE", e_q="neutral", **(base | {"cut_evidence": True})))[0]
        == "chunking"
    )
    assert attribute_stage(StageEvidence(failure="IE", e_q="neutral", **base))[0] == "retrieval"
    stage, reason = attribute_stage(
        StageEvidence(failure="IE", e_q="neutral", **(base | {"on_topic": False}))
    )
    assert stage == "retrieval" and "0.60" in reason


def test_question_statements() -> None:
    assert question_statement("Who directed Jaws?", "Steven Spielberg") == "Steven Spielberg directed Jaws."
    assert question_statement("When was Marie Curie born?", "1867.") == "Marie Curie was born in 1867."
    assert question_statement("What is the capital of France?", "Paris") == "The capital of France is Paris."
    sentence = "Arthur's Magazine was started before First for Women."
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert question_statement(question, sentence) == sentence
    assert question_statement("How many moons has Mars?", "2").startswith("The answer to the question")


@pytest.mark.parametrize(
    ("question", "answer", "statement"),
    [
        # The question phrase's noun runs to the auxiliary; "animated" takes no object.
        (
            "Which American Space Western animated series did Celebrity Home Entertainment release?",
            "BraveStarr",
            "Celebrity Home Entertainment did release BraveStarr.",
        ),
        ("What year did the Beatles break up?", "1970", "The Beatles did break up in 1970."),
        (
            'What type of film are both "500 Years Later" and "Manson"?',
            "documentary",
            'Both "500 Years Later" and "Manson" are documentary.',
        ),
        # A predicate after the auxiliary: the answer is its subject.
        (
            'Which English musician is known for the song "See Yourself"?',
            "George Harrison",
            'George Harrison is known for the song "See Yourself".',
        ),
        ("What is Paris known for?", "its museums", "Paris is known for its museums."),
        ("Which band released Help!?", "The Beatles", "The Beatles released Help!."),
        # The question phrase inside the question: the answer takes its place.
        (
            'Michelle Lewis has written songs for which "Lizzie McGuire" actress?',
            "Hilary Duff",
            "Michelle Lewis has written songs for Hilary Duff.",
        ),
        (
            "The driver lost to which driver in the 2009 NASCAR Nationwide Series?",
            "Kyle Busch",
            "The driver lost to Kyle Busch in the 2009 NASCAR Nationwide Series.",
        ),
        ("Where is the Eiffel Tower located?", "Paris", "The Eiffel Tower is located in Paris."),
    ],
)
def test_a_bare_span_takes_the_question_phrases_place(question: str, answer: str, statement: str) -> None:
    assert question_statement(question, answer) == statement


def test_a_relative_which_is_no_question_phrase() -> None:
    """ "..., which of three stories ..." after a comma is a relative clause: the template stays."""
    question = "No Smoking is based on Quitters, Inc., which of three stories feature the same animal?"
    assert question_statement(question, "cat").startswith("The answer to the question")


def test_claims_and_labels() -> None:
    assert split_claims("Paris is the capital [1]. It has 2 million people [2, 3]. Yes.") == [
        "Paris is the capital.",
        "It has 2 million people.",
    ]
    assert split_claims("") == []
    assert split_claims("It was founded by J. D. Fetzer in 1965. Dr. No is a film.") == [
        "It was founded by J. D. Fetzer in 1965.",
        "Dr. No is a film.",
    ]
    # A generator's lead-in asserts nothing; a head with a name or a number may be part of the claim.
    assert split_claims("The answer is: Quenton Ltd was acquired by Halvard Group in 2015.") == [
        "Quenton Ltd was acquired by Halvard Group in 2015."
    ]
    # A report of what a passage says claims what it reports; its frame and a comment on the
    # checked claim name no fact (NLI read "Passage [1] states that X" as contradicted by X).
    assert split_claims(
        "Passage [1] clearly states that John Frusciante has an active solo career, which directly "
        "supports the claim that he is a musician. According to the passages, he was born in 1970."
    ) == ["John Frusciante has an active solo career.", "He was born in 1970."]
    assert split_claims("The sources say nothing. Passages of the Bible are read aloud.") == [
        "The sources say nothing.",
        "Passages of the Bible are read aloud.",
    ]
    assert split_claims("Phase 2: the trial ended in 2019. It opened at 10:30 am.") == [
        "Phase 2: the trial ended in 2019.",
        "It opened at 10:30 am.",
    ]
    # A volume, a rank, a month: "Vol. 2" was split, and the citation went between them.
    assert split_claims('Gunn directed "Guardians of the Galaxy Vol. 2". Gen. Lee left on Apr. 9, 1865.') == [
        'Gunn directed "Guardians of the Galaxy Vol. 2".',
        "Gen. Lee left on Apr. 9, 1865.",
    ]
    # A name with full stops in it, as the question spells it, is not split (a sample question's
    # answer was cited "Get Cape.[3] Wear Cape.[1] Fly from ...").
    question = "When was the magazine Sam Duckworth got his name Get Cape. Wear Cape. Fly from launched?"
    answer = "Sam Duckworth got his name Get Cape. Wear Cape. Fly from Retro Gamer magazine. It is British."
    assert split_claims(answer, keep=question) == [
        "Sam Duckworth got his name Get Cape. Wear Cape. Fly from Retro Gamer magazine.",
        "It is British.",
    ]
    assert len(split_claims(answer)) == 4
    # Lines are claims of their own; a lead-in line and list markers are not part of any claim.
    overview = "Here is an overview of the cafe:\n\nIt opens at 8 am.\n- It has WiFi\n2. Parking is free."
    assert split_claims(overview) == ["It opens at 8 am.", "It has WiFi", "Parking is free."]
    assert parse_claim_label("SUPPORTS. The passage says so.") == ("SUPPORTS", "The passage says so.")
    assert parse_claim_label("Label: REFUTES - born in 1900") == ("REFUTES", "born in 1900")
    assert parse_claim_label("NOT ENOUGH INFO") == ("NOT ENOUGH INFO", "")
    assert parse_claim_label("maybe") == (None, "maybe")


def test_the_joint_premise_needs_its_own_higher_bar() -> None:
    t = replace(shipped_options().thresholds, entail=0.3, contradict=0.7, joint_entail=0.6)
    spurious = [s("a", 0.02, 0.1), s("b", 0.02, 0.1), s("joint", 0.35, 0.05)]
    assert hypothesis_state("h", spurious, t).state == "neutral"
    bridged = [s("a", 0.2, 0.1), s("b", 0.1, 0.1), s("joint", 0.8, 0.05)]
    v = hypothesis_state("h", bridged, t)
    assert v.state == "entail" and v.best_passage == "joint"
    # A passage that entails alone is named (and cited) over the joint premise scoring a hair more.
    alone = hypothesis_state("h", [s("a", 0.947, 0.02), s("b", 0.01, 0.02), s("joint", 0.951, 0.02)], t)
    assert alone.state == "entail" and alone.best_passage == "a"


def test_premise_windows_overlap_by_one_sentence_and_keep_the_title() -> None:
    from ragmend.diagnosis.premises import premise_windows
    from ragmend.rag.types import Passage

    text = "Elko Regional Airport is public. It is in Elko, Nevada. It has two runways. It opened in 1930."
    p = Passage(id="a", doc_id="a", title="Elko Regional Airport", text=text, score=1.0, retriever="dense")
    assert premise_windows(p, 0) == [f"Elko Regional Airport: {text}"]  # whole passages (default)
    assert premise_windows(p, 4) == [f"Elko Regional Airport: {text}"]  # no longer than a window
    two = premise_windows(p, 2)
    assert two == [
        "Elko Regional Airport: Elko Regional Airport is public. It is in Elko, Nevada.",
        "Elko Regional Airport: It is in Elko, Nevada. It has two runways.",
        "Elko Regional Airport: It has two runways. It opened in 1930.",
    ]
    three = premise_windows(p, 3)
    assert len(three) == 2 and three[1].endswith("It has two runways. It opened in 1930.")


def test_a_passage_over_the_word_budget_is_read_in_windows_of_whole_sentences() -> None:
    from ragmend.diagnosis.premises import premise_windows
    from ragmend.rag.types import Passage

    sentences = [f"Sentence {i} says " + "word " * n + "here." for i, n in enumerate([20, 30, 25, 60, 10])]
    text = " ".join(sentences)
    p = Passage(id="a", doc_id="a", title="T", text=text, score=1.0, retriever="dense")
    assert premise_windows(p, 0) == [f"T: {text}"]  # no budget: the whole passage
    assert premise_windows(p, 0, 500) == [f"T: {text}"]  # within the budget
    windows = premise_windows(p, 0, 70)
    assert all(w.startswith("T: ") for w in windows)
    bodies = [w[3:] for w in windows]
    # Whole sentences, each window within 70 words where its sentences allow, each after the
    # first opening with the previous one's last sentence when both fit; every sentence is read.
    assert bodies[0] == " ".join(sentences[:2])
    assert bodies[1] == " ".join(sentences[1:3])
    assert bodies[2:] == [sentences[3], sentences[4]]  # 64 + 14 words: no room to overlap
    assert all(len(b.split()) <= 70 for b in bodies)
    assert all(any(sentence in b for b in bodies) for sentence in sentences)
    # Sentence windows, where configured, take precedence over the word budget.
    assert len(premise_windows(p, 2, 70)) == 4


def test_a_joint_premise_joins_the_two_passages_that_hold_a_claim_no_single_one_does() -> None:
    from ragmend.diagnosis.premises import build_premises
    from ragmend.rag.types import Passage

    def p(pid: str, title: str, text: str) -> Passage:
        return Passage(id=pid, doc_id=pid, title=title, text=text, score=1.0, retriever="dense")

    film = p(
        "f",
        "Inception",
        "Inception is a 2010 film. It stars Leonardo DiCaprio. It was directed by Christopher Nolan.",
    )
    other = p("o", "Paris", "Paris is the capital of France. It lies on the Seine.")
    person = p(
        "n",
        "Christopher Nolan",
        "Christopher Nolan is a filmmaker. He was born in London. He studied English literature.",
    )
    premises = build_premises([film, other, person], 0, 128, True, 4)
    joint = premises.joint_for("Inception was directed by Christopher Nolan, who was born in London.")
    # The two passages that hold its words, whatever their rank, each by its sentences that share
    # most words with the claim, in passage order; the passage that adds nothing is left out.
    assert joint is not None and joint.joined == ("f", "n")
    assert joint.text == (
        "Inception: Inception is a 2010 film. It was directed by Christopher Nolan. "
        "Christopher Nolan: Christopher Nolan is a filmmaker. He was born in London."
    )
    # A claim one passage holds whole needs none; nor one whose name no passage holds.
    assert premises.joint_for("Christopher Nolan was born in London.") is None
    assert premises.joint_for("Inception was directed by Christopher Nolan, born in Manchester.") is None
    off = build_premises([film, other, person], 0, 128, False, 4)
    assert off.joint_for("Inception was directed by Christopher Nolan, who was born in London.") is None
