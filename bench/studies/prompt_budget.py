"""The compact prompt's evidence budget (rag.context_tokens) tuned on DEV: Naive RAG over a paper
task's workspace (its corpus, index, prompt and generation length, as `ragmend eval` builds them),
the same DEV items answered under each budget, side by side in one run.

    ragmend study prompt-budget --task hotpotqa --limit 60 --budgets 0,64,128,192 \\
        --workdir var/eval --out reports/prompt-budget-dev.json

Per budget: the task's score (HotpotQA EM and F1, FEVER accuracy), the prompt tokens and the
generator's seconds (medians). 0 is the passages whole. The generation cache of the workspace is
not used. The seconds are not cold: each item is asked under every budget in turn, and a prompt
reuses the KV cache of the previous one's common prefix (`ragmend bench stream` measures cold).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

from ragmend.bench.harness.item_runs import item_arguments, open_item_run
from ragmend.fileio import atomic_write_json


def main(argv: Sequence[str] | None = None) -> int:
    ap = item_arguments(__doc__, limit=60)
    ap.add_argument(
        "--split",
        choices=("dev", "test"),
        default="dev",
        help="dev to choose a budget; test only to report a chosen one beside whole passages",
    )
    ap.add_argument("--budgets", default="0,64,128,192")
    args = ap.parse_args(argv)
    run = open_item_run(args, split=args.split, generation_cache=False)
    task, items, engine = run.task, run.items, run.engine
    budgets = [int(b) for b in args.budgets.split(",")]
    rows: dict[int, list[dict]] = {b: [] for b in budgets}
    for n, item in enumerate(items, start=1):
        for b in budgets:  # each item under every budget in turn: the same machine state
            a = engine.pipeline.answer(item.query, engine.pipeline.default_config().patch(context_tokens=b))
            rows[b].append(
                {
                    "id": item.id,
                    "scores": task.score(item, a.response, None),
                    "prompt_tokens": a.prompt_tokens,
                    "generate_s": a.timings.generate_s,
                    "response": a.response,
                }
            )
        print(f"{n}/{len(items)}", flush=True)
    out = {"task": args.task, "split": args.split, "offset": args.offset, "n": len(items), "budgets": {}}
    for b, rs in rows.items():
        keys = rs[0]["scores"].keys()
        out["budgets"][str(b)] = {
            **{k: round(100 * statistics.mean(float(r["scores"][k]) for r in rs), 2) for k in keys},
            "prompt_tokens_p50": statistics.median(r["prompt_tokens"] for r in rs),
            "generate_s_p50": round(statistics.median(r["generate_s"] for r in rs), 3),
        }
    out["rows"] = {str(b): rs for b, rs in rows.items()}
    atomic_write_json(args.out, out)
    print(json.dumps(out["budgets"], indent=1))
    return 0
