"""`ragmend bench detect`'s HotpotQA figures under its EM/F1 label and under a person's reading of
the same answers (an audit file: the answers a person reads otherwise, by id). Reads the detect
workspace's rows of a split (run the bench first); the figures are the bench's own `summarize`.

    ragmend study label-audit --audit docs/audits/hotpotqa-test-labels-2026-11-28.json --split test

Why: the target (>= 75% of wrong answers flagged, <= 15% of right ones) is read against a label
that calls "NBC" wrong for "National Broadcasting Company"; this says how much of the distance
to the target is the label's and how much is the diagnosis'.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ragmend.bench.suites.detect import summarize
from ragmend.corpora.readers import read_jsonl


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--audit", type=Path, required=True, help="the audit JSON (docs/audits/)")
    ap.add_argument("--split", default="test", choices=("dev", "test"))
    ap.add_argument("--workdir", type=Path, default=Path("var/detect"), help="the detect workspace")
    args = ap.parse_args(argv)

    audit = json.loads(args.audit.read_text(encoding="utf-8"))
    reading = {x["id"]: bool(x["unsupported"]) for x in audit["relabelled"]}
    path = args.workdir / f"detect-{args.split}-hotpotqa+unanswerable-rows.jsonl"
    rows = [r for r in read_jsonl(path) if r["set"] == "hotpotqa"]
    missing = sorted(set(reading) - {r["id"] for r in rows})
    if missing:
        sys.exit(f"label_audit: {len(missing)} audited ids are not in {path}: {missing[:3]}")
    relabelled = [{**r, "unsupported": reading.get(r["id"], r["unsupported"])} for r in rows]
    out = {}
    for name, rs in (("em_f1_label", rows), ("a_persons_reading", relabelled)):
        s = summarize(rs)
        wrong = [r for r in rs if r["unsupported"]]
        out[name] = {
            "n": s["n"],
            "wrong": len(wrong),
            "wrong_flagged": round(s["recall"], 4),
            "right_flagged": s["flagged_supported"],
            "f1": s["f1"],
            "auroc": s["auroc"],
        }
    print(json.dumps({"rows": str(path), "relabelled": len(reading), **out}, indent=1))
    return 0
