"""The long-premise set of `ragmend bench nli --suite`: built from TEST splits only, with
paragraph-length premises and mixed labels, and its windowed reading (the premise split into
windows of two sentences, the pair taking its most decisive window) on a fake NLI model: the
aggregation arithmetic, not the shipped model's accuracy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from ragmend.bench.suites.nli import (
    LONG_PREMISE_MIN_WORDS,
    SUITE,
    SuiteSet,
    evaluate_set,
    long_premise_test,
    most_decisive,
    suite_markdown,
)
from ragmend.corpora.nli_pairs import fever_long_premise_pairs
from ragmend.corpora.readers import NLI_LABELS, NLIPair, load_fever_claims, load_hotpotqa, split_of
from ragmend.models.nli import NLIBatch
from tests.test_datasets import DATA, needs_data


@needs_data
def test_long_premise_set_is_long_mixed_and_from_test_splits_only() -> None:
    pairs = long_premise_test(DATA, limit=20)
    assert len(pairs) >= 30
    assert all(len(p.premise.split()) >= LONG_PREMISE_MIN_WORDS for p in pairs)
    # Interleaved: the first six pairs already hold every label from both sources.
    assert {p.label for p in pairs[:6]} == set(NLI_LABELS)
    assert {p.id.split("-")[0] for p in pairs[:6]} == {"hotpot", "fever"}
    by_source = Counter((p.id.split("-")[0], p.label) for p in pairs)
    assert all(by_source[(s, lab)] for s in ("hotpot", "fever") for lab in NLI_LABELS), by_source

    hotpot = [p for p in pairs if p.id.startswith("hotpot-")]
    fever = [p for p in pairs if p.id.startswith("fever-")]
    dev_items = {i.id for i in load_hotpotqa(DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json", "dev")}
    item_ids = {p.id.rsplit("-", 1)[1] for p in hotpot}
    assert item_ids.isdisjoint(dev_items) and all(split_of(i) == "test" for i in item_ids)
    assert all(split_of(p.hypothesis) == "test" for p in fever)  # FEVER's split key is the claim
    # A neutral HotpotQA premise joins two distractor paragraphs, not the gold ones.
    gold = {p.id.rsplit("-", 1)[1]: p.premise for p in hotpot if p.label == "entailment"}
    for p in (p for p in hotpot if p.label == "neutral"):
        assert p.premise != gold.get(p.id.rsplit("-", 1)[1]) and p.premise.count(": ") >= 2

    # FEVER: the claim's own evidence first, then distractor evidence of other claims (seeded).
    claims = load_fever_claims(DATA / "fever" / "fever_claims_with_evidence_text.jsonl", split="test")[:20]
    built = fever_long_premise_pairs(claims, [], seed=0)
    assert built == fever_long_premise_pairs(claims, [], seed=0)
    for c, p in zip(claims, built, strict=True):
        assert p.premise.startswith(c.evidence_text) and len(p.premise) > len(c.evidence_text)


# The windows of two sentences (stride one) the fake model knows, and what it says of each.
WINDOW_PROBS = {
    "Ann sings. Bob dances.": (0.6, 0.3, 0.1),  # decisive 0.6
    "Bob dances. Cy runs.": (0.1, 0.1, 0.8),  # decisive 0.8: the pair's window
    "Dee swims. Eve rows.": (0.3, 0.6, 0.1),  # decisive 0.3 (neutral's mass does not count)
    "Eve rows. Fay rides.": (0.55, 0.05, 0.4),  # decisive 0.55: the pair's window
    "Gus naps.": (0.2, 0.7, 0.1),  # a one-sentence premise is its own window
}
WHOLE_PREMISE = (0.9, 0.05, 0.05)  # a premise of two windows or more, whole: entailment


class FakeNLIForWindowing:
    def __init__(self) -> None:
        self.premises: list[str] = []

    def predict(self, pairs: list[tuple[str, str]]) -> NLIBatch:
        self.premises += [p for p, _ in pairs]
        probs = np.array([WINDOW_PROBS.get(p, WHOLE_PREMISE) for p, _ in pairs], dtype=np.float32)
        return NLIBatch(probs, tuple(False for _ in pairs))


def test_windowed_scoring_takes_the_most_decisive_window() -> None:
    pairs = [
        NLIPair(premise="Ann sings. Bob dances. Cy runs.", hypothesis="h1", label="contradiction", id="a"),
        NLIPair(premise="Dee swims. Eve rows. Fay rides.", hypothesis="h2", label="neutral", id="b"),
        NLIPair(premise="Gus naps.", hypothesis="h3", label="neutral", id="c"),
    ]
    target = ("false_entailment_rate", 0.10)
    windowed = SuiteSet(
        name="w",
        title="windows",
        load=lambda _root, _limit: pairs,
        target=target,
        direction="at_most",
        windows=2,
    )
    model = FakeNLIForWindowing()
    r = evaluate_set(model, windowed, pairs)
    assert model.premises == list(WINDOW_PROBS)  # every window, in one call
    assert r["windows"] == 5 and r["n"] == 3
    assert r["confusion"]["contradiction"]["contradiction"] == 1
    assert r["confusion"]["neutral"] == {"entailment": 1, "neutral": 1, "contradiction": 0}
    assert r["false_entailment_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert r["target"] == {"metric": "false_entailment_rate", "at_most": 0.10, "met": False}

    whole = evaluate_set(
        FakeNLIForWindowing(),
        SuiteSet(
            name="m", title="model", load=lambda _root, _limit: pairs, target=target, direction="at_most"
        ),
        pairs,
    )
    assert whole["false_entailment_rate"] == pytest.approx(2 / 3, abs=1e-4) and "windows" not in whole

    probs = np.array([WINDOW_PROBS[w] for w in list(WINDOW_PROBS)])
    assert np.allclose(most_decisive(probs, [2, 2, 1]), probs[[1, 3, 4]])

    table = suite_markdown({"w": {"title": "windows", **r}}, None, "ragmend bench nli --suite")
    assert "false_entailment_rate <= 0.1" in table and "| 33.3 |" in table


def test_the_long_premise_sets_are_in_the_suite_with_an_at_most_target() -> None:
    sets = {s.name: s for s in SUITE}
    model, windows = sets["long_premise_test"], sets["long_premise_test_windows2"]
    assert model.load is windows.load and (model.windows, windows.windows) == (0, 2)
    assert model.target == windows.target == ("false_entailment_rate", 0.10)
    assert model.direction == windows.direction == "at_most"


@needs_data
def test_sets_option_refuses_an_unknown_set() -> None:
    from ragmend.cli.main import app

    result = CliRunner().invoke(app, ["bench", "nli", "--suite", "--sets", "long_premise_test,nope"])
    assert result.exit_code == 2 and "long_premise_test_windows2" in result.output


@needs_data
def test_the_swap_within_set_pairs_each_true_sentence_with_its_swap_from_test_splits() -> None:
    """Names in another role: each swap beside the true sentence it was made from, on the same
    premise, from TEST items and claims only; the stand-in is a name that premise holds."""
    from ragmend.bench.suites.nli import swap_within_test

    pairs = swap_within_test(DATA, limit=20)
    by_id = {p.id: p for p in pairs}
    swaps = [p for p in pairs if p.label == "contradiction"]
    assert swaps and len(pairs) == 2 * len(swaps)
    assert {p.id.split("-")[0] for p in swaps} == {"hotpot", "fever"}
    for swap in swaps:
        true = by_id[f"{swap.id}-true"]
        assert true.label == "entailment" and true.premise == swap.premise
        assert true.hypothesis != swap.hypothesis
    hotpot = {
        i.id for i in load_hotpotqa(DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json", split="test")
    }
    assert all(p.id.split("-")[2] in hotpot for p in swaps if p.id.startswith("hotpot-"))
    fever = [p for p in pairs if p.id.startswith("fever-") and p.label == "entailment"]
    assert all(split_of(p.hypothesis) == "test" for p in fever)
    sets = {s.name: s for s in SUITE}
    assert sets["swap_within_test"].target == ("false_entailment_rate", 0.10)
    assert sets["swap_within_test"].paired


def test_true_above_swap_compares_each_sentence_with_its_own_swap() -> None:
    from ragmend.bench.suites.nli import true_above_swap

    pairs = [
        NLIPair(premise="p", hypothesis="a", label="contradiction", id="x"),
        NLIPair(premise="p", hypothesis="b", label="entailment", id="x-true"),
        NLIPair(premise="q", hypothesis="c", label="contradiction", id="y"),
        NLIPair(premise="q", hypothesis="d", label="entailment", id="y-true"),
    ]
    probs = np.array([[0.2, 0.1, 0.7], [0.9, 0.05, 0.05], [0.95, 0.0, 0.05], [0.9, 0.05, 0.05]])
    assert true_above_swap(pairs, probs) == 0.5  # x: the true sentence wins; y: its swap does
    assert true_above_swap(pairs[1:2], probs[1:2]) is None
