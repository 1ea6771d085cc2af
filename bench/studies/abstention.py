"""Does the user read "the sources do not answer" where they do not, and only there? The repair
loop (LinUCB over every action, abstain included) over the unanswerable task's questions
(corpora/unanswerable.py): HotpotQA questions whose gold paragraphs were removed and TruthfulQA
questions (unanswerable), beside answerable HotpotQA questions, over one corpus.

    ragmend study abstention --workdir /work/detect-compact --dev 40,30,30 --test 100,60,40 \\
        --out reports/repair-arms/abstention-test.json

The policy is warm-started on DEV items (answerable, gold_removed, out_of_corpus counts), then
answers the TEST items once each, learning online as the server does. Per kind: the share of
answers the user reads as an abstention (the abstain action or server.answer_policy said the
sources do not answer, or the answer itself says it does not know), the share right, and for
answerable questions the share whose right first answer an abstention replaced. Kg off (its
build takes half an hour on 2 cores); the server's prompt.

    ragmend study abstention --reread reports/repair-arms/abstention-dev.json \\
        --unanswered-below 0.6,0.7,0.76,0.8

reads a recorded run's answers again under abstain_unanswered at each operating point
(server.unanswered_below), answering nothing: the answers and their diagnoses do not depend on
it (it only decides what the user reads), so the figures are those a run with it gives.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from ragmend.bench.suites.answers import unanswerable_workspace
from ragmend.corpora.readers import Split
from ragmend.corpora.tasks import EvalItem, split_sample
from ragmend.corpora.unanswerable import correct_answer
from ragmend.diagnosis.hypotheses import is_abstention
from ragmend.engine import Engine
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import Presented, Reading, present
from ragmend.fileio import atomic_write_json
from ragmend.settings import AnswerPolicy, load_settings
from ragmend.train.warm_start import warm_start

KINDS = ("answerable", "gold_removed", "out_of_corpus")


def sample(
    items: list[EvalItem], split: Split, counts: list[int], skip: list[int] | None = None
) -> list[EvalItem]:
    skip = skip or [0] * len(KINDS)
    chosen = [
        split_sample([i for i in items if i.kind == k], split, s + n)[s:]
        for k, n, s in zip(KINDS, counts, skip, strict=True)
    ]
    # Interleaved, so the online policy meets the kinds mixed as a server would.
    out: list[EvalItem] = []
    for row in range(max(len(c) for c in chosen)):
        out += [c[row] for c in chosen if row < len(c)]
    return out


def shown(outcome: Outcome, reading: Reading) -> Presented:
    """What the user reads (as the server presents it)."""
    result = outcome.answer
    evidence = [(p.id, p.title) for p in result.evidence]
    return present(
        result.response, outcome.diagnosis, evidence, reading, query=result.query, decided=outcome.decided
    )


def abstained(outcome: Outcome, read: Presented) -> bool:
    """The user reads that the sources do not answer: the abstain action or the answer policy
    said so, or the generated answer itself says it does not know."""
    return read.policy_applied == "abstain" or is_abstention(outcome.answer.response)


def reread(row: dict[str, Any], below: float) -> bool:
    """`abstained` for a recorded row under abstain_unanswered at operating point `below`: the
    rule of engine/presentation.py on what the row kept of the final diagnosis."""
    judged = row["final_failure"] is not None and row.get("judged", True)
    read = Reading("abstain_unanswered", unanswered_below=below)
    by_policy = judged and read.abstains(row["final_failure"], row["p_answerable"])
    return bool(row["abstained_by_repair"] or is_abstention(row["response"]) or by_policy)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: the shares abstained and right, and the right answers an abstention hid."""
    summary: dict[str, Any] = {}
    for kind in KINDS:
        rs = [r for r in rows if r["kind"] == kind]
        if not rs:
            continue
        summary[kind] = {
            "n": len(rs),
            "abstained": round(100 * sum(r["abstained"] for r in rs) / len(rs), 2),
            "abstained_by_repair": round(100 * sum(r["abstained_by_repair"] for r in rs) / len(rs), 2),
            "right_first": round(100 * sum(r["first_right"] for r in rs) / len(rs), 2),
            "right": round(100 * sum(r["right"] for r in rs) / len(rs), 2),
            "right_replaced_by_abstention": round(
                100 * sum(r["first_right"] and r["abstained"] and not r["right"] for r in rs) / len(rs), 2
            ),
            # A right final answer (first or repaired) that the user reads as an abstention.
            "right_read_as_abstention": round(
                100 * sum(r["right"] and r["abstained"] for r in rs) / len(rs), 2
            ),
            "seconds_p50": statistics.median(r["seconds"] for r in rs),
        }
    unanswerable = [r for r in rows if r["kind"] != "answerable"]
    summary["unanswerable"] = {
        "n": len(unanswerable),
        "abstained": round(100 * sum(r["abstained"] for r in unanswerable) / max(1, len(unanswerable)), 2),
    }
    return summary


def reread_file(path: Path, points: list[float]) -> int:
    rows = json.loads(path.read_text())["rows"]
    for below in points:
        summary = summarize([{**r, "abstained": reread(r, below)} for r in rows])
        print(json.dumps({"unanswered_below": below, **summary}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, help="the unanswerable task's workspace")
    ap.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    ap.add_argument(
        "--dev", default="40,30,30", help="DEV items per kind: answerable,gold_removed,out_of_corpus"
    )
    ap.add_argument("--test", default="100,60,40", help="TEST items per kind")
    ap.add_argument(
        "--on-dev",
        action="store_true",
        help="answer DEV items after the warm start's (as many per kind as --test) instead of TEST:"
        " for choosing a rule on DEV",
    )
    ap.add_argument(
        "--answer-policy",
        choices=get_args(AnswerPolicy),
        default=None,
        help="server.answer_policy for what the user reads (default: the configuration's)",
    )
    ap.add_argument(
        "--unanswered-below",
        default=None,
        help="server.unanswered_below (default: the configuration's); with --reread, a comma-separated list",
    )
    ap.add_argument("--reread", type=Path, help="a recorded run (its --out) to read again; answers nothing")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.reread:
        points = args.unanswered_below or str(load_settings().server.unanswered_below)
        return reread_file(args.reread, [float(x) for x in points.split(",")])
    if args.workdir is None or args.out is None:
        ap.error("--workdir and --out are required unless --reread")
    ws = unanswerable_workspace(args.workdir, args.data_root)
    items = ws.prepare()
    state = args.workdir / "abstention-policy.sqlite"
    router_state = args.workdir / "abstention-router.sqlite"
    for p in [*state.parent.glob(state.name + "*"), *router_state.parent.glob(router_state.name + "*")]:
        p.unlink()  # a fresh policy and router each run
    settings = ws.settings(
        load_settings(),
        policy={"state_path": str(state), "kind": "linucb"},
        router={"state_path": str(router_state)},
        kg={"enabled": False},
    )
    server = settings.server
    reading = Reading(
        args.answer_policy or server.answer_policy,
        server.citations,
        float(args.unanswered_below) if args.unanswered_below else server.unanswered_below,
    )
    engine = Engine(settings)
    engine.load()
    dev = sample(items, "dev", [int(n) for n in args.dev.split(",")])  # the warm start's
    warm = warm_start(engine, dev, epochs=1, explore_plans=settings.router.enabled)
    rows: list[dict[str, Any]] = []
    counts = [int(n) for n in args.test.split(",")]
    if args.on_dev:  # the DEV items after the warm start's
        answered = sample(items, "dev", counts, skip=[int(n) for n in args.dev.split(",")])
    else:
        answered = sample(items, "test", counts)
    for n, item in enumerate(answered, start=1):
        outcome = engine.respond(item.query)
        first_answer = outcome.first or outcome.answer
        trace = outcome.repair
        read = shown(outcome, reading)
        rows.append(
            {
                "id": item.id,
                "kind": item.kind,
                "first_failure": (outcome.first_diagnosis or outcome.diagnosis).failure,  # type: ignore[union-attr]
                "final_failure": outcome.diagnosis.failure if outcome.diagnosis else None,
                "judged": bool(outcome.diagnosis and outcome.diagnosis.judged),
                # The answerability model's P(answerable) for the final answer's evidence.
                "p_answerable": outcome.diagnosis.e_q.support if outcome.diagnosis else None,
                "action": getattr(trace, "action", None),
                "abstained": abstained(outcome, read),
                "abstained_by": read.abstained_by,
                "abstained_by_repair": outcome.abstained,
                "first_right": correct_answer(item.kind, first_answer.response, item.gold, item.query),
                "right": correct_answer(item.kind, outcome.answer.response, item.gold, item.query),
                "seconds": round(outcome.seconds, 3),
                "plan": outcome.route.plan if outcome.route is not None else None,
                "response": outcome.answer.response,
                "read": read.text,
            }
        )
        if n % 20 == 0:
            print(f"test {n}", flush=True)
    engine.close()
    summary = summarize(rows)
    out = {
        "answer_policy": reading.policy,
        "unanswered_below": reading.unanswered_below,
        "command": "ragmend study abstention "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v not in (None, False)),
        "warm_start": [r.as_json() for r in warm],
        "summary": summary,
        "rows": rows,
    }
    atomic_write_json(args.out, out)
    print(json.dumps(summary, indent=1))
    return 0
