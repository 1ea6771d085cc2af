"""The answers a new user saw pass as NoFailure, judged again on the bundled corpus with the real
models: the retrieval of the default index, the shipped NLI model and configuration. Each
response is the one the user was given (fixed text, so the test does not depend on a generator).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ragmend.bench.suites.detect import record, rescore
from ragmend.corpora.cases import Case
from ragmend.diagnosis.diagnoser import Diagnoser
from ragmend.diagnosis.verdict import open_verdict
from ragmend.engine import Engine
from ragmend.engine.presentation import (
    ABSTENTION_TEXT,
    NOT_ANSWERED,
    NOT_CHECKED,
    NOT_SUPPORTED,
    UNANSWERED_BELOW,
    Reading,
    present,
)
from ragmend.rag.types import Passage
from ragmend.server.mapping import diagnosis as api_diagnosis
from ragmend.settings import load_settings

CASES = [
    # Both passages are retrieved; the Elko passage says Nevada. Two passages read together used
    # to entail the compound claim.
    (
        "Are both Elko Regional Airport and Gerald R. Ford International Airport located in Michigan?",
        "Yes, both Elko Regional Airport and Gerald R. Ford International Airport are located in Michigan.",
    ),
    # No passage names Canberra.
    ("What is the capital of Australia?", "The capital of Australia is Canberra."),
    # An answer about someone else, which a passage does entail.
    ("When was Marie Curie born?", "Marsha Albert was born 1948."),
    # A follow-up, as its condensed question: the answer is about another man and another thing.
    (
        "When did Andrew Jaspan found The Conversation?",
        "Richard Hornsby Elsham in Lincolnshire 4 June 1790.",
    ),
    # The same follow-up as the default generator condensed and answered it: the right man,
    # another relation (a passage does entail his birth date).
    ("When did Andrew Jaspan find it?", "Andrew Jaspan was born on April 20, 1952."),
    # The default generator's own answer to the README's follow-up question: the Elko passage
    # contradicts it (0.89), yet its score alone passed it (P(unsupported) 0.42 against 0.52).
    (
        "Which airport is located in Elko, Nevada?",
        "John Glenn Columbus International Airport is located in Elko, Nevada.",
    ),
    # A sample question, the default generator's answer through `ragmend serve`: no passage
    # supports it (the best window entails it at 0.03; the passage says it of Eddie Izzard),
    # yet its relevance and the generator's confidence scored it 0.35 against 0.46.
    (
        'What English stand-up comedian has a style of comedy full of "stream-of-conscious banter"?',
        'Richard Keith Herring has a style of comedy full of "stream-of-conscious banter".',
    ),
    # Another, through the server: the right pick (the passages date Ivanovsky 1881, Lubin 1899)
    # with a date a passage gives for Alexei Sayle. The comparison agreeing settled it as
    # NoFailure, and the claim was left out of the refutation as a choice no window can settle.
    (
        "Who was born first, Aleksandr Ivanovsky or Arthur Lubin?",
        "Aleksandr Ivanovsky was born 7 August 1952.",
    ),
]
IDS = ["elko", "australia", "curie", "jaspan", "jaspan-born", "elko-airport", "herring", "ivanovsky"]


@pytest.fixture(scope="module")
def bundled_engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    data_dir = tmp_path_factory.mktemp("bundled")
    # The cases were read on the passages dense retrieval finds for them: the diagnosis is what
    # they test, so their evidence stays the same whatever the first pass's default.
    settings = load_settings(
        data_dir=data_dir, cache_dir=Path(data_dir) / "cache", kg={"enabled": False}, rag={"mode": "dense"}
    )
    engine = Engine(settings)
    engine.load(roles=("embeddings", "nli", "reranker"))
    return engine


def _with_options(base: Diagnoser, **changes: Any) -> Diagnoser:
    """The engine's diagnoser (its models and reranker) with some of its options changed."""
    return Diagnoser(base.nli, base.embed, replace(base.options, **changes), reranker=base.reranker)


@pytest.mark.parametrize(("question", "response"), CASES, ids=IDS)
def test_wrong_answers_fail_on_the_bundled_corpus(
    bundled_engine: Engine, question: str, response: str
) -> None:
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(question, passages, response)
    assert d.failure != "NoFailure", (d.e_q, d.e_r, d.verdict)


@pytest.mark.parametrize(("question", "response"), CASES, ids=IDS)
def test_wrong_answers_fail_under_the_rule_too(bundled_engine: Engine, question: str, response: str) -> None:
    """The same cases with `diagnosis.verdict: off` (Algorithm 1's rule over the NLI states)."""
    base = bundled_engine.diagnoser
    assert base.options.verdict is not None  # the default diagnoses with the verdict
    rule = _with_options(base, verdict=None)
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = rule.diagnose(question, passages, response)
    assert d.verdict is None and d.failure != "NoFailure", (d.e_q, d.e_r)


def test_a_contradicted_claim_fails_whatever_its_score(bundled_engine: Engine) -> None:
    """The Elko answer scores a low P(unsupported) (its names are all in the evidence, it is
    relevant); the passage that contradicts it decides (diagnosis.refute_threshold)."""
    question, response = CASES[0]
    base = bundled_engine.diagnoser
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    decided = {}
    for bar in (None, base.options.refute_threshold):
        diagnoser = _with_options(base, verdict=open_verdict("bundled"), refute_threshold=bar)
        d = diagnoser.diagnose(question, passages, response)
        assert d.verdict is not None
        decided[bar] = d
    alone, with_bar = decided.values()
    assert alone.verdict is not None and with_bar.verdict is not None
    assert alone.verdict.p_unsupported < alone.verdict.threshold  # the score alone passes it
    assert with_bar.verdict.features["refuted"] >= (base.options.refute_threshold or 1.0)
    assert with_bar.verdict.unsupported and with_bar.failure == "WR"


def test_a_passage_about_someone_else_does_not_contradict_a_claim(bundled_engine: Engine) -> None:
    """The NLI model reads a sentence about another subject as a contradiction (SNLI's captions
    taught it so): "Marc Rosset is a professional tennis player." against a window about Mariaan
    de Swardt. A window naming none of the claim's names reads as neutral
    (diagnosis.contradiction_needs_name); the passage about the claim's own subject still
    contradicts what it denies."""
    other = Passage(
        id="swardt",
        doc_id="swardt",
        title="Mariaan de Swardt",
        text="Mariaan de Swardt (born 18 March 1971) is a former tennis player from South Africa, "
        "who played as a professional from 1988 to 2001.",
        score=1.0,
        retriever="dense",
    )
    own = Passage(
        id="elko",
        doc_id="elko",
        title="Elko Regional Airport",
        text="Elko Regional Airport is a mile west of downtown Elko, in Elko County, Nevada.",
        score=1.0,
        retriever="dense",
    )
    base = bundled_engine.diagnoser
    assert base.options.contradiction_needs_name  # the default
    read_as_is = _with_options(base, contradiction_needs_name=False)
    question = "Is Marc Rosset a professional tennis player?"
    claim = "Marc Rosset is a professional tennis player."
    as_is = read_as_is.diagnose(question, [other], claim).e_r.hypotheses[0]
    named = base.diagnose(question, [other], claim).e_r.hypotheses[0]
    assert as_is.state == "contradict", as_is  # what the model alone says
    assert named.state != "contradict" and max(s.contradict for s in named.scores) == 0.0, named
    elko = base.diagnose(
        "Where is Elko Regional Airport?", [own], "Elko Regional Airport is located in Michigan."
    ).e_r.hypotheses[0]
    assert elko.state == "contradict", elko


def test_a_window_about_another_edition_neither_supports_nor_refutes(bundled_engine: Engine) -> None:
    """Asked through the server: "When were the 31st Golden Globe Awards held?" -> "January 26,
    1974", right and cited, failed as refuted: the window about the 51st Golden Globe Awards
    contradicted it at 0.96 (the NLI model reads two editions as one subject), and entailed the
    51st's date for the 31st at 0.69. A window about another edition now says nothing of it
    (diagnosis.other_edition_is_neutral)."""
    question = "When were the 31st Golden Globe Awards held?"
    right = "The 31st Golden Globe Awards were held on January 26, 1974."
    wrong = "The 31st Golden Globe Awards were held on January 22, 1994."
    base = bundled_engine.diagnoser
    assert base.options.other_edition_is_neutral  # the default
    read_as_is = _with_options(base, other_edition_is_neutral=False)
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    assert {"31st Golden Globe Awards", "51st Golden Globe Awards"} <= {p.title for p in passages}
    as_is = read_as_is.diagnose(question, passages, right)
    assert as_is.verdict is not None and as_is.verdict.unsupported_by == ("refuted",)  # the defect
    d = base.diagnose(question, passages, right)
    assert d.failure == "NoFailure", d.verdict
    other = {s.passage: s for s in d.e_r.hypotheses[0].scores}["51st Golden Globe Awards#0"]
    assert other.entail == 0.0 and other.contradict == 0.0
    assert base.diagnose(question, passages, wrong).failure != "NoFailure"


def test_a_cast_list_crediting_the_role_to_another_refutes(bundled_engine: Engine) -> None:
    """Asked through the server: "Who played Captain Jack in Drum Beat?" -> "Audrey Dalton played
    Captain Jack in Drum Beat." passed: its window ("Ladd stars along with Audrey Dalton, Charles
    Bronson as Captain Jack, ...") entails it at 0.95, as it does with any of its names in the
    slot (docs/nli.md "Names in another role"). A window crediting the role to someone else now
    contradicts the claim (diagnosis.role_of_another_refutes); the right performer still passes."""
    question = "Who played Captain Jack in Drum Beat?"
    wrong = "Audrey Dalton played Captain Jack in Drum Beat."
    right = "Charles Bronson played Captain Jack in Drum Beat."
    base = bundled_engine.diagnoser
    assert base.options.role_of_another_refutes  # the default
    read_as_is = _with_options(base, role_of_another_refutes=False)
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    assert "Drum Beat#0" in {p.id for p in passages}
    assert read_as_is.diagnose(question, passages, wrong).failure == "NoFailure"  # the defect
    d = base.diagnose(question, passages, wrong)
    assert d.failure != "NoFailure" and d.verdict is not None and "refuted" in d.verdict.unsupported_by
    cast = {s.passage: s for s in d.e_r.hypotheses[0].scores}["Drum Beat#0"]
    assert cast.entail == 0.0 and cast.contradict > 0.8
    assert base.diagnose(question, passages, right).failure == "NoFailure"


def test_an_answer_nothing_supports_says_so_in_the_api(bundled_engine: Engine) -> None:
    """The Herring answer scores under the operating point; what fails it is that no window
    entails it (diagnosis.support_floor), and the API says so."""
    question, response = CASES[IDS.index("herring")]
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(question, passages, response)
    assert d.verdict is not None and d.verdict.p_unsupported < d.verdict.threshold
    assert d.verdict.unsupported_by == ("unbacked",) and d.failure != "NoFailure"
    shown = api_diagnosis(d).verdict
    assert shown is not None and shown.unsupported_by == ["unbacked"]
    assert shown.features["backing"] < (bundled_engine.settings.diagnosis.support_floor or 0.0)


def test_a_right_answer_passes_on_the_bundled_corpus(bundled_engine: Engine) -> None:
    question = "Which airport is located in Elko, Nevada?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(
        question, passages, "Elko Regional Airport is located in Elko, Nevada."
    )
    assert d.failure == "NoFailure", d.verdict


@pytest.mark.parametrize(
    ("question", "response", "off"),
    [
        # Asked when, told what: a passage entails it, and it is no date.
        ("When did Andrew Jaspan found The Conversation?", "Andrew Jaspan founded The Conversation.", "kind"),
        # Asked which airport, given the question back.
        (
            "Which airport in Nevada is located in Elko?",
            "The airport in Nevada is located in Elko.",
            "restated",
        ),
    ],
    ids=["no-date", "restated"],
)
def test_an_answer_that_gives_nothing_asked_fails(
    bundled_engine: Engine, question: str, response: str, off: str
) -> None:
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(question, passages, response)
    assert d.off_question == off
    assert d.failure != "NoFailure", (d.e_q, d.e_r)


def test_a_comparison_in_time_is_checked_against_the_passages_dates(bundled_engine: Engine) -> None:
    """ "Who was born first, A or B?" is answered by two birth dates in two passages and a step
    the NLI model does not take: the wrong pick fails, the right one passes, an answer that
    compares with someone not offered fails, under the rule and under the verdict."""
    question = "Who was born first, Nicki Minaj or Meg Ryan?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    base = bundled_engine.diagnoser
    assert base.options.verdict is not None  # the shipped diagnoser decides with the verdict
    rule = _with_options(base, verdict=None)  # Algorithm 1's rule alone (diagnosis.verdict: off)
    for diagnoser in (rule, base):
        wrong = diagnoser.diagnose(question, passages, "Nicki Minaj was born first.")
        assert wrong.comparison is not None and wrong.comparison.outcome == "disagrees"
        assert [str(d) for d in wrong.comparison.dates] == ["1982-12-08", "1961-11-19"]
        assert wrong.failure == "WR"
        right = diagnoser.diagnose(question, passages, "Meg Ryan was born first.")
        assert right.comparison is not None and right.comparison.outcome == "agrees"
        assert right.failure == "NoFailure"
        other = diagnoser.diagnose(question, passages, "Meg Ryan is older than Keith Richards.")
        assert other.off_question == "choice" and other.failure != "NoFailure"


def test_an_alternative_the_retrieval_missed_is_dated_from_its_own_page(bundled_engine: Engine) -> None:
    """ "Who is older, Keith Richards or Meg Ryan?" does not retrieve Keith Richards' page (five
    passages, none his): the engine's diagnoser looks his page up in the index by title, as a
    person checking the answer would, and the comparison is decided."""
    question = "Who is older, Keith Richards or Meg Ryan?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    assert "Meg Ryan" not in [p.title for p in passages]
    wrong = bundled_engine.diagnoser.diagnose(question, passages, "Meg Ryan is older than Keith Richards.")
    assert wrong.comparison is not None and wrong.comparison.from_corpus == (False, True)
    assert wrong.comparison.outcome == "disagrees" and wrong.failure == "WR"
    right = bundled_engine.diagnoser.diagnose(question, passages, "Keith Richards is older.")
    assert right.comparison is not None and right.comparison.outcome == "agrees"
    assert right.failure == "NoFailure"
    # Without the index (a diagnoser given no title lookup), the passages alone do not decide.
    alone = Diagnoser(
        bundled_engine.diagnoser.nli, bundled_engine.diagnoser.embed, bundled_engine.diagnoser.options
    )
    check = alone.diagnose(question, passages, "Meg Ryan is older than Keith Richards.").comparison
    assert check is not None and check.outcome == "undecided"


def test_a_choice_of_attribute_is_checked_against_the_other_alternative(bundled_engine: Engine) -> None:
    """ "Which company is headquartered in Brisbane, A or B?" is asked of one alternative: the
    answer's claim with the other in its place is scored against the same single passages. The
    wrong pick fails (the passages support the other), the right one passes, and a bare span is
    read as the statement it makes, the other alternative likewise."""
    question = (
        "Which company is headquartered in Brisbane, Magna Home Entertainment or Rogers Locomotive and "
        "Machine Works?"
    )
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    assert {"Magna Home Entertainment", "Rogers Locomotive and Machine Works"} <= {p.title for p in passages}
    diagnose = bundled_engine.diagnoser.diagnose
    wrong = diagnose(question, passages, "Rogers Locomotive and Machine Works is headquartered in Brisbane.")
    assert wrong.alternatives is not None and wrong.alternatives.picked == 1
    assert wrong.alternatives.outcome == "disagrees" and wrong.failure == "WR"
    # As a client reads it in the answer's diagnosis.
    shown = api_diagnosis(wrong).model_dump()["alternatives"]
    assert shown["alternatives"] == ["Magna Home Entertainment", "Rogers Locomotive and Machine Works"]
    assert shown["outcome"] == "disagrees" and shown["support"][0] > shown["support"][1]
    right = diagnose(question, passages, "Magna Home Entertainment is headquartered in Brisbane.")
    assert right.alternatives is not None and right.alternatives.outcome == "agrees"
    assert right.failure == "NoFailure"
    bare = diagnose(question, passages, "Magna Home Entertainment")
    statement = "Magna Home Entertainment is headquartered in Brisbane."
    assert [h.hypothesis for h in bare.e_r.hypotheses] == [statement]
    assert bare.alternatives is not None and bare.alternatives.outcome == "agrees"
    assert bare.alternatives.support == right.alternatives.support
    # The default generator's answer to the same choice asked of Paterson (a walkthrough): its
    # echo of the other alternative is no claim, and the claim before it is cited.
    paterson = question.replace("headquartered in Brisbane", "based in Paterson")
    echoed = "Rogers Locomotive and Machine Works was based in Paterson, Magna Home Entertainment."
    passages, _ = bundled_engine.pipeline.retrieve(paterson, bundled_engine.config())
    d = diagnose(paterson, passages, echoed)
    assert [h.hypothesis for h in d.e_r.hypotheses] == [
        "Rogers Locomotive and Machine Works was based in Paterson."
    ]
    assert d.e_r.state == "entail" and d.failure == "NoFailure"
    assert d.alternatives is not None and d.alternatives.outcome == "agrees"


def test_a_faithful_summary_of_given_text_passes(bundled_engine: Engine) -> None:
    """A task over text the request gives (RAGTruth's Summary and Data2txt) names no subject of
    its own: a summary its passage entails is neither off the question nor a failure, under the
    rule and under the verdict."""
    passages, _ = bundled_engine.pipeline.retrieve("Elko Regional Airport", bundled_engine.config())
    base = bundled_engine.diagnoser
    assert base.options.verdict is not None  # the shipped diagnoser decides with the verdict
    rule = _with_options(base, verdict=None)  # Algorithm 1's rule alone (diagnosis.verdict: off)
    for diagnoser in (rule, base):
        d = diagnoser.diagnose(
            "Summarize the following text.",
            passages[:1],
            "Elko Regional Airport is an airport in Elko, Nevada.",
        )
        assert d.off_question is None
        assert d.e_r.state == "entail", d.e_r


def test_a_summary_of_given_text_is_never_read_as_sources_that_do_not_answer(bundled_engine: Engine) -> None:
    """A task over text the request gives asks nothing of that text but to work on it: answered by
    construction, so a summary the text does not support is flagged and marked, never replaced by
    "the sources do not answer this question" (the answerability model, fitted on questions,
    scores such instructions as unanswerable)."""
    passages, _ = bundled_engine.pipeline.retrieve("Elko Regional Airport", bundled_engine.config())
    summary = "Elko Regional Airport is the busiest airport in Utah."
    d = bundled_engine.diagnoser.diagnose("Summarize the following text.", passages[:1], summary)
    assert (d.e_q.construction, d.e_q.state, d.e_q.support) == ("given_text", "entail", 1.0)
    assert d.failure == "WR" and d.decided_by != "unanswered"
    read = present(summary, d, [(p.id, p.title) for p in passages[:1]])
    assert read.abstained_by is None and read.policy_applied in ("annotate", "marked"), read
    assert summary.rstrip(".") in read.text


def test_e_q_is_answerability_whatever_the_answer_says(bundled_engine: Engine) -> None:
    """With the verdict on, e_q asks whether the evidence answers the question: two answers to
    one question, one right and one about someone else, get the same e_q; a question the corpus
    cannot answer gets a neutral e_q (IE when its answer is unsupported)."""
    diagnose = bundled_engine.diagnoser.diagnose  # the shipped diagnoser, with the verdict
    question = "Who co-founded The Conversation?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    right = diagnose(question, passages, "Andrew Jaspan co-founded The Conversation.")
    other = diagnose(question, passages, "Marsha Albert was born 1948.")
    assert right.e_q == other.e_q and right.e_q.construction == "answerability"
    assert right.e_q.state == "entail" and other.failure != "NoFailure"
    assert right.verdict is not None and other.verdict is not None
    assert other.verdict.p_unsupported > right.verdict.p_unsupported

    question = "What is the capital of Australia?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = diagnose(question, passages, "The capital of Australia is Canberra.")
    assert d.e_q.state == "neutral" and d.failure == "IE"


def test_rescoring_recorded_rows_gives_the_diagnosers_verdict(bundled_engine: Engine) -> None:
    """`ragmend verdict score` decides from the features bench detect recorded what the live
    diagnoser decided (the same model): the offline scoring of a refitted verdict is the online one."""
    base = bundled_engine.diagnoser
    model = open_verdict("bundled")
    assert model is not None
    diagnoser = _with_options(base, verdict=model)
    rows, verdicts = [], []
    for n, (question, response) in enumerate(
        [*CASES, ("Which airport is located in Elko, Nevada?", "Elko Regional Airport is in Elko, Nevada.")]
    ):
        passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
        case = Case(
            set="cases",
            group="all",
            id=str(n),
            split="test",
            query=question,
            passages=tuple(passages),
            response=response,
            unsupported=n < len(CASES),
        )
        d = diagnoser.diagnose(question, passages, response)
        rows.append(record(case, d))
        verdicts.append(d)
    settings = bundled_engine.settings.diagnosis
    rescored = rescore(
        rows,
        model,
        settings.relevance_threshold,
        refute_threshold=settings.refute_threshold,
        support_floor=settings.support_floor,
    )
    assert rows[0]["features"]["refuted"] >= (settings.refute_threshold or 1.0)  # Elko: refuted
    for again, d in zip(rescored, verdicts, strict=True):
        assert d.verdict is not None
        assert d.verdict.profile == "response"  # given responses, no log-probabilities
        assert again["score"] == pytest.approx(d.verdict.p_unsupported, abs=2e-3)
        assert again["failure"] == d.failure


def test_the_user_reads_citations_and_what_the_policy_says(bundled_engine: Engine) -> None:
    """engine/presentation.py on real diagnoses: a supported sentence cites the passage that
    entails it; an unsupported answer is annotated, or replaced by an abstention naming what was
    found; `off` leaves the unsupported text as generated."""
    question = "Which airport is located in Elko, Nevada?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    right = "Elko Regional Airport is located in Elko, Nevada."
    d = bundled_engine.diagnoser.diagnose(question, passages, right)
    evidence = [(p.id, p.title) for p in passages]
    shown = present(right, d, evidence)
    (sentence,) = shown.sentences
    assert sentence.supported and sentence.passages
    cited = passages[sentence.passages[0] - 1]
    assert "Elko" in cited.title + cited.text
    assert shown.text == right + "".join(f"[{n}]" for n in sentence.passages) and shown.policy_applied is None
    assert present(right, d, evidence, Reading(citations=False)).text == right

    question, wrong = CASES[1]  # Canberra, which no passage names
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    evidence = [(p.id, p.title) for p in passages]
    d = bundled_engine.diagnoser.diagnose(question, passages, wrong)
    assert d.failed
    # An uncertain failure keeps the answer, its unsupported sentence marked, whatever the policy
    # but off, with what the check doubts and how sure it is.
    unsure = present(wrong, replace(d, grade="uncertain"), evidence, Reading("abstain"))
    assert unsure.policy_applied == "marked" and unsure.abstained_by is None
    assert (
        unsure.text.startswith(f"{wrong} [unsupported]") and unsure.note and unsure.text.endswith(unsure.note)
    )
    assert present(wrong, replace(d, grade="uncertain"), evidence, Reading("off")).text == wrong
    d = replace(d, grade="confident")  # what each policy does with a confident one
    annotated = present(wrong, d, evidence, Reading("annotate"))
    assert annotated.policy_applied == "annotate" and "[unsupported]" in annotated.text
    assert annotated.text.endswith(NOT_ANSWERED if d.failure == "IE" else NOT_SUPPORTED)
    abstained = present(wrong, d, evidence, Reading("abstain"))
    assert abstained.text.startswith(ABSTENTION_TEXT) and "Canberra" not in abstained.text
    assert f"[1] {passages[0].title}" in abstained.text
    assert present(wrong, d, evidence, Reading("off")).text == wrong
    # abstain_unanswered: the statement where the sources do not answer the question (IE, or
    # the evidence's P(answerable) low), the annotation where they answer it and the answer is
    # not what they say.
    either = present(wrong, d, evidence, Reading("abstain_unanswered"))
    support = d.e_q.support
    unanswered = d.failure == "IE" or (support is not None and support < UNANSWERED_BELOW)
    assert either.text == (abstained.text if unanswered else annotated.text)
    assert either.abstained_by == ("answer_policy" if unanswered else None)
    # The same failed answer, its evidence judged answerable: annotated; judged not: abstained.
    for p_answerable, expected in ((0.95, annotated.text), (UNANSWERED_BELOW / 2, abstained.text)):
        judged = replace(d, failure="WR", e_q=replace(d.e_q, support=p_answerable))
        assert present(wrong, judged, evidence, Reading("abstain_unanswered")).text == expected.replace(
            NOT_ANSWERED, NOT_SUPPORTED
        )
    # The operator's operating point (server.unanswered_below) moves that line: the same evidence
    # at P(answerable) 0.7 is abstained over at 0.8 and annotated at 0.6.
    middling = replace(d, failure="WR", e_q=replace(d.e_q, support=0.7))
    for below, expected in ((0.8, abstained.text), (0.6, annotated.text)):
        read = present(wrong, middling, evidence, Reading("abstain_unanswered", unanswered_below=below))
        assert read.text == expected.replace(NOT_ANSWERED, NOT_SUPPORTED)


def test_retrieved_passages_are_read_with_the_vectors_the_index_holds(bundled_engine: Engine) -> None:
    """The engine's diagnoser takes its passages' vectors from the index (no second encoding);
    EGC and the query similarities come out as from encoding the passages afresh (the index
    encoded them with their title as metadata, the diagnosis as "title: text"), and the
    decisions are the same. Passages the index does not hold are encoded."""
    base = bundled_engine.diagnoser
    assert base.stored_vectors is not None
    encoded = Diagnoser(base.nli, base.embed, base.options, reranker=base.reranker)
    for question, response in [
        *CASES,
        ("Which airport is located in Elko, Nevada?", "Elko Regional Airport."),
    ]:
        passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
        assert base.stored_vectors([p.id for p in passages]) is not None
        stored, fresh = (
            base.diagnose(question, passages, response),
            encoded.diagnose(question, passages, response),
        )
        # At most one evidence-claim edge may flip (a similarity at tau, the two encodings of a
        # passage differing slightly): 1/(3k) of the score for one claim over k passages.
        assert stored.egc.score == pytest.approx(fresh.egc.score, abs=1 / (3 * len(passages)) + 1e-4)
        assert (stored.failure, stored.stage) == (fresh.failure, fresh.stage)
    given = [p.model_copy(update={"id": f"given-{n}"}) for n, p in enumerate(passages)]
    assert base.stored_vectors([p.id for p in given]) is None


# Questions about the bundled corpus in other languages, with answers in the same language: the
# English rules would read their words as names and their sentences by English punctuation.
NOT_ENGLISH = [
    ("de", "Welcher Flughafen liegt in Elko, Nevada?", "Der regionale Flughafen Elko liegt in Elko, Nevada."),
    (
        "fr",
        "Quel aéroport se trouve à Elko, dans le Nevada ?",
        "L'aéroport régional d'Elko se trouve à Elko.",
    ),
    ("es", "¿Cuál es la capital de Australia?", "La capital de Australia es Canberra."),
    ("zh", "哪个机场位于内华达州的埃尔科？", "埃尔科地区机场位于埃尔科。"),
]


@pytest.mark.parametrize(("language", "question", "response"), NOT_ENGLISH, ids=[c[0] for c in NOT_ENGLISH])
def test_a_question_in_another_language_is_not_judged_and_says_so(
    bundled_engine: Engine, language: str, question: str, response: str
) -> None:
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(question, passages, response)
    assert d.language == language and not d.judged
    assert d.not_judged is not None and "question" in d.not_judged and "English" in d.not_judged
    # Nothing was checked: no claim judged, no failure claimed, no verdict, no repair to follow.
    assert d.e_r.hypotheses == () and d.verdict is None and not d.failed
    shown = present(response, d, [(p.id, p.title) for p in passages])
    assert shown.text == f"{response} {NOT_CHECKED}" and shown.sentences == ()
    body = api_diagnosis(d).model_dump()
    assert body["not_judged"] == d.not_judged and body["language"] == language


def test_an_english_question_answered_in_another_language_is_not_judged(bundled_engine: Engine) -> None:
    question = "Which airport is located in Elko, Nevada?"
    passages, _ = bundled_engine.pipeline.retrieve(question, bundled_engine.config())
    d = bundled_engine.diagnoser.diagnose(
        question, passages, "Der regionale Flughafen Elko liegt in Elko, Nevada."
    )
    assert d.language == "de" and d.not_judged is not None and "answer" in d.not_judged
    english = bundled_engine.diagnoser.diagnose(question, passages, "Elko Regional Airport is in Elko.")
    assert english.judged and english.language == "en" and english.e_r.hypotheses
