"""train/grounded_pairs.py: which sentence of a judged response gets which NLI label, and the source
window a sentence is judged against."""

from __future__ import annotations

from ragmend.corpora.grounded import Grounded
from ragmend.train.grounded_pairs import pairs_of, sentence_labels, window

SOURCE = (
    "The council met on Monday. It approved a new bridge over the Aire. "
    "The bridge will cost 12 million pounds. Work starts in May. "
    "The mayor, Ann Cole, opened the meeting. Rain fell all day."
)


def grounded(
    response: str, unsupported: bool, spans: tuple[tuple[int, int], ...] | None, **kw: str
) -> Grounded:
    fields = {"set": "xsum_hallucination", "kind": "", **kw}
    return Grounded(
        id="g",
        set=fields["set"],
        task="summary",
        question="",
        source=(SOURCE,),
        response=response,
        unsupported=unsupported,
        spans=spans,
        group="grp",
        kind=fields["kind"],
    )


def test_each_sentence_is_labelled_by_the_spans_that_touch_it() -> None:
    response = "The council approved a new bridge. The bridge will cost 40 million pounds."
    at = response.index("40 million")
    marked = grounded(response, True, ((at, at + 10),))
    assert sentence_labels(marked) == [
        ("The council approved a new bridge.", "entailment"),  # annotators read it and let it stand
        ("The bridge will cost 40 million pounds.", "neutral"),
    ]
    # A set whose spans do not mark the whole of what is wrong keeps only the marked sentence.
    assert sentence_labels(grounded(response, True, ((at, at + 10),), set="factcheck_gpt")) == [
        ("The bridge will cost 40 million pounds.", "neutral")
    ]
    # A contradiction where the set says so; spans unknown: only a one-sentence response is kept.
    negated = grounded("The council did not approve the bridge.", True, None, kind="negation")
    assert sentence_labels(negated) == [("The council did not approve the bridge.", "contradiction")]
    assert sentence_labels(grounded(response, True, None)) == []
    assert [label for _, label in sentence_labels(grounded(response, False, ()))] == ["entailment"] * 2


def test_the_window_holds_the_sentences_the_hypothesis_rests_on() -> None:
    text, cover = window(SOURCE, "The mayor Ann Cole opened the meeting about the bridge.", words=20)
    assert "The mayor, Ann Cole, opened the meeting." in text and cover == 1.0
    assert len(text.split()) <= 20 and "Rain fell all day." not in text
    # A supported sentence is paired where its window holds its words, and left out where the
    # source cannot (its evidence is elsewhere: "entailment" would teach entailing the unseen).
    assert pairs_of(grounded("Ann Cole approved 12 million pounds for the Aire bridge in May.", False, ()))
    claim = "Ann Cole approved the Aire bridge."
    elsewhere = Grounded(
        id="g",
        set="frank",
        task="summary",
        question="",
        source=("Rain fell all day.",),
        response=claim,
        unsupported=False,
        spans=(),
        group="grp",
    )
    assert pairs_of(elsewhere) == []
