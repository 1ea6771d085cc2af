"""Choice questions and comparisons in time (diagnosis/choices.py, diagnosis/comparison.py): which
answer a question offers, which one a response picks, and whether the passages' own dates agree."""

from __future__ import annotations

import pytest

from ragmend.diagnosis.choices import offered_choice, picked_alternative
from ragmend.diagnosis.comparison import (
    check_comparison,
    first_date,
    only_the_pick,
    opening_sentence,
    time_direction,
)
from ragmend.diagnosis.off_question import unaddressed
from ragmend.diagnosis.types import Date

# HotpotQA-style passages: (title, text), each opening with its subject's date.
BEDKNOBS = ("Bedknobs and Broomsticks", "Bedknobs and Broomsticks is a 1971 musical fantasy film.")
MUPPETS = ("The Muppet Christmas Carol", "The Muppet Christmas Carol is a 1992 musical fantasy film.")
MERBOLD = ("Ulf Merbold", "Dr. Ulf Dietrich Merbold (born June 20, 1941) is a German astronaut.")
HERMASZEWSKI = ("Mirosław Hermaszewski", "Mirosław Hermaszewski (born 15 September 1941) is a cosmonaut.")


@pytest.mark.parametrize(
    ("question", "alternatives"),
    [
        ("Who is older, Steven Tyler, or Elizabeth Fraser?", ("Steven Tyler", "Elizabeth Fraser")),
        ("Which came out first, Dinosaur or McFarland, USA", ("Dinosaur", "McFarland, USA")),
        (
            "Which town has a greater population in 2010, Minden, Nevada or Gardnerville, Nevada?",
            ("Minden, Nevada", "Gardnerville, Nevada"),
        ),
        ("who is younger Ulrich Walter or  Luca Parmitano?", ("Ulrich Walter", "Luca Parmitano")),
        ('Which came to market first, "Hey Pa!" or "Poleconomy"', ("Hey Pa!", "Poleconomy")),
        (
            "Which of these, Northwestern University or Johns Hopkins University, have a campus abroad?",
            ("Northwestern University", "Johns Hopkins University"),
        ),
    ],
)
def test_the_answers_a_question_offers(question: str, alternatives: tuple[str, str]) -> None:
    choice = offered_choice(question)
    assert choice is not None and choice.alternatives == alternatives


@pytest.mark.parametrize(
    "question",
    [
        "Was Kanako Momota or Mark Hollis born first?",
        "What is the capital of Australia?",
        "Is it A or B or C",
    ],
)
def test_no_offered_answers(question: str) -> None:
    assert offered_choice(question) is None


@pytest.mark.parametrize(
    ("response", "picked"),
    [
        ("Jed Hoyer is older than John William Henry II.", 0),
        ("John William Henry II is older than Jed Hoyer.", 1),
        ("John William Henry II", 1),
        ("Jedediah Hoyer", 0),  # a fuller name than the question's
        ("Theo Epstein is older than Jed Hoyer.", "neither"),  # the one named is neither
        ("Jed Hoyer is older than Theo Epstein.", "neither"),  # compared with another
        ("Jed Hoyer is older than him.", 0),
        ("He is older.", None),  # a pronoun: not judged
        ("No.", None),
        ("I don't know.", None),
    ],
)
def test_the_alternative_an_answer_picks(response: str, picked: object) -> None:
    assert picked_alternative("Who is older, Jed Hoyer or John William Henry II?", response) == picked


def test_naming_neither_offered_answer_does_not_address_the_question() -> None:
    question = "Who is older, Steven Tyler, or Elizabeth Fraser?"
    assert unaddressed(question, "Steven Nathan Zwicker is older than Elizabeth Fraser.") == "choice"
    assert unaddressed(question, "Steven Tyler is older than Elizabeth Fraser.") is None


@pytest.mark.parametrize(
    ("ask", "direction"),
    [
        ("Who is older", "earlier"),
        ("Which documentary is newer", "later"),
        ("Who was born first", "earlier"),
        ("Which film was released more recently", "later"),
        ("Which band was formed first", "earlier"),
        ("Who died first", None),  # the opening date is a birth date
        ("Who was older when they died", None),
        ("Which band has more members", None),
        ("Which came first in the race", None),  # a rank, no date
    ],
)
def test_what_a_choice_asks_of_the_dates(ask: str, direction: str | None) -> None:
    assert time_direction(ask) == direction


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("Ulf Merbold (born June 20, 1941) is a physicist.", Date(1941, 6, 20)),
        ("Elizabeth Fraser (born 7 April 1941) is a swimmer.", Date(1941, 4, 7)),
        ("Bedknobs and Broomsticks is a 1971 film.", Date(1971)),
        ("Zbigniew Firlej (c. 1613–1649) was a noble.", Date(1613)),
        ("The club has 1,500 members.", None),
    ],
)
def test_the_first_date_of_an_opening(text: str, date: Date | None) -> None:
    assert first_date(text) == date


def test_an_opening_sentence_runs_past_initials_and_titles() -> None:
    text = "Dr. Ulf D. Merbold (born June 20, 1941) is a physicist. He flew in 1983."
    assert opening_sentence(text) == "Dr. Ulf D. Merbold (born June 20, 1941) is a physicist."


def test_a_comparison_against_the_passages_dates() -> None:
    question = "Which musical fantasy film is older, Bedknobs and Broomsticks or The Muppet Christmas Carol?"
    passages = [MUPPETS, BEDKNOBS]
    wrong = check_comparison(question, "The Muppet Christmas Carol is older.", passages)
    assert wrong is not None and wrong.outcome == "disagrees" and wrong.expected == 0 and wrong.picked == 1
    assert [str(d) for d in wrong.dates if d] == ["1971", "1992"]
    right = check_comparison(question, "Bedknobs and Broomsticks", passages)
    assert right is not None and right.outcome == "agrees"
    # The answer's own words can state the other direction: "newer" asked "older".
    flipped = check_comparison(question, "The Muppet Christmas Carol is newer.", passages)
    assert flipped is not None and flipped.outcome == "agrees"


def test_dates_of_one_year_compare_by_month_and_day() -> None:
    question = "Who was born first, Ulf Merbold or Mirosław Hermaszewski?"
    check = check_comparison(question, "Ulf Merbold was born June 20, 1941.", [HERMASZEWSKI, MERBOLD])
    assert check is not None and check.outcome == "agrees"
    # A year alone against a date of the same year does not decide.
    vague = ("Ulf Merbold", "Ulf Merbold (born 1941) is a German physicist.")
    check = check_comparison(question, "Ulf Merbold", [HERMASZEWSKI, vague])
    assert check is not None and check.outcome == "undecided" and check.expected is None


def test_only_an_alternatives_own_passage_dates_it() -> None:
    """Part of a name is someone else's page, and a person is not dated by a work named after
    them: neither decides."""
    question = "Who is younger, Jenny Bae or Lionel Richie?"
    bae = ("Jenny Bae", "Jenny Bae (born 1980) is a South Korean violinist.")
    album = (
        "Lionel Richie (album)",
        "Lionel Richie is the debut album by Lionel Richie, released October 1982.",
    )
    check = check_comparison(question, "Jenny Bae is younger than Lionel Richie.", [bae, album])
    assert check is not None and check.dates[1] is None and check.outcome == "undecided"
    question = "Who is older, Jed Hoyer or John William Henry II?"
    other = ("William Henry (brother of Patrick Henry)", "William Henry (1734–1785) was a son of John Henry.")
    check = check_comparison(question, "Jed Hoyer", [other])
    assert check is not None and check.dates == (None, None)


def test_not_a_comparison_in_time() -> None:
    passages = [MUPPETS, BEDKNOBS]
    assert check_comparison("Which band has more members, Lilys or Ratatat?", "Lilys.", passages) is None
    assert check_comparison("What is a musical fantasy film?", "Bedknobs and Broomsticks", passages) is None


def test_an_answer_is_only_its_pick_when_it_claims_nothing_more() -> None:
    question = "Who was born first, Aleksandr Ivanovsky or Arthur Lubin?"
    assert only_the_pick(question, ["Aleksandr Ivanovsky was born first."])
    assert only_the_pick(question, ["Aleksandr Ivanovsky was born first, in 1881."])  # a number
    assert not only_the_pick(question, ["Aleksandr Ivanovsky was born 7 August 1952."])
    assert not only_the_pick(question, ["Aleksandr Ivanovsky was born first.", "He directed films."])


def test_the_benchmark_against_gold_answers() -> None:
    """`ragmend bench comparison` on two HotpotQA-shaped items: one decided by the dates (the gold
    answer agrees, the other alternative disagrees), one with no dated passage (undecided)."""
    from ragmend.bench.suites.comparison import evaluate
    from ragmend.corpora.readers import HotpotItem

    def item(question: str, answer: str, context: tuple[tuple[str, str], ...]) -> HotpotItem:
        return HotpotItem(
            id=question,
            question=question,
            answer=answer,
            type="comparison",
            level="easy",
            supporting_titles=(),
            context=context,
            supporting_facts=(),
            sentences=(),
        )

    result = evaluate(
        [
            item(
                "Which film is older, Bedknobs and Broomsticks or The Muppet Christmas Carol?",
                "Bedknobs and Broomsticks",
                (BEDKNOBS, MUPPETS),
            ),
            item("Who was born first, Ulf Merbold or Theo Epstein?", "Ulf Merbold", (MERBOLD,)),
            item("What is the capital of Australia?", "Canberra", ()),
        ]
    )
    assert result["choice_questions"] == 2 and result["gold_responses_judged_neither"] == 0
    assert result["comparisons_in_time"] == 2 and result["decided"] == 1
    assert result["agrees_with_gold"] == 1 and result["other_alternative_disagrees"] == 1
    assert result["undecided"] == 1

    # The corpus lookup dates an alternative from another item's paragraph.
    from ragmend.bench.suites.comparison import corpus_lookup

    items = [
        item(
            "Which film is older, Bedknobs and Broomsticks or The Muppet Christmas Carol?",
            "Bedknobs and Broomsticks",
            (MUPPETS,),
        ),
        item("What is Bedknobs and Broomsticks?", "a film", (BEDKNOBS,)),
    ]
    assert evaluate(items)["decided"] == 0
    assert evaluate(items, corpus_lookup(items))["agrees_with_gold"] == 1


def test_an_alternative_missing_from_the_passages_is_dated_from_the_corpus() -> None:
    """With a title lookup (the engine's index), the page the retrieval missed dates its
    alternative; without one the check does not decide."""
    from ragmend.diagnosis.comparison import title_key

    question = "Which musical fantasy film is older, Bedknobs and Broomsticks or The Muppet Christmas Carol?"
    pages = {title_key(t): [(t, x)] for t, x in (BEDKNOBS, MUPPETS)}
    lookups: list[str] = []

    def titled(name: str) -> list[tuple[str, str]]:
        lookups.append(name)
        return pages.get(title_key(name), [])

    alone = check_comparison(question, "The Muppet Christmas Carol is older.", [MUPPETS])
    assert alone is not None and alone.outcome == "undecided"
    looked = check_comparison(question, "The Muppet Christmas Carol is older.", [MUPPETS], titled)
    assert looked is not None and looked.outcome == "disagrees"
    assert looked.from_corpus == (True, False)
    assert lookups == ["Bedknobs and Broomsticks"]  # only the missing one, by its whole name first


def test_an_answer_to_a_choice_is_labelled_by_its_pick() -> None:
    """The benchmark's label (corpora/unanswerable.correct_answer): an answer naming both offered
    answers holds the gold one whichever it picks; it is right only when its pick is the gold."""
    from ragmend.corpora.unanswerable import correct_answer

    question = "Who is younger, Keisuke Kuwata or Moya Brennan?"
    assert not correct_answer(
        "answerable", "Moya Brennan is younger than Keisuke Kuwata.", "Keisuke Kuwata", question
    )
    assert correct_answer(
        "answerable", "Keisuke Kuwata is younger than Moya Brennan.", "Keisuke Kuwata", question
    )
    assert correct_answer("answerable", "Keisuke Kuwata", "Keisuke Kuwata", question)
    # A gold answer fuller than the pick ("Charles Spencer "Charlie" Chaplin") still matches it.
    chaplin = "Who was considered more iconic, Charlie Chaplin or Bruce Bilson?"
    said = "Charlie Chaplin was considered more iconic, Bruce Bilson."
    assert correct_answer("answerable", said, 'Charles Spencer "Charlie" Chaplin', chaplin)
    # No choice offered, or no pick: containment, as before; an unanswerable question: never right.
    assert correct_answer("answerable", "It was founded in 1998.", "1998", "When was it founded?")
    assert not correct_answer("gold_removed", "Keisuke Kuwata", "Keisuke Kuwata", question)
