"""The surface checks (names and numbers in the evidence, answer relevance, compound claims) and
the verdict's arithmetic on hand-made inputs: pure functions, no model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragmend.diagnosis.compound import atomic_claims, decompose, singular_predicate, split_conjunction
from ragmend.diagnosis.editions import editions, other_edition
from ragmend.diagnosis.off_question import answer_relevance
from ragmend.diagnosis.roles import claimed_roles, credited_roles, role_of_another
from ragmend.diagnosis.spans import best_passage_coverage, key_spans, names_any, normalise, span_coverage
from ragmend.diagnosis.verdict import (
    ANSWER_FEATURES,
    CLAIM_FEATURES,
    GeneratedAnswers,
    LinearScore,
    VerdictModel,
    answer_features,
    fit_score,
    grounded,
    open_verdict,
)
from ragmend.errors import ConfigError


def test_key_spans_are_names_and_numbers_not_sentence_openers() -> None:
    spans = key_spans(
        "Yes, both Elko Regional Airport and Gerald R. Ford International Airport are in Michigan."
    )
    assert spans == ["Elko Regional Airport", "Gerald R. Ford International Airport", "Michigan"]
    assert key_spans("It cost 3.5 million in 1990 for the Bank of America.") == [
        "3.5",
        "1990",
        "Bank of America",
    ]
    assert key_spans("the answer is not known") == []


def test_span_coverage_finds_what_the_evidence_never_names() -> None:
    evidence = ["Australia: Australia is a country. Sydney is its largest city."]
    question = "What is the capital of Australia?"
    # "Canberra" occurs nowhere: nothing in the evidence states the answer.
    assert span_coverage("The capital of Australia is Canberra.", evidence, exclude=question) == 0.0
    assert span_coverage("The largest city of Australia is Sydney.", evidence, exclude=question) == 1.0
    # A claim naming nothing has nothing to check.
    assert span_coverage("It is a large country.", evidence) is None
    # Most words of a long name are enough ("Gerald Ford International Airport").
    assert (
        span_coverage("Gerald R. Ford International Airport", ["the Gerald Ford International Airport"])
        == 1.0
    )


def test_a_window_names_a_claim_when_it_holds_one_of_its_names() -> None:
    claim = key_spans("Gerald R. Ford International Airport is located in Michigan.")
    assert names_any(claim, normalise("Gerald Ford International Airport: the airport of Grand Rapids."))
    assert names_any(claim, normalise("Detroit is the largest city in Michigan."))
    assert not names_any(claim, normalise("Elko Regional Airport is a mile west of downtown Elko, Nevada."))
    assert names_any([], normalise("A claim naming nothing is named by any window."))


def test_a_window_about_another_edition_is_about_something_else() -> None:
    claim = editions("The 31st Golden Globe Awards were held on January 26, 1974.")
    assert claim == {"golden globe awards": frozenset({"31"})}
    fifty_first = editions("51st Golden Globe Awards: The 51st Golden Globe Awards were held in 1994.")
    assert other_edition(claim, fifty_first)
    assert not other_edition(claim, editions("The 31st Golden Globe Awards, honoring the best of 1973."))
    # A window naming both editions is about this one too; one naming none says nothing here.
    both = editions("The 31st Golden Globe Awards came before the 51st Golden Globe Awards.")
    assert not other_edition(claim, both)
    assert not other_edition(claim, editions("The Golden Globe Awards are held in Beverly Hills."))
    # A year after "the" is an edition; a year opening a sentence dates an event; a sentence ends
    # a name ("Olympics. In ...") where an initial does not ("Gerald R. Ford").
    assert editions("He ran at the 2012 Summer Olympics. In 1998 Microsoft grew.") == {
        "summer olympics": frozenset({"2012"})
    }
    assert editions("the 2nd Gerald R. Ford Airport") == {"gerald r ford airport": frozenset({"2"})}
    assert not other_edition({}, fifty_first)


def test_a_cast_list_credits_each_role_to_its_performer() -> None:
    cast = credited_roles(
        "Drum Beat: Ladd stars along with Audrey Dalton, Charles Bronson as Captain Jack, and"
        " Hayden Rorke as President Ulysses S. Grant."
    )
    assert cast == {
        "captain jack": frozenset({"charles bronson"}),
        "president ulysses s grant": frozenset({"hayden rorke"}),
    }
    assert credited_roles("The Joker, portrayed by Heath Ledger, returns.") == {
        "joker": frozenset({"heath ledger"})
    }
    # A sentence ends a name ("Vice President. Obama ..."). "X as Y" away from any word of a
    # performance names a post, not a role.
    assert credited_roles("The film cast Joe Biden as Vice President. Obama won.") == {
        "vice president": frozenset({"joe biden"})
    }
    assert credited_roles("Wenger named Smith as Arsenal captain. Chelsea played them.") == {}
    # A cast in brackets, as a list: each item credits its role; a title's qualifier does not.
    friends = credited_roles(
        "Friends: It featured six main cast members: Rachel Green (Jennifer Aniston), Phoebe"
        " Buffay (Lisa Kudrow) and Joey Tribbiani (Matt LeBlanc)."
    )
    assert friends == {
        "rachel green": frozenset({"jennifer aniston"}),
        "phoebe buffay": frozenset({"lisa kudrow"}),
    }
    assert role_of_another(claimed_roles("Lisa Kudrow played Rachel Green."), friends)
    # A title's full stop ends no name: Mr. Spock is not Mr. anyone.
    trek = credited_roles("Star Trek stars William Shatner as Captain Kirk and Leonard Nimoy as Mr. Spock.")
    assert trek["mr spock"] == frozenset({"leonard nimoy"})
    assert not role_of_another(claimed_roles("Leonard Nimoy played Spock."), trek)
    assert role_of_another(claimed_roles("William Shatner played Mr. Spock."), trek)
    qualified = "Joker (The Dark Knight): the film's villain, Kansas City (Missouri), Elgort (born 1994)."
    assert credited_roles(qualified) == {}
    dalton = claimed_roles("Audrey Dalton played Captain Jack in Drum Beat.")
    assert dalton == {"captain jack": frozenset({"audrey dalton"})}
    assert role_of_another(dalton, cast)
    # The performer by part of the name, the role by part of its name: the same credit.
    assert not role_of_another(claimed_roles("Bronson portrayed the role of Captain Jack."), cast)
    assert not role_of_another(claimed_roles("Hayden Rorke portrayed President Grant."), cast)
    assert role_of_another(claimed_roles("President Grant was played by Alan Ladd."), cast)
    # A role the passage does not credit, a claim crediting none ("served as" is no performance),
    # and a role shared by two performers refute nothing.
    assert not role_of_another(claimed_roles("Alan Ladd played Johnny MacKay."), cast)
    assert claimed_roles("Barack Obama served as President of the United States.") == {}
    shared = credited_roles("Audrey Dalton as Captain Jack (young) and Charles Bronson as Captain Jack.")
    assert not role_of_another(dalton, shared)


def test_answerability_is_coverage_of_the_question_by_one_passage() -> None:
    q = "Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?"
    both = ["Elko Regional Airport is in Nevada.", "Gerald R. Ford International Airport is in Michigan."]
    assert best_passage_coverage(q, both) == pytest.approx(2 / 3)
    assert best_passage_coverage(q, ["The weather in Paris is mild."]) == 0.0
    assert best_passage_coverage("what is it?", ["x"]) is None


def test_answer_relevance_catches_an_answer_about_someone_else() -> None:
    assert answer_relevance("When was Marie Curie born?", "Marsha Albert was born 1948.") == (0.0, 1.0)
    assert answer_relevance("When was Marie Curie born?", "Marie Curie was born in 1867.") == (1.0, 1.0)
    # A bare span answers without restating the question.
    assert answer_relevance("What is the capital of Australia?", "Canberra") == (1.0, 1.0)
    # "When" asks for a time; "How many" for a number.
    assert answer_relevance("When did he found it?", "Richard Hornsby Elsham in Lincolnshire.")[1] == 0.0
    assert answer_relevance("How many moons does Mars have?", "Mars has two moons.")[1] == 1.0


def test_compound_claims_are_checked_as_their_atomic_parts() -> None:
    assert decompose(
        "Yes, both Elko Regional Airport and Gerald R. Ford International Airport are located in Michigan."
    ) == [
        "Elko Regional Airport is located in Michigan.",
        "Gerald R. Ford International Airport is located in Michigan.",
    ]
    assert decompose("Ed Wood and Scott Derrickson were both American.") == [
        "Ed Wood was American.",
        "Scott Derrickson was American.",
    ]
    assert decompose("Paris is the capital of France.") == ["Paris is the capital of France."]


def test_a_yes_answer_about_two_names_is_checked_name_by_name_in_grammatical_claims() -> None:
    # Without "both": the answer to "Are A and B Y?" says Y of each (DEV: passed as one claim
    # that no window entails or contradicts).
    assert decompose(
        "Yes, Brainerd Lakes Regional Airport and Sawyer International Airport are located in Europe."
    ) == [
        "Brainerd Lakes Regional Airport is located in Europe.",
        "Sawyer International Airport is located in Europe.",
    ]
    # One subject gets a singular predicate: "Max Mirnyi is professional tennis players." read as
    # contradicted (0.95) by the passage that says he is one.
    assert decompose("Yes, both Marc Rosset and Max Mirnyi are professional tennis players.") == [
        "Marc Rosset is a professional tennis player.",
        "Max Mirnyi is a professional tennis player.",
    ]
    assert decompose("Yes, Affenpinscher and Villanuco de Las Encartaciones are both breeds of dog.") == [
        "Affenpinscher is a breed of dog.",
        "Villanuco de Las Encartaciones is a breed of dog.",
    ]
    assert decompose("Yes, both Yangzhou and Jiangyan District are coastal cities.")[0] == (
        "Yangzhou is a coastal city."
    )
    assert decompose("Yes, John le Carré and Tim Winton are novelists.")[1] == "Tim Winton is a novelist."
    considered = decompose("Yes, Distortion Mirrors and OK Go are considered rock bands.")
    assert considered[1] == "OK Go is a rock band."
    assert singular_predicate("from the United States") == "from the United States"
    assert singular_predicate("American") == "American"
    assert singular_predicate("located in Michigan") == "located in Michigan"
    # A relation between the two, or a denial, is one claim: it cannot be split name by name.
    for claim in (
        "Yes, Tom Hanks and Rita Wilson were married in 1988.",
        "Yes, Ecballium and Elatostema are in the same family.",
        "No, Goo Goo Dolls and Echosmith were not formed in the same city.",
    ):
        assert len(decompose(claim)) == 1, claim
    # Without a yes, what is said of two names is split where it is said of each (no determiner
    # before the predicate); said of the two together, or of one elliptical name, it stays whole.
    assert decompose("Kalenderhane Mosque and Galata Bridge are located in Istanbul.") == [
        "Kalenderhane Mosque is located in Istanbul.",
        "Galata Bridge is located in Istanbul.",
    ]
    assert decompose("Arbutus and Aspidistra are flowering plants.")[1] == "Aspidistra is a flowering plant."
    assert decompose("Kelly Clarkson and Lionel Richie are returning to Las Vegas.")[1] == (
        "Lionel Richie is returning to Las Vegas."
    )
    assert decompose("Ward and Leetch were described as loved colleagues.")[0] == (
        "Ward was described as loved colleagues."
    )
    for claim in (
        "Simon and Garfunkel were a folk duo.",
        "Larry Page and Sergey Brin are co-founders of Google.",
        "Chris Cooper and Allison Janney are in common.",
        "North and South Korea are divided.",
        "Ed and Lorraine Warren were ghost hunters.",
        # RAGTruth TEST sentences that the pattern of "Yes, A and B are Y." would have cut: the
        # sentence must open with the two names and nothing else, and say of each what it says.
        "Two other women, Noelle Velentzas and Asia Siddiqui, were arrested in New York.",
        "Jag nominated Blue and Felicia for eviction, but they are unaware of Jag's power.",
        "New Belgium Brewery and Ben & Jerry's are collaborating on a beer.",
        "Police and firefighters were called.",
    ):
        assert decompose(claim) == [claim], claim
    # The answer particle is no part of the claim.
    claim = "Madame Figaro is published in France."
    assert decompose(f"Yes, {claim}") == [claim]
    assert decompose("No, they were not connected with Disney.") == ["They were not connected with Disney."]
    assert decompose("No.") == ["No."]


def test_two_clauses_or_two_predicates_are_checked_one_by_one() -> None:
    # A right answer the NLI model called contradicted (0.96) as one claim: a window settles
    # one half and says nothing of the other.
    assert decompose("Yes, Karjiang is a mountain and Sherpi Kangri is a mountain peak.") == [
        "Karjiang is a mountain.",
        "Sherpi Kangri is a mountain peak.",
    ]
    assert decompose('Jennifer Aniston portrayed Rachel Green on "Friends" and starred in "Cake".') == [
        'Jennifer Aniston portrayed Rachel Green on "Friends".',
        'Jennifer Aniston starred in "Cake".',
    ]
    assert decompose("The novella was written in 1843 and was adapted in 1908.") == [
        "The novella was written in 1843.",
        "The novella was adapted in 1908.",
    ]
    assert decompose("The region means salt estate and covers the village of Obertraun.")[1] == (
        "The region covers the village of Obertraun."
    )
    # One claim where the split would misread it: a name or title with "and" in it, a verb of
    # another form (passive or active?), a relative clause's verb, a quoted question, a relation
    # between the two, a plural noun that only looks like a verb, a verb with nothing after it.
    for claim in (
        "The woman who portrayed Corliss Archer in the film Kiss and Tell was Shirley Temple.",
        "Reggie Jackson was born in 1946 and played for the Oakland Athletics.",
        "Lakshmi Shankar is the wife of a violinist noted for his techniques and compositions.",
        "The train that runs on the C&M subdivision and runs to Chicago serves 2 termini.",
        'The answer to the question "Did both X-Large and A Bathing Ape have stores?" is Japan.',
        "The flowering plants Ecballium and Elatostema are in the same family.",
        "Ryan Murphy and Brad Falchuk created and produced the series.",
        "Sophia Sidney, Baroness De L'Isle and Dudley, was the eldest daughter of William IV.",
    ):
        assert decompose(claim) == [claim], claim
    assert split_conjunction("Paris is the capital of France.") is None


def test_parts_never_push_a_later_sentence_past_the_claim_limit() -> None:
    claims = ["A is X and B is Y.", "C was born in 1900.", "Yes, D wrote E and directed F."]
    assert atomic_claims(claims, 8) == [
        "A is X.",
        "B is Y.",
        "C was born in 1900.",
        "D wrote E.",
        "D directed F.",
    ]
    # Three sentences in a limit of four: one of them may be split, the rest are read whole.
    four = ["A is X.", "B is Y.", "C was born in 1900.", "D wrote E and directed F."]
    assert atomic_claims(claims, 4) == four
    assert atomic_claims(claims, 2) == ["A is X and B is Y.", "C was born in 1900."]


def test_linear_score_ignores_unknown_features_and_fills_neutral_ones() -> None:
    score = LinearScore(
        features=("span_coverage", "entail"),
        mean=(0.5, 0.5),
        scale=(0.5, 0.5),
        coef=(-2.0, -1.0),
        intercept=0.0,
    )
    # Missing span_coverage counts as full coverage (1.0), not as its mean.
    assert score.probability({"entail": 0.5, "unknown": 9.0}) == pytest.approx(1 / (1 + np.exp(2.0)))
    assert score.probability({"span_coverage": 0.0, "entail": 0.0}) > 0.95


def test_fit_learns_the_direction_of_a_signal_and_the_file_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [{"entail": float(e), "contradict": float(rng.random() * 0.1)} for e in rng.random(200)]
    labels = [r["entail"] < 0.5 for r in rows]  # unsupported when weakly entailed
    claim = fit_score(rows, labels, CLAIM_FEATURES)
    assert claim.probability({"entail": 0.05}) > 0.9 > 0.1 > claim.probability({"entail": 0.95})
    answer = fit_score([{"support_min": r["entail"]} for r in rows], labels, ANSWER_FEATURES)
    model = VerdictModel(claim=claim, answer=answer, threshold=0.42, about={"answers": 200})
    model.save(tmp_path / "v.json")
    again = open_verdict(str(tmp_path / "v.json"))
    assert again == model
    assert open_verdict("off") is None
    with pytest.raises(ConfigError, match="not found"):
        open_verdict(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text('{"claim": {}}')
    with pytest.raises(ConfigError, match="not a verdict file"):
        open_verdict(str(tmp_path / "bad.json"))


def test_an_answer_nothing_in_the_evidence_names_is_ie_where_the_question_is_unanswered() -> None:
    """Whether a one-claim answer is grounded: some key span of it in the evidence (the signal
    the decision's `unanswered` rule reads)."""
    assert grounded({"span_coverage": 0.0}) is False
    assert grounded({"span_coverage": 0.5}) and grounded({})
    assert grounded({"span_coverage": 0.0, "log_claims": float(np.log1p(3))})  # a long response
    assert not grounded({"span_coverage": 0.0, "log_claims": 0.6931})  # one claim, as rows round it


def test_an_answer_stating_another_relation_is_caught() -> None:
    from ragmend.diagnosis.off_question import other_relation, relations

    # The right man, another relation: born, when asked found.
    assert other_relation("When did Andrew Jaspan find it?", "Andrew Jaspan was born on April 20, 1952.")
    assert other_relation("Who wrote Jaws?", "Jaws was directed by Steven Spielberg in 1975.")
    # The asked relation is stated (with others), or none the check knows is: not judged.
    assert not other_relation("When was X born?", "X was born in 1867 and died in 1934.")
    assert not other_relation("Who founded The Conversation?", "It was co-founded by Andrew Jaspan.")
    assert not other_relation("When was X founded?", "It started in 2011 in Melbourne.")
    assert not other_relation("When did Andrew Jaspan find it?", "April 20, 1952")  # a bare span
    # A relation word inside a name is a name: "Founders Hall" founds nothing.
    assert relations("Where is Founders Hall?") == frozenset()


def test_each_data_set_weighs_the_same_and_examples_round_trip() -> None:
    from ragmend.train.verdict import Example, f1_best_threshold, set_weights

    exs = [
        Example(
            set="fever",
            group="x",
            unsupported=i % 2 == 0,
            answer={"support_min": 0.1},
            claims=({"entail": 0.2},),
            claim_labels=(True,),
        )
        for i in range(6)
    ]
    exs += [
        Example(
            set="ragtruth",
            group="QA",
            unsupported=True,
            answer={"support_min": 0.9},
            claims=(),
            claim_labels=(),
        )
        for _ in range(2)
    ]
    w = set_weights(exs)
    assert sum(w[:6]) == pytest.approx(sum(w[6:])) and np.mean(w) == pytest.approx(1.0)
    assert [Example.from_json(e.as_json()) for e in exs] == exs
    # Weighted F1: a heavy supported case at 0.55 moves the threshold above it.
    p, y = np.array([0.3, 0.55, 0.9]), np.array([True, False, True])
    assert f1_best_threshold(p, y)[0] <= 0.3
    assert 0.55 < f1_best_threshold(p, y, np.array([1.0, 10.0, 1.0]))[0] <= 0.9


def test_an_answer_about_something_else_is_off_topic() -> None:
    from ragmend.diagnosis.off_question import off_topic

    assert off_topic("When was Marie Curie born?", "Marsha Albert was born 1948.")
    follow_up = "When did Andrew Jaspan found The Conversation?"
    assert off_topic(follow_up, "Richard Hornsby Elsham in Lincolnshire 4 June 1790.")
    # Restating the subject, a pronoun standing for it, a bare span, or naming nothing: not judged.
    assert not off_topic("When was Marie Curie born?", "Marie Curie was born in 1867.")
    assert not off_topic("When was Marie Curie born?", "She was born in 1867 in Warsaw.")
    assert not off_topic("What is the capital of Australia?", "Canberra")
    assert not off_topic("When was Marie Curie born?", "The year was 1867 or so.")
    assert not off_topic("what is it?", "Marsha Albert was born 1948.")
    # Names with no verb answer a question asking for a name (a bare name is the usual short
    # answer, not a change of subject); a shortened long name is the question's own.
    assert not off_topic(
        "What team is coached by former head college coach Connie Yori?",
        "Nebraska Cornhuskers women's basketball team.",
    )
    assert not off_topic(
        "In what 2 countries did both X-Large and A Bathing Ape have stores?", "In Japan and Hong Kong."
    )
    assert not off_topic(
        "To which aircraft carrier was the VMF-213 Marine Fighting Squadron assigned?",
        "VMF-213 was assigned to the USS Essex.",
    )


def test_a_task_over_given_text_asks_about_no_name() -> None:
    """RAGTruth's instructions name "Summarize" and "JSON": no summary restates them, and every
    summary and data-to-text response was judged off the question (WR) until instructions over a
    given text were told from questions."""
    from ragmend.corpora.cases import TASK_QUERIES
    from ragmend.diagnosis.off_question import is_instruction, unaddressed

    summary = "The Duke of Cambridge opened a hospital in Norwich on Monday, the paper reports."
    for task in TASK_QUERIES.values():
        assert is_instruction(task)
        assert unaddressed(task, summary) is None
        assert answer_relevance(task, summary) == (1.0, 1.0)
    assert is_instruction("Please summarise this article in 100 words.")
    # A question, or an instruction naming its own subject, is still judged.
    for query in ("List the founders of The Conversation.", "What does the following text say about Paris?"):
        assert not is_instruction(query)
    assert unaddressed("When was Marie Curie born?", "Marsha Albert was born 1948.") == "subject"
    assert (
        unaddressed("When did Andrew Jaspan find it?", "Andrew Jaspan was born on April 20, 1952.")
        == "relation"
    )


def test_the_kind_of_answer_asked_for() -> None:
    """A time for "when", a number for "how long": an answer without one does not answer, however
    well a passage supports it; "when" that sets a condition asks for no time."""
    from ragmend.diagnosis.off_question import unaddressed

    bridge = "How long is the bridge in the Oresund Region that connects Copenhagen and Malmo?"
    assert unaddressed(bridge, "The bridge in the Oresund Region connects Copenhagen and Malmo.") == "kind"
    assert unaddressed(bridge, "The bridge in the Oresund Region is nearly 8 kilometres long.") is None
    assert unaddressed("When was Marie Curie born?", "Marie Curie was born in Warsaw.") == "kind"
    assert unaddressed("When was Marie Curie born?", "Marie Curie was born on 7 November 1867.") is None
    assert unaddressed("How many members does the band have?", "The band has five members.") is None
    # A quantity asked by its name: "at what height", "what population".
    assert unaddressed("At what height does the road start?", "The road starts at an interchange.") == "kind"
    assert unaddressed("What population did Elko have in 2010?", "Elko had 18,297 people in 2010.") is None
    conditional = "When you have a bowel movement, do you lose weight?"
    assert unaddressed(conditional, "No, a bowel movement does not make you lose weight.") is None
    # An abstention answers nothing, and is judged as one (IE), not as the wrong kind.
    assert unaddressed("When was Marie Curie born?", "I don't know from these passages.") is None


# The local generator's DEV answers that gave the kind asked for only in the question's own
# words, or asked it later in the question: restating the question gives nothing new, so they
# must not pass.
NO_NEW_KIND = [
    (
        "When did the tour begin for the album Taylor Swift released on October 22, 2012?",
        "The tour began for the album Taylor Swift released on October 22, 2012.",
    ),
    (
        "How many laps did Harry Prowell run during the 10,000 metres race at the 1967 Pan American Games?",
        "Harry Prowell ran 10,000 laps during the 10,000 metres race at the 1967 Pan American Games.",
    ),
    (
        "What was the population of the town as of 2000 where the historic tugboat Catawissa is located?",
        'According to 2000 federal census data, Bangor is the "Queen City" of Maine.',
    ),
    (
        "Roger O. Egeberg was Assistant Secretary for Health during the administration of a president "
        "that served during what years?",
        "Roger O. Egeberg was Assistant Secretary for Health during the Nixon administration.",
    ),
    (
        "What is the birthday of this actress who was the mother to the daughter of King William IV?",
        "Sophia Sidney was the eldest daughter of William IV and his mistress Dorothea Jordan.",
    ),
]


def test_the_kind_asked_for_must_be_more_than_the_questions_own() -> None:
    """A date or number counts only when the question does not already hold it, and a year, a
    measure or a birthday is asked anywhere in the question; a bare span is the answer, whatever
    it repeats, and a new date or number answers."""
    from ragmend.diagnosis.off_question import unaddressed

    for question, response in NO_NEW_KIND:
        assert unaddressed(question, response) == "kind", response
    tour = NO_NEW_KIND[0][0]
    assert unaddressed(tour, "The tour began on March 13, 2013.") is None
    assert unaddressed(tour, "2012") is None
    laps = NO_NEW_KIND[1][0]
    assert unaddressed(laps, "Harry Prowell ran 25 laps during the 10,000 metres race.") is None
    century = "In what century did Tecumseh become a leader?"
    assert unaddressed(century, "He became one in the nineteenth century.") is None


RESTATED = [
    (
        "The 1974 Texas Tech Raiders football team represented what public research university in "
        "Lubbock, Texas?",
        "The 1974 Texas Tech Raiders football team represented Lubbock, Texas.",
    ),
    (
        "David Thewlis had a performance in the film Macbeth as which father of Malcolm and Donalbain?",
        "David Thewlis had a performance in the film Macbeth as Malcolm's father.",
    ),
    # A possessive in the question's name, and a verb in another tense ("play", "played").
    (
        "Who did the Doncaster Belles play in the 1994 FA Women's Cup Final held at Glanford Park?",
        "Doncaster Belles played in the 1994 FA Women's Cup Final held at Glanford Park.",
    ),
    # An irregular past ("begin", "began").
    ("Where did the tour of the band begin?", "The tour of the band began."),
]
# Answered in the question's words, and still answered: a new name, a choice among the
# alternatives the question offers, a yes/no question's restatement (it asserts yes), a name
# composed of the question's words.
ANSWERED_IN_ITS_WORDS = [
    (RESTATED[0][0], "The team represented Texas Tech University in Lubbock."),
    ("Who is older, Annie Morton or Terry Richardson?", "Annie Morton is older than Terry Richardson."),
    ("Is brown sugar healthier than white sugar?", "Brown sugar is healthier than white sugar."),
    (
        "Which shopping centre in the suburb of Indooroopilly is served by TransLink bus routes?",
        "Indooroopilly Shopping Centre is served by TransLink bus routes.",
    ),
]


def test_an_answer_in_the_questions_own_words_answers_nothing() -> None:
    from ragmend.diagnosis.off_question import unaddressed

    for question, response in RESTATED:
        assert unaddressed(question, response) == "restated", response
    for question, response in ANSWERED_IN_ITS_WORDS:
        assert unaddressed(question, response) is None, response
    # A claim given to check is judged as its own response (claim mode, FEVER): it asks nothing.
    claim = "Nikolaj Coster-Waldau worked with the Fox Broadcasting Company."
    assert unaddressed(claim, claim) is None


def test_an_answer_dating_otherwise_what_the_question_dated_is_off_the_question() -> None:
    from ragmend.diagnosis.off_question import unaddressed

    # DEV answers the diagnosis passed: another film, another player.
    for question, response in [
        (
            "The actor that played Gutthi on Comedy nights with Kapil Show also starred in what 2016 "
            "Punjabi film directed by Smeep Kang?",
            "Smeep Kang directed the Punjabi comedy film Chak De Phatte (2008).",
        ),
        (
            "Which professional baseball player was born in 1984 and played as a rookie for the Los "
            "Angeles Dogers in 2007?",
            'Reginald Martinez "Reggie" Jackson was born in 1946 and played as a rookie for the Kansas '
            "City / Oakland Athletics in 2007.",
        ),
    ]:
        assert unaddressed(question, response) == "year", response
    for question, response in [
        # The question's year kept, another added elsewhere.
        (
            "Which film directed by Smeep Kang was released in 2016?",
            "Smeep Kang directed Vaisakhi List, released in 2016 and remade in 2019.",
        ),
        # Asked for a time: any year may answer it.
        ("In what year was the university founded where he taught in 1950?", "It was founded in 1755."),
        # A choice question's years date its alternatives.
        (
            "Which film was Oscar nominated, LaLee's Kin or Gimme Shelter, the 1970 Rolling Stones "
            "documentary?",
            "LaLee's Kin: The Legacy of Cotton is the 2001 American documentary film.",
        ),
        # A bare answer, and an answer with no year.
        ("What 2016 Punjabi film did Smeep Kang direct?", "Vaisakhi List"),
        ("What 2016 Punjabi film did Smeep Kang direct?", "Smeep Kang directed Vaisakhi List."),
    ]:
        assert unaddressed(question, response) is None, response


def test_an_answer_placing_the_asked_relation_in_another_work_is_about_something_else() -> None:
    from ragmend.diagnosis.off_question import other_work, unaddressed

    question = 'What is the profession of Ansel Elgort\'s character in "Baby Driver"?'
    assert unaddressed(question, 'Ansel Elgort played Tommy Ross in the horror film "Carrie".') == "subject"
    assert unaddressed(question, 'Ansel Elgort plays a getaway driver in "Baby Driver".') is None
    # A title named otherwise than "in ..." is not placed in another work.
    assert not other_work(
        "When was the novella written whose film adaptation was played during the Christmas season of "
        '"Afternoon movie" and contained the character of Ebenezer Scrooge?',
        'The novella "A Christmas Carol" was written in 1843.',
    )


def test_generator_confidence_is_a_feature_only_where_the_engine_reports_it() -> None:
    def features(token_logprobs: list[float] | None) -> dict[str, float]:
        return answer_features(
            "Who wrote Hamlet?",
            "Shakespeare wrote Hamlet.",
            ["Hamlet is a play by Shakespeare."],
            [{"entail": 0.9, "contradict": 0.0, "joint_entail": 0.0}],
            [0.1],
            0.9,
            0.8,
            np.array([0.7]),
            token_logprobs=token_logprobs,
        )

    given = features(None)
    assert "logprob_mean" not in given and "logprob_min" not in given
    generated = features([-0.1, -2.5, -0.3])
    assert generated["logprob_mean"] == pytest.approx(-0.9667, abs=1e-4)
    assert generated["logprob_min"] == -2.5


def test_a_feature_some_rows_lack_is_fitted_on_the_rows_that_have_it() -> None:
    # Generated answers carry log-probabilities, given responses none: the fit fills the missing
    # ones with the observed mean, so a row without them is scored on its other features alone.
    rng = np.random.default_rng(1)
    rows, labels = [], []
    for _ in range(300):
        lp = float(-rng.random() * 3)
        rows.append({"logprob_mean": lp, "support_min": float(rng.random())})
        labels.append(lp < -1.5)  # unsure answers are wrong
    rows += [{"support_min": float(rng.random())} for _ in range(300)]
    labels += [bool(rng.random() < 0.5) for _ in range(300)]
    score = fit_score(rows, labels, ("logprob_mean", "support_min"))
    assert score.probability({"logprob_mean": -2.9}) > 0.8 > 0.2 > score.probability({"logprob_mean": -0.1})
    missing = score.probability({"support_min": 0.5})
    assert 0.3 < missing < 0.7  # neither sure nor unsure: the observed mean moves nothing


def test_answers_of_the_generator_have_their_own_model_and_the_file_keeps_it(tmp_path: Path) -> None:
    claim = LinearScore(features=("entail",), mean=(0.5,), scale=(0.5,), coef=(-2.0,), intercept=0.0)
    given = LinearScore(features=("support_mean",), mean=(0.5,), scale=(0.5,), coef=(-1.0,), intercept=0.0)
    own = LinearScore(features=("logprob_min",), mean=(-1.0,), scale=(1.0,), coef=(-3.0,), intercept=0.0)
    model = VerdictModel(
        claim=claim, answer=given, threshold=0.5, about={}, generated=GeneratedAnswers(own, 0.3)
    )
    claims = [{"entail": 0.9}]
    # A given response (no log-probabilities): the model of every data set and its threshold.
    assert model.score({"support_mean": 0.5}, claims) == (0.5, 0.5)
    # An answer of the generator: its own model; an unsure one (low log-probability) fails.
    p_sure, t = model.score({"logprob_mean": -0.1, "logprob_min": -0.2}, claims)
    p_unsure, _ = model.score({"logprob_mean": -1.5, "logprob_min": -4.0}, claims)
    assert t == 0.3 and p_unsure > 0.9 > 0.1 > p_sure
    assert model.profile_for({"logprob_mean": -0.1}) == "generated"
    model.save(tmp_path / "v.json")
    assert open_verdict(str(tmp_path / "v.json")) == model


def test_novelty_counts_the_words_the_evidence_never_says() -> None:
    from ragmend.diagnosis.spans import novel_words

    evidence = ["Sydney is the largest city in Australia.", "The hotels of Sydney are near the harbour."]
    question = "What is the capital of Australia?"
    # "capital" and "Australia" restate the question; "Canberra" is said by nothing.
    assert novel_words("Canberra is the capital of Australia.", evidence, exclude=question) == (1 / 3, 1)
    # Inflections meet ("hotel" / "hotels"); function words never count.
    assert novel_words("Sydney has a hotel by the harbour.", evidence) == (0.0, 0)
    assert novel_words("It is.", evidence) == (0.0, 0)


def test_a_claim_given_to_check_is_judged_against_the_evidence_alone() -> None:
    from ragmend.diagnosis.verdict import profile_of, text_features

    evidence = ["Little Dorrit is a novel by Charles Dickens, published in the 1850s."]
    claim = "Little Dorrit is a novel by Charles Dickens written in the 1950s."
    # The claim is the query: its words are not "restated", so 1950s counts as new.
    x = text_features(claim, claim, evidence)
    assert x["restates_query"] == 1.0 and x["novel_share"] > 0 and profile_of(x) == "claim"
    answer = text_features("Who wrote Little Dorrit?", "Charles Dickens wrote it.", evidence)
    assert answer["novel_share"] == 0.0 and profile_of(answer) == "response"


def test_a_fit_within_strata_keeps_the_direction_a_pooled_fit_reverses() -> None:
    """Two kinds of text: one with many new words and few failures, one with few new words and
    many failures. Within each kind, more new words mean more failures; pooled, the kinds'
    difference reverses the sign (Simpson's paradox). log_claims has no sign constraint."""
    from ragmend.diagnosis.verdict import fit_stratified

    rng = np.random.default_rng(1)
    rows, labels, strata = [], [], []
    for kind, centre, base in (("long", 3.0, -2.5), ("short", 0.0, 1.5)):
        for v in centre + rng.normal(0, 0.5, 400):
            rows.append({"log_claims": float(v)})
            labels.append(bool(rng.random() < 1 / (1 + np.exp(-(base + 2.0 * (v - centre))))))
            strata.append(kind)
    pooled = fit_score(rows, labels, ["log_claims"])
    within, intercepts = fit_stratified(rows, labels, ["log_claims"], strata)
    assert pooled.coef[0] < 0 < within.coef[0]
    assert intercepts["long"] < intercepts["short"]
    assert within.intercept == pytest.approx(np.mean(list(intercepts.values())), abs=1e-5)
    # Each kind's own intercept puts its failures where they are: the short kind's base rate.
    short = [r for r, s in zip(rows, strata, strict=True) if s == "short"]
    p = np.mean([within.probability(r, intercepts["short"]) for r in short])
    assert p == pytest.approx(
        np.mean([lab for lab, s in zip(labels, strata, strict=True) if s == "short"]), abs=0.05
    )


def test_profiles_choose_the_intercept_and_threshold_and_round_trip(tmp_path: Path) -> None:
    from ragmend.diagnosis.verdict import Profile

    claim = LinearScore(features=("entail",), mean=(0.5,), scale=(0.5,), coef=(-1.0,), intercept=0.0)
    answer = LinearScore(features=("novel_share",), mean=(0.2,), scale=(0.1,), coef=(1.0,), intercept=0.0)
    profiles = {"claim": Profile(2.0, 0.6), "response": Profile(-2.0, 0.3)}
    model = VerdictModel(
        claim=claim, answer=answer, threshold=0.5, about={}, generated=None, profiles=profiles
    )
    x = {"novel_share": 0.2}
    assert model.score(x, []) == (pytest.approx(1 / (1 + np.exp(2.0))), 0.3)
    assert model.score({**x, "restates_query": 1.0}, []) == (pytest.approx(1 / (1 + np.exp(-2.0))), 0.6)
    assert model.profile_for(x) == "response" and model.profile_for({"restates_query": 1.0}) == "claim"
    model.save(tmp_path / "v.json")
    assert open_verdict(str(tmp_path / "v.json")) == model
    # A file written before profiles scores every answer with its one intercept and threshold.
    old = VerdictModel(claim=claim, answer=answer, threshold=0.5)
    old.save(tmp_path / "old.json")
    body = (tmp_path / "old.json").read_text().replace('"profiles": {},', "")
    (tmp_path / "old.json").write_text(body)
    reread = open_verdict(str(tmp_path / "old.json"))
    assert reread is not None and reread.score({**x, "restates_query": 1.0}, []) == (0.5, 0.5)
    assert reread.profile_for(x) == "default"


def test_examples_recorded_before_a_text_feature_get_it_from_their_cases() -> None:
    """`ragmend verdict fit --reuse` and `verdict score` give old records today's text features
    from their cases (no NLI runs again), the values the diagnoser computes."""
    from ragmend.corpora.cases import Case, _passage
    from ragmend.diagnosis.diagnoser import case_text_features
    from ragmend.train.verdict import Example, refresh_text_features

    passages = (_passage("p1", "Sydney", "Sydney is the largest city in Australia."),)
    case = Case(
        set="ragtruth",
        group="QA",
        id="7",
        split="train",
        query="What is the capital of Australia?",
        passages=passages,
        response="Canberra.",
        unsupported=True,
    )
    old = Example(
        set="ragtruth",
        group="QA",
        unsupported=True,
        answer={"support_min": 0.2},
        claims=(),
        claim_labels=(),
        id="7",
    )
    sentence = "Canberra is the capital of Australia."
    (fresh,) = refresh_text_features([old], {("ragtruth", "7"): case}, max_claims=8)
    expected, _ = case_text_features(case.query, case.passages, case.response, [])
    assert fresh.answer == {"support_min": 0.2, **{k: round(v, 4) for k, v in expected.items()}}
    assert fresh.answer["novel_share"] == 1.0
    # A claim gets its own: "Canberra" is said by no passage, "capital" restates the question.
    claimed = replace(old, claims=({"entail": 0.1},), claim_labels=(True,))
    (fresh,) = refresh_text_features([claimed], {("ragtruth", "7"): replace(case, response=sentence)}, 8)
    assert fresh.claims[0]["entail"] == 0.1 and fresh.claims[0]["novel_share"] == round(1 / 3, 4)
    with pytest.raises(ValueError, match="no case"):
        refresh_text_features([old], {}, 8)
    # Claims split otherwise today than when recorded: refuse, rather than pair the wrong ones.
    two = replace(old, claims=({"entail": 0.1}, {"entail": 0.2}), claim_labels=(True, False))
    with pytest.raises(ValueError, match="2 claims recorded, 1 split"):
        refresh_text_features([two], {("ragtruth", "7"): replace(case, response=sentence)}, 8)


def test_cross_validation_scores_each_case_by_a_verdict_fitted_without_its_sources() -> None:
    from ragmend.bench.suites.verdict_cv import cross_validate, source_group
    from ragmend.corpora.cases import Case, _passage
    from ragmend.train.verdict import Example

    rng = np.random.default_rng(3)
    exs, cases = [], {}
    for n in range(120):
        name = ("ragtruth", "fever")[n % 2]
        bad = bool(rng.random() < 0.5)
        support = float(np.clip(rng.normal(0.3 if bad else 0.7, 0.15), 0, 1))
        claim = ({"entail": support, "contradict": 0.1},)
        exs.append(
            Example(
                set=name,
                group="g",
                unsupported=bad,
                answer={"support_min": support},
                claims=claim,
                claim_labels=(bad,),
                id=str(n),
            )
        )
        # Three responses per source: they must land in one fold together.
        source = (_passage(f"s{n // 6}", "", f"source text {n // 6}"),)
        cases[(name, str(n))] = Case(
            set=name,
            group="g",
            id=str(n),
            split="dev",
            query="q?",
            passages=source,
            response="r.",
            unsupported=bad,
        )
    result = cross_validate(exs, cases, folds=4)
    for name in ("ragtruth", "fever"):
        assert result["sets"][name]["n"] == 60
        assert result["sets"][name]["auroc"] > 0.85 and result["sets"][name]["f1"] > 0.7
    assert source_group(cases[("ragtruth", "0")]) == source_group(cases[("ragtruth", "2")])
    # No claim is contradicted beyond 0.1: a bar above it changes nothing; one below it fails
    # every answer whose claim is entailed less than it is contradicted.
    for name in ("ragtruth", "fever"):
        refute = result["sets"][name]["refute"]
        assert refute["None"]["f1"] == refute["0.95"]["f1"] == result["sets"][name]["f1"]
    low = cross_validate(exs, cases, folds=4, refute_bars=(0.05,))
    assert low["sets"]["ragtruth"]["refute"]["0.05"]["recall"] == 1.0


def test_a_claim_contradicted_more_than_entailed_refutes_the_answer() -> None:
    from ragmend.diagnosis.verdict import refutation

    contradicted = {"entail": 0.05, "contradict": 0.86, "joint_entail": 0.3}
    supported_too = {"entail": 0.9, "contradict": 0.86}  # another window entails it: it stands
    bridged = {"entail": 0.05, "contradict": 0.7, "joint_entail": 0.8}
    assert refutation([supported_too, bridged]) == 0.0
    assert refutation([supported_too, contradicted]) == 0.86
    assert refutation([]) == 0.0


def test_an_answer_nothing_supports_is_unsupported_whatever_its_score() -> None:
    from ragmend.diagnosis.off_question import asks_question
    from ragmend.diagnosis.verdict import backing

    weak = {"entail": 0.03, "contradict": 0.5, "joint_entail": 0.0, "choice": 0.0}
    bridged = {"entail": 0.04, "contradict": 0.1, "joint_entail": 0.9, "choice": 0.0}
    choice = {"entail": 0.01, "contradict": 0.9, "joint_entail": 0.0, "choice": 1.0}
    assert backing([weak]) == 0.03 and backing([weak, bridged]) == 0.9
    # A choice between two alternatives no window can settle is not judged; nothing left: 1.
    assert backing([weak, choice]) == 0.03 and backing([choice]) == 1.0 and backing([]) == 1.0
    # Recorded only for an answer to a question.
    assert asks_question("What English comedian has a style of stream-of-conscious banter?")
    assert asks_question("who founded Marvel Comics")
    assert not asks_question("Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.")
    assert not asks_question("Summarize the following news article.")

    def features(query: str) -> dict[str, float]:
        evidence, sims = ["Ann: Ann was born in 1950."], np.array([0.5])
        return answer_features(query, "Ann is older.", evidence, [weak], [0.6], 0.1, 0.5, sims, question=True)

    assert features("Who is older?")["backing"] == 0.03
    given = features("Ann is older.")
    assert "backing" not in given  # the response restates the request: a claim given to check


def test_a_claim_naming_more_than_the_offered_alternatives_is_judged_by_windows() -> None:
    from ragmend.diagnosis.verdict import claim_text_features

    question = "Who was born first, Aleksandr Ivanovsky or Arthur Lubin?"
    evidence = ["Aleksandr Ivanovsky: Aleksandr Ivanovsky (1881-1968) was a Russian film director."]

    def choice(claim: str) -> float:
        return claim_text_features(claim, evidence, question, claim)["choice"]

    assert choice("Aleksandr Ivanovsky was born first.") == 1.0  # no window settles it
    assert choice("Aleksandr Ivanovsky was born 7 August 1952.") == 0.0  # a window can
    other = "Aleksandr Ivanovsky was born 7 August 1952."
    assert claim_text_features(other, evidence, "When was Aleksandr Ivanovsky born?", other)["choice"] == 0.0
