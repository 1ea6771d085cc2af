"""The shared data loaders and the fixed dev/test split rule, on the real files in ../shared/data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragmend.corpora.readers import (
    NLI_LABELS,
    NLI_SETS,
    hotpotqa_paragraphs,
    load_fever_claims,
    load_hotpotqa,
    load_nli,
    load_sufficient_facts,
    split_of,
)

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not beside this checkout")


def test_split_rule_is_sha256_parity() -> None:
    for key in (
        "5a7166395542994082a3e814",
        "Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.",
    ):
        parity = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2
        assert split_of(key) == ("dev" if parity == 0 else "test")


@needs_data
def test_hotpotqa_counts_match_the_data_readme() -> None:
    items = load_hotpotqa(DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json")
    assert len(items) == 1388
    assert sum(i.split == "dev" for i in items) == 698 and sum(i.split == "test" for i in items) == 690
    assert len(hotpotqa_paragraphs(items)) == 13471
    with_sentences = [i for i in items if i.supporting_sentences()]
    # 957 items have sentence-level facts; in 153 of them no supporting title is among the context
    # paragraphs of this merged file, which leaves 804 with a sentence to point at.
    assert len(with_sentences) == 804
    title, paragraph, sentence = with_sentences[0].supporting_sentences()[0]
    assert sentence and sentence in paragraph and title in with_sentences[0].supporting_titles
    for item in with_sentences[:50]:
        for _, window, sentence in item.supporting_sentences(max_words=40):
            # The fact is always kept; neighbours only while they fit.
            assert sentence in window
            assert len(window.split()) <= max(40, len(sentence.split()))


def test_sentence_window_prefers_the_following_sentence() -> None:
    from ragmend.corpora.readers import _sentence_window

    sents = ["a b c. ", "d e. ", "f g h. ", "i j. "]
    assert _sentence_window(sents, 1, 2) == (1, 2)
    assert _sentence_window(sents, 1, 5) == (1, 3)
    assert _sentence_window(sents, 1, 8) == (0, 3)
    assert _sentence_window(sents, 1, 100) == (0, 4)


@needs_data
def test_fever_loaders_split_by_claim() -> None:
    claims = load_fever_claims(DATA / "fever" / "fever_claims_with_evidence_text.jsonl")
    assert len(claims) == 1552 and {c.label for c in claims} == {"SUPPORTS", "REFUTES"}
    dev = load_fever_claims(DATA / "fever" / "fever_claims_with_evidence_text.jsonl", split="dev")
    assert 0 < len(dev) < len(claims) and all(split_of(c.claim) == "dev" for c in dev)
    nei = load_sufficient_facts(DATA / "fever" / "sufficientfacts_fever.jsonl")
    assert len(nei) == 841 and {c.label for c in nei} == {"NOT ENOUGH INFO"}


@needs_data
def test_every_listed_nli_set_loads() -> None:
    for s in NLI_SETS:
        pairs = load_nli(DATA / s.relpath, limit=50)
        assert len(pairs) == 50 and {p.label for p in pairs} <= set(NLI_LABELS), s.name
    assert not next(s for s in NLI_SETS if s.name.startswith("anli")).permissive


def test_bad_nli_rows_name_the_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(
        json.dumps({"premise": "a", "hypothesis": "b", "label": "entailment"})
        + "\n"
        + json.dumps({"premise": "a", "hypothesis": "b", "label": "maybe"})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"x\.jsonl:2"):
        load_nli(p)
