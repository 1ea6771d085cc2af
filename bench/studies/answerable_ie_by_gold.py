"""How often `ragmend bench detect` types an answerable HotpotQA question IE, apart by how many of
its gold paragraphs (the titles of its supporting facts) the retrieved passages hold: both, one,
or neither. Reads the detect workspace's rows and answers of a split (run the bench first).

    ragmend study answerable-ie --split dev

The bench's own split (`ie_rate_answerable_by_evidence`) asks whether the gold answer's words
occur in the passages; this one asks whether the passages the answer needs were retrieved.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from ragmend.corpora.readers import read_jsonl
from ragmend.corpora.tasks import HOTPOTQA_FILE


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--workdir", type=Path, default=Path("var/detect"), help="the detect workspace")
    ap.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    args = ap.parse_args(argv)

    items = json.loads((args.data_root / HOTPOTQA_FILE).read_text(encoding="utf-8"))
    gold = {x["_id"]: {title for title, _ in x["supporting_facts"]} for x in items}
    answers = {a["id"]: a for a in read_jsonl(args.workdir / f"answers-{args.split}.jsonl")}
    rows = read_jsonl(args.workdir / f"detect-{args.split}-hotpotqa+unanswerable-rows.jsonl")
    counts = {k: [0, 0] for k in ("both", "one", "neither")}  # [typed IE, questions]
    for r in rows:
        if r["group"] != "answerable":
            continue
        titles = {p["title"] for p in answers[r["id"]]["passages"]}
        need = gold[r["id"]]
        part = "both" if need <= titles else ("one" if need & titles else "neither")
        counts[part][0] += r["failure"] == "IE"
        counts[part][1] += 1
    print(json.dumps({"split": args.split, **{k: {"ie": v[0], "n": v[1]} for k, v in counts.items()}}))
    return 0
