"""Could the diagnosis pick the answer the generator did not read? An experiment on DEV: each
item is answered as Naive RAG answers it and diagnosed; for a flagged answer, candidate answers
are taken from the evidence (the named entities and noun phrases of the sentences a cross-encoder
ranks best, the passages' titles, yes/no for a yes/no question), each is diagnosed as an answer
(the same diagnoser, no generator call), and the best-judged candidate replaces the answer.

    ragmend study select-answer --task hotpotqa --limit 60 --workdir /work/eval \\
        --out reports/repair-arms/select-dev-hotpotqa-60.json

Per item: the first answer's score, whether any candidate is the gold answer (the ceiling), the
candidate each rule picks and its score, the seconds the candidates' diagnoses took. DEV only.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmend.bench.harness.item_runs import item_arguments, open_item_run
from ragmend.engine import Engine
from ragmend.fileio import atomic_write_json
from ragmend.models.spacy_model import load_spacy

YES_NO = ("is ", "are ", "was ", "were ", "do ", "does ", "did ", "can ", "could ", "has ", "have ")


def candidates(question: str, evidence: Any, engine: Engine, nlp: Any, top: int) -> list[str]:
    pipeline = engine.pipeline
    split, reranker = pipeline._split, pipeline.models.reranker  # the focus arm's splitter and scorer
    assert split is not None and reranker is not None, "needs the sentence splitter and the reranker"
    sentences = [(p, s) for p in evidence for s in split(p.text) if s.strip()]
    if not sentences:
        return []
    scores = np.asarray(reranker.score(question, [f"{p.title}: {s}" for p, s in sentences]))
    best = [sentences[i] for i in np.argsort(-scores)[:top]]
    out: list[str] = []
    if question.lower().startswith(YES_NO):
        out += ["yes", "no"]
    for p, s in best:
        out.append(p.title)
        doc = nlp(s)
        out += [e.text for e in doc.ents]
        out += [c.text for c in doc.noun_chunks if len(c.text.split()) <= 6]
    seen: set[str] = set()
    q = question.lower()
    keep = []
    for c in out:
        c = c.strip(" .,;:\"'")
        k = c.lower()
        if c and k not in seen and k not in q:  # what the question already names is not its answer
            seen.add(k)
            keep.append(c)
    return keep


def main(argv: Sequence[str] | None = None) -> int:
    ap = item_arguments(__doc__, limit=60)
    ap.add_argument("--top", type=int, default=3, help="best sentences whose phrases are candidates")
    args = ap.parse_args(argv)
    run = open_item_run(args)
    task, items, engine = run.task, run.items, run.engine
    nlp = load_spacy(engine.settings.models)
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, start=1):
        a = engine.answer(item.query)
        d = engine.diagnose(a)
        row: dict[str, Any] = {
            "id": item.id,
            "gold": item.gold,
            "failure": d.failure,
            "first": a.response,
            "first_score": task.score(item, a.response, None)[task.primary],
        }
        if d.failed:
            t0 = time.monotonic()
            judged: list[dict[str, Any]] = []
            for c in candidates(item.query, a.evidence, engine, nlp, args.top):
                dc = engine.diagnoser.diagnose(item.query, a.evidence, c)
                p_unsupported = dc.verdict.p_unsupported if dc.verdict else None
                judged.append(
                    {
                        "text": c,
                        "failure": dc.failure,
                        "support": dc.e_r.support,
                        "p_unsupported": p_unsupported,
                        "score": task.score(item, c, None)[task.primary],
                    }
                )
            row["seconds"] = round(time.monotonic() - t0, 3)
            row["candidates"] = judged
            row["ceiling"] = max((c["score"] for c in judged), default=0.0)
            if judged:
                by_support = max(judged, key=lambda c: c["support"] or 0.0)
                by_verdict = min(
                    judged, key=lambda c: c["p_unsupported"] if c["p_unsupported"] is not None else 1.0
                )
                passing = [c for c in judged if c["failure"] == "NoFailure"]
                row["pick_support"] = by_support
                row["pick_verdict"] = by_verdict
                row["pick_passing"] = max(passing, key=lambda c: c["support"] or 0.0) if passing else None
        rows.append(row)
        print(f"{n}/{len(items)}", flush=True)
    flagged = [r for r in rows if r["failure"] != "NoFailure"]

    def em(rule: str) -> float:
        total = 0.0
        for r in rows:
            pick = r.get(rule)
            total += pick["score"] if pick else r["first_score"]
        return round(100 * total / len(rows), 2)

    summary = {
        "n": len(rows),
        "flagged": len(flagged),
        "first": round(100 * statistics.mean(r["first_score"] for r in rows), 2),
        "ceiling": round(
            100 * statistics.mean(max(r["first_score"], r.get("ceiling", 0.0)) for r in rows), 2
        ),
        "pick_support": em("pick_support"),
        "pick_verdict": em("pick_verdict"),
        "pick_passing": em("pick_passing"),
        "candidates_p50": statistics.median(len(r["candidates"]) for r in flagged) if flagged else 0,
        "seconds_p50": statistics.median(r["seconds"] for r in flagged) if flagged else 0,
    }
    atomic_write_json(
        args.out,
        {"command": " ".join(f"--{k} {v}" for k, v in vars(args).items()), "summary": summary, "rows": rows},
    )
    print(json.dumps(summary, indent=1))
    return 0
