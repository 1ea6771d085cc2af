"""`ragmend study conflict-separability`: the NLI and the generator judge each score real
TruthfulQA DEV pairs, one row of figures per judge."""

import json

from ragmend.bench.studies import conflict_separability
from tests.test_datasets import DATA, needs_data


@needs_data
def test_each_judge_scores_every_pair(tmp_path):
    for judge in ("nli", "generator"):
        out = tmp_path / f"{judge}.json"
        argv = ["--judge", judge, "--offset", "150", "--limit", "3", "--data-root", str(DATA)]
        argv += ["--out", str(out)]
        assert conflict_separability.main(argv) == 0
        figures = json.loads(out.read_text())
        assert figures["differ_pairs"] == 3 and figures["agree_pairs"] >= 1
        assert 0.0 <= figures["auroc"] <= 1.0
        for at in figures["at"].values():
            assert 0.0 <= at["differ_caught"] <= 100.0 and 0.0 <= at["agree_flagged"] <= 100.0
