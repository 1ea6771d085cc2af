"""What each repair arm would do to each DEV answer, side by side: the oracle view a policy learns
towards. Every DEV item is answered once as Naive RAG answers it (the workspace's prompt and
evidence), diagnosed, then answered again under each arm's patch of the configuration; every
answer is scored against the gold answer.

    ragmend study repair-arms --task hotpotqa --limit 100 --workdir /work/eval \\
        --arms focus,decompose,rerank,depth --out reports/repair-arms/dev-hotpotqa.json

Per arm: the task's score over all items, over the items the diagnosis flagged, how many wrong
first answers it turns right and right ones wrong, and the generator's seconds (medians). DEV
only: this is where arms are designed and the best fixed arm is chosen.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from ragmend.actions.catalogue import ACTIONS_BY_NAME
from ragmend.bench.harness.item_runs import item_arguments, open_item_run
from ragmend.engine.services import EngineServices
from ragmend.fileio import atomic_write_json


def main(argv: Sequence[str] | None = None) -> int:
    ap = item_arguments(__doc__, limit=100)
    ap.add_argument("--arms", default="focus,decompose")
    args = ap.parse_args(argv)
    run = open_item_run(args)
    task, items, engine = run.task, run.items, run.engine
    services = EngineServices(engine)
    arms = [a for a in args.arms.split(",") if a]
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, start=1):
        a = engine.answer(item.query)
        d = engine.diagnose(a)
        first_score = task.score(item, a.response, None)[task.primary]
        row: dict[str, Any] = {
            "id": item.id,
            "gold": item.gold,
            "kind": item.kind,
            "failure": d.failure,
            "first": {"score": first_score, "response": a.response, "generate_s": a.timings.generate_s},
            "arms": {},
        }
        for name in arms:
            patched = ACTIONS_BY_NAME[name].apply(a.config, a.query, services)
            b = engine.pipeline.answer(item.query, patched, purpose="repair")
            after = engine.diagnose(b)
            row["arms"][name] = {
                "score": task.score(item, b.response, None)[task.primary],
                "response": b.response,
                "failure": after.failure,
                "generate_s": b.timings.generate_s,
                "pass_s": b.timings.total_s,
                "prompt_tokens": b.prompt_tokens,
            }
        rows.append(row)
        if n % 10 == 0 or n == len(items):  # a long run's rows so far, readable while it goes on
            out = {"task": args.task, "split": "dev", "offset": args.offset, "n": len(rows)}
            atomic_write_json(args.out, out | {"summary": summarize(rows, arms), "rows": rows})
        print(
            f"{n}/{len(items)} {d.failure} first={first_score:.0f} "
            + " ".join(f"{k}={v['score']:.0f}" for k, v in row["arms"].items()),
            flush=True,
        )
    print(json.dumps(summarize(rows, arms), indent=1))
    return 0


def summarize(rows: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    flagged = [r for r in rows if r["failure"] != "NoFailure"]
    summary: dict[str, Any] = {
        "first": {
            "score": _pct(r["first"]["score"] for r in rows),
            "flagged": len(flagged),
            "flagged_wrong": sum(r["first"]["score"] < 1 for r in flagged),
            "unflagged_wrong": sum(r["first"]["score"] < 1 for r in rows if r["failure"] == "NoFailure"),
        }
    }
    for name in arms:

        def arm(r: dict[str, Any], name: str = name) -> float:
            return float(r["arms"][name]["score"])

        summary[name] = {
            "score_if_always": _pct(arm(r) for r in rows),
            "score_if_flagged": _pct(arm(r) if r in flagged else r["first"]["score"] for r in rows),
            "wrong_to_right_flagged": sum(r["first"]["score"] < 1 <= arm(r) for r in flagged),
            "right_to_wrong_flagged": sum(arm(r) < 1 <= r["first"]["score"] for r in flagged),
            "after_no_failure_flagged": sum(r["arms"][name]["failure"] == "NoFailure" for r in flagged),
            "right_when_after_no_failure": sum(
                arm(r) >= 1 for r in flagged if r["arms"][name]["failure"] == "NoFailure"
            ),
            "pass_s_p50": round(statistics.median(r["arms"][name]["pass_s"] for r in rows), 3),
            "prompt_tokens_p50": statistics.median(r["arms"][name]["prompt_tokens"] for r in rows),
        }
    return summary


def _pct(values: Any) -> float:
    vs = [float(v) for v in values]
    return round(100 * sum(vs) / len(vs), 2) if vs else 0.0
