"""In-domain NLI pairs: real spaCy NER swaps over the real dev splits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragmend.corpora.nli_pairs import EntitySwapper, build_in_domain_pairs
from ragmend.corpora.readers import load_hotpotqa, split_of
from ragmend.models.registry import ModelRegistry
from tests.test_datasets import DATA, needs_data


def test_swap_uses_an_entity_of_the_same_type_absent_from_the_premise(registry: ModelRegistry) -> None:
    nlp = registry.spacy
    swapper = EntitySwapper(nlp, ["Barack Obama visited Berlin.", "Angela Merkel lives in Paris."], seed=1)
    swap = swapper.swap(
        "Angela Merkel was born in Hamburg.", avoid="Angela Merkel was born in Hamburg in 1954."
    )
    assert swap is not None and swap.old in {"Angela Merkel", "Hamburg"}
    assert swap.new in {"Barack Obama", "Berlin", "Paris"} and swap.new != swap.old
    assert swap.text != "Angela Merkel was born in Hamburg." and swap.new in swap.text
    # An answer's stand-in: its type from spaCy on the answer alone, never a name in `avoid`.
    assert swapper.alternative("Angela Merkel", avoid="Barack Obama met her.") is None
    assert swapper.alternative("Hamburg", avoid="Paris") == "Berlin"
    assert swapper.alternative("the quick brown fox") is None  # no entity, no type
    assert nlp(swap.new).ents[0].label_ == swap.label
    assert swapper.swap("nothing named here at all") is None


def test_a_swap_within_takes_a_name_the_premise_holds_in_another_role(registry: ModelRegistry) -> None:
    """The stand-in comes from the premise itself: the hard negative the pool swaps never make
    (docs/nli.md, "Names in another role")."""
    import random

    swapper = EntitySwapper(registry.spacy, [], seed=0)
    premise = "Ladd stars along with Audrey Dalton, Charles Bronson as Captain Jack, in Oregon."
    swap = swapper.swap_within("Charles Bronson played Captain Jack.", premise, random.Random(0))
    assert swap is not None and swap.old == "Charles Bronson"
    assert swap.new in premise and swap.new != swap.old and swap.new not in {"Captain Jack"}
    assert swap.text == f"{swap.new} played Captain Jack."
    # Nothing of the sentence's types elsewhere in the premise: no swap.
    assert swapper.swap_within("Charles Bronson played Captain Jack.", "A film.", random.Random(0)) is None


@pytest.mark.slow
@needs_data
def test_in_domain_pairs_come_from_dev_only_with_the_right_labels(registry: ModelRegistry) -> None:
    pairs = build_in_domain_pairs(DATA, registry.spacy, seed=0, limit=30)
    expected = {
        "fever_claim": {"entailment", "contradiction"},
        "fever_swap": {"contradiction"},
        "fever_unrelated": {"neutral"},
        "fever_insufficient": {"neutral"},
        "hotpot_support": {"entailment"},
        "hotpot_swap": {"contradiction"},
        "hotpot_distractor": {"neutral"},
        "hotpot_statement": {"entailment"},
        "hotpot_statement_swap": {"contradiction"},
        "hotpot_statement_distractor": {"neutral"},
        "hotpot_long_statement": {"entailment"},
        "hotpot_long_statement_swap": {"contradiction"},
        "hotpot_long_statement_distractor": {"neutral"},
        "fever_long": {"entailment", "contradiction", "neutral"},
        "hotpot_swap_within": {"contradiction"},
        "fever_swap_within": {"contradiction"},
    }
    assert set(pairs) == set(expected)
    for source, labels in expected.items():
        assert pairs[source], source
        assert set(Counter(p.label for p in pairs[source])) == labels, source
    for p in pairs["fever_claim"] + pairs["fever_insufficient"]:
        assert split_of(p.hypothesis) == "dev"  # FEVER's split key is the claim text
    for p in pairs["hotpot_support"]:
        assert p.hypothesis in p.premise
    for swap in pairs["hotpot_swap"]:
        assert swap.hypothesis not in swap.premise
    statements = {p.id.removeprefix("hotpot-st-"): p for p in pairs["hotpot_statement"]}
    for swap in pairs["hotpot_statement_swap"]:
        assert swap.hypothesis != statements[swap.id.removeprefix("hotpot-st-swap-")].hypothesis
    # Where spaCy finds the answer in the statement, the answer is what was swapped: a wrong answer
    # in its slot, the failure the diagnosis' query signal must catch.
    answers = {
        i.id: i.answer
        for i in load_hotpotqa(DATA / "hotpotqa" / "hotpot_dev_distractor_merged.json", split="dev")[:30]
    }
    for swap in pairs["hotpot_statement_swap"]:  # a wrong answer in its slot
        answer = answers[swap.id.removeprefix("hotpot-st-swap-")].lower()
        statement = statements[swap.id.removeprefix("hotpot-st-swap-")].hypothesis.lower()
        assert swap.hypothesis.lower().count(answer) < statement.count(answer)
    # The long files, so that length is not read as support: the same statements against premises
    # about twice as long (both gold paragraphs, or two distractors), FEVER evidence padded with
    # other pages' evidence.
    short_words = np.median([len(p.premise.split()) for p in pairs["hotpot_statement"]])
    assert np.median([len(p.premise.split()) for p in pairs["hotpot_long_statement"]]) > 1.5 * short_words
    assert all(p.premise.count(": ") >= 2 for p in pairs["hotpot_long_statement_distractor"])
    for p in pairs["fever_long"]:
        assert split_of(p.hypothesis) == "dev"
    assert np.median([len(p.premise.split()) for p in pairs["fever_long"]]) >= 100
    # Swaps within the premise: the stand-in is a name the premise holds and the true one does not.
    support = {p.id.removeprefix("hotpot-"): p for p in pairs["hotpot_support"]}
    for swap in pairs["hotpot_swap_within"]:
        true = support[swap.id.removeprefix("hotpot-within-")]
        assert swap.premise == true.premise and swap.hypothesis != true.hypothesis
    claims = {p.id.removeprefix("fever-"): p for p in pairs["fever_claim"]}
    for swap in pairs["fever_swap_within"]:  # a DEV claim with a name swapped, on its own evidence
        true = claims[swap.id.removeprefix("fever-within-")]
        assert swap.premise == true.premise and swap.hypothesis != true.hypothesis
        assert split_of(true.hypothesis) == "dev"
    again = build_in_domain_pairs(DATA, registry.spacy, seed=0, limit=30)
    assert again["hotpot_swap"] == pairs["hotpot_swap"]  # seeded: the same data every time


@pytest.mark.parametrize("limit", [5])
@needs_data
def test_pairs_cli_writes_one_file_per_source(tmp_path: Path, limit: int) -> None:
    from typer.testing import CliRunner

    from ragmend.cli.main import app

    result = CliRunner().invoke(
        app,
        [
            "nli",
            "pairs",
            "--out",
            str(tmp_path),
            "--data-root",
            str(DATA),
            "--limit",
            str(limit),
            "--grounded",
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(list(tmp_path.glob("*.jsonl"))) == 16
    # The grounded pairs: one file per set that gave any, each row with its set, shape and group,
    # and a data card that counts them all.
    files = sorted(tmp_path.glob("grounded/*.jsonl"))
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    card = json.loads((tmp_path / "grounded" / "card.json").read_text())
    assert len(files) >= 8 and card["total"] == len(rows) > 0
    assert {r["label"] for r in rows} == {"entailment", "neutral", "contradiction"}
    assert all(r["group"] and r["task"] and r["premise"] and r["hypothesis"] for r in rows)
    assert "| contractnli |" in (tmp_path / "grounded" / "DATA_CARD.md").read_text()
    result = CliRunner().invoke(app, ["nli", "pairs", "--out", str(tmp_path), "--data-root", str(tmp_path)])
    assert result.exit_code == 2 and "does not hold the shared data" in " ".join(result.output.split())
