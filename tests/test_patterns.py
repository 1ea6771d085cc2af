"""The diagnosis' text patterns (diagnosis/patterns.py): names, numbers, years and dates,
abbreviations and sentence ends, each pinned, and where two variants of one exist, the case on
which they differ (each caller keeps its own reading)."""

from __future__ import annotations

import re

import pytest

from ragmend.diagnosis.comparison import first_date, opening_sentence
from ragmend.diagnosis.compound import decompose, split_conjunction
from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.off_question import has_kind_asked, other_year
from ragmend.diagnosis.patterns import (
    ABBREVIATION_END,
    DATE,
    FULL_NAME,
    MONTH_ABBREVIATIONS,
    MONTHS,
    NAME,
    NAME_ABBREVIATIONS,
    NAME_LOOSE,
    NUMBER,
    NUMBER_RUN,
    NUMBER_WORD,
    OPENING_ABBREVIATION_END,
    OPENING_SENTENCE_END,
    QUOTED,
    SENTENCE_END,
    TIME,
    YEAR_IN_TEXT,
    ends_name_run,
    opening_word,
)
from ragmend.diagnosis.roles import credited_roles
from ragmend.diagnosis.spans import key_spans
from ragmend.diagnosis.types import Date
from tests.bounded import finishes

# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Gerald R. Ford International Airport",
        "Bank of America",
        "Vincent van Gogh",
        "Center for Disease Control",
    ],
)
def test_a_name_is_capitalised_words_joined_by_a_few_connectors(name: str) -> None:
    assert re.fullmatch(NAME, name)


def test_and_joins_two_names_never_one() -> None:
    assert re.findall(NAME, "Simon and Garfunkel") == ["Simon", "Garfunkel"]
    assert re.findall(NAME_LOOSE, "Simon and Garfunkel") == ["Simon", "Garfunkel"]


def test_a_key_span_stops_where_the_loose_name_of_a_claims_subject_goes_on() -> None:
    # "&", "le", "the" and a curly apostrophe end a key span: each part is looked up on its own.
    text = "Simon & Schuster and Fazoli\u2019s met John le Carr\u00e9"
    assert re.findall(NAME, text) == ["Simon", "Schuster", "Fazoli", "John", "Carr\u00e9"]
    assert re.findall(NAME_LOOSE, text) == ["Simon & Schuster", "Fazoli\u2019s", "John le Carr\u00e9"]
    assert key_spans("Simon & Garfunkel toured.") == ["Simon", "Garfunkel"]
    # So a claim whose subjects are such names is split name by name ...
    assert decompose("John le Carr\u00e9 and Tim Winton are novelists.") == [
        "John le Carr\u00e9 is a novelist.",
        "Tim Winton is a novelist.",
    ]
    assert decompose("Simon & Schuster and Penguin Books are publishers.") == [
        "Simon & Schuster is a publisher.",
        "Penguin Books is a publisher.",
    ]


def test_for_joins_a_key_span_and_no_subject_of_a_claim() -> None:
    assert re.fullmatch(NAME, "Center for Disease Control")
    assert not re.fullmatch(NAME_LOOSE, "Center for Disease Control")
    assert key_spans("The Center for Disease Control is in Atlanta.") == [
        "Center for Disease Control",
        "Atlanta",
    ]
    # The loose name does not cover the subject: the claim stays whole, the cautious outcome.
    claim = "Center for Disease Control and Red Cross are located in Atlanta."
    assert decompose(claim) == [claim]


def test_a_cast_in_brackets_is_a_full_name() -> None:
    assert re.fullmatch(FULL_NAME, "Jennifer Aniston")
    assert not re.fullmatch(FULL_NAME, "Missouri")
    assert not re.fullmatch(FULL_NAME, "Bank of America")
    cast = "The sitcom stars Rachel Green (Jennifer Aniston), Phoebe Buffay (Lisa Kudrow) and more."
    assert credited_roles(cast) == {
        "rachel green": frozenset({"jennifer aniston"}),
        "phoebe buffay": frozenset({"lisa kudrow"}),
    }
    assert credited_roles("The show is set in Springfield (Missouri), and more.") == {}


def test_a_quoted_title_in_straight_or_curly_quotes() -> None:
    assert re.findall(QUOTED, 'in "Baby Driver" and \u201cCarrie\u201d, not "x"') == ["Baby Driver", "Carrie"]


def test_a_second_clause_opening_with_a_name_is_a_claim_of_its_own() -> None:
    # A right answer the NLI model called contradicted as one claim: a window settles one half.
    assert split_conjunction("Karjiang is a mountain and Sherpi Kangri is a mountain peak.") == [
        "Karjiang is a mountain.",
        "Sherpi Kangri is a mountain peak.",
    ]


# -- numbers ---------------------------------------------------------------------------------------


def test_a_number_in_a_key_span_needs_no_word_boundary_and_drops_trailing_punctuation() -> None:
    text = "Model x12 sold 1,200 units in 1990."
    assert re.findall(NUMBER_RUN, text) == ["12", "1,200", "1990"]
    assert NUMBER.findall(text) == ["1,200", "1990"]  # no number inside "x12"
    assert key_spans(text) == ["Model", "12", "1,200", "1990"]
    assert key_spans("The F16 flew.") == ["F16"]  # a name first
    # A point before a letter stays in a word-bounded number, not in a key span's.
    assert NUMBER.findall("item 1.a") == ["1."]
    assert re.findall(NUMBER_RUN, "item 1.a") == ["1"]


def test_a_span_that_is_a_number() -> None:
    assert NUMBER.fullmatch("1,200")
    assert not NUMBER.fullmatch("Route 66")


def test_numbers_in_words_answer_how_many() -> None:
    assert NUMBER_WORD.findall("three dozen, Dozens of them, a million") == [
        "three",
        "dozen",
        "Dozens",
        "million",
    ]
    assert has_kind_asked("How many members does the band have?", "The band has five members.")
    assert not has_kind_asked("How many members does the band have?", "The band is from Leeds.")


# -- years, months, dates --------------------------------------------------------------------------


def test_a_year_in_text_is_not_inside_a_longer_number() -> None:
    assert YEAR_IN_TEXT.findall("from 1999 to 2005, not 12345, 2100 or 999") == ["1999", "2005"]
    # An amount or a part of a number still holds a year here (DATE's bare year does not).
    assert YEAR_IN_TEXT.findall("$1999 and 1,2005") == ["1999", "2005"]
    assert DATE.search("$1999") is None
    assert DATE.search("1,2005") is None
    assert DATE.search("1,971,000") is None


def test_an_answer_dating_another_year_is_off_the_question() -> None:
    question = "What 2016 Punjabi film was directed by Smeep Kang?"
    assert other_year(question, "The film is Chak De Phatte (2008).")
    assert not other_year(question, "The film is Lock (2016).")


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("born June 20, 1941", Date(1941, 6, 20)),
        ("born 7 April 1941", Date(1941, 4, 7)),
        ("released in Apr. 1941", Date(1941, 4)),
        ("a 1971 film, remade in 1990", Date(1971)),
    ],
)
def test_a_date_as_precise_as_the_text_gives_it(text: str, date: Date) -> None:
    assert first_date(text) == date


def test_the_date_reader_takes_a_years_digits_in_any_script_and_the_year_check_in_ascii() -> None:
    text = "born 1\u0669\u0667\u0661"  # "1971", its last three digits Arabic-Indic
    assert first_date(text) == Date(1971)
    assert YEAR_IN_TEXT.findall(text) == []


def test_months_and_their_abbreviations() -> None:
    assert len(MONTHS) == 12 and MONTHS[4] == "may"
    assert "May" not in MONTH_ABBREVIATIONS  # a month written whole
    assert first_date("Sept. 3, 1939") == Date(1939, 9, 3)


@pytest.mark.parametrize("time", ["March", "1990", "1990s", "19th century", "nineteenth century", "summer"])
def test_a_mention_of_a_time(time: str) -> None:
    assert TIME.fullmatch(time)


def test_a_name_is_no_mention_of_a_time() -> None:
    assert not TIME.fullmatch("Marchetti")
    assert not TIME.search("Mayfield")


# -- abbreviations and sentence ends ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("ending", "in_sentences", "in_openings", "ends_a_name"),
    [
        # ending, an abbreviation to split_sentences, to opening_sentence, ends a name run
        ("Mr.", True, True, False),  # a title: none of the three ends there
        ("R.", True, True, False),  # an initial
        ("Gen.", True, False, False),  # a rank
        ("Vol.", True, False, True),  # a volume: only split_sentences knows it
        ("Inc.", True, False, True),
        ("c.", False, True, False),  # circa, before an opening's date
        ("Fr.", False, False, False),  # Father, before a name
        ("President.", False, False, True),
    ],
)
def test_each_reading_of_a_sentence_end_knows_its_own_abbreviations(
    ending: str, in_sentences: bool, in_openings: bool, ends_a_name: bool
) -> None:
    assert bool(ABBREVIATION_END.search(f"x {ending}")) is in_sentences
    assert bool(OPENING_ABBREVIATION_END.search(f"x {ending}")) is in_openings
    assert ends_name_run(ending) is ends_a_name


def test_a_name_run_is_cut_at_its_sentences_end() -> None:
    assert ends_name_run("President.")
    assert not ends_name_run("Obama")
    assert "fr" in NAME_ABBREVIATIONS and "mr" in NAME_ABBREVIATIONS
    assert credited_roles("The film cast Joe Biden as Vice President. Obama won.") == {
        "vice president": frozenset({"joe biden"})
    }


def test_a_volume_or_a_rank_ends_no_sentence() -> None:
    text = 'Gunn directed "Guardians of the Galaxy Vol. 2". Gen. Lee left on Apr. 9, 1865.'
    assert split_sentences(text) == [
        'Gunn directed "Guardians of the Galaxy Vol. 2".',
        "Gen. Lee left on Apr. 9, 1865.",
    ]


def test_sentences_end_at_any_stop_and_line_break_an_opening_only_at_a_full_stop_before_a_capital() -> None:
    text = "It won! Then 2 more followed.\nA new line. And so on."
    assert SENTENCE_END.split(text) == ["It won!", "Then 2 more followed.", "A new line.", "And so on."]
    assert [m.start() for m in OPENING_SENTENCE_END.finditer(text)] == [29, 41]
    assert opening_sentence(text) == "It won! Then 2 more followed."


def test_an_openings_date_after_circa_stays_in_the_opening_sentence() -> None:
    text = "Zbigniew Firlej (c. 1613\u20131649) was a noble. He fought."
    assert opening_sentence(text) == "Zbigniew Firlej (c. 1613\u20131649) was a noble."
    assert first_date(opening_sentence(text)) == Date(1613)
    # split_sentences ends one there: "c." is no abbreviation to it, and a digit may open a sentence.
    assert split_sentences(text) == ["Zbigniew Firlej (c.", "1613\u20131649) was a noble.", "He fought."]


def test_a_long_capitalised_text_is_no_stall_for_the_role_patterns() -> None:
    """100k characters of capitalised words, as /v1/diagnose may be given: an unbounded name made
    each start position read to the end of the run (24k characters took 20 s)."""
    out = finishes(
        "from ragmend.diagnosis.roles import claimed_roles, credited_roles\n"
        "text = ' '.join(['Alpha'] * 16_000) + '. The film cast Charles Bronson as Captain Jack.'\n"
        "print(len(credited_roles(text)), len(claimed_roles(text)))"
    )
    assert out.split() == ["1", "0"]  # the credit at the end is still read


def test_a_questions_opening_word_reads_as_a_word_boundary_does() -> None:
    assert opening_word("  Who's the older?") == "who"
    assert opening_word("WHICH came first") == "which"
    assert opening_word("Whoever wrote it") == "whoever"  # no "who" in it
    assert opening_word("who_is") == "who_is"  # an underscore joins a word, as \w does
    assert opening_word("¿Quién?") == ""
    assert opening_word("") == ""
