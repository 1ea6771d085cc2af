"""`ragmend bench detect`: the diagnosis as a detector of unsupported answers, per data set, beside
three baselines run on the same cases with the same code path.

For every case (corpora/cases.py: RAGTruth test, HotpotQA test answers of the local generator,
FEVER test claims, the unanswerable test questions) the deployment's Diagnoser runs exactly as it
does for a served answer. Scores, each read so that higher means "unsupported":

- the diagnosis: the verdict's P(unsupported) (without a verdict model: 1 for a failure, else
  1 - the response's NLI support); its decision is `failure != NoFailure`, which gives F1,
  precision and recall;
- EGC only: 1 - the EGC score (the EGC paper's graph consistency over question, evidence, claims);
- coverage only: 1 - EGC coverage (the share of claims with an evidence edge);
- an LLM judge: the local generator asked, claim by claim, whether the passages support it; the
  share of claims it says are not supported (run on the first `judge_limit` cases of each set,
  with the diagnosis' AUROC on the same cases beside it, and its time per answer).

Unanswerable questions report the share that gets IE, beside the share of answerable HotpotQA
questions that does (the target is >= 90% and <= 10%).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ragmend.bench.stats import auroc
from ragmend.corpora.cases import Case
from ragmend.diagnosis.comparison import check_comparison, only_the_pick
from ragmend.diagnosis.decision import Support, decide, unsupported_by
from ragmend.diagnosis.diagnoser import Diagnoser, case_text_features
from ragmend.diagnosis.hypotheses import sentence_count
from ragmend.diagnosis.off_question import asks_question, unaddressed
from ragmend.diagnosis.premises import premise_text
from ragmend.diagnosis.types import DecisionSignals, Diagnosis, NLIState
from ragmend.diagnosis.verdict import (
    VerdictModel,
    backing,
    claim_features,
    grounded,
    judges_backing,
    refutation,
)
from ragmend.errors import InputError
from ragmend.fileio import atomic_write_text

JUDGE_SYSTEM = (
    "You check answers against sources. Reply with one word: yes if the passages state or clearly "
    "imply the claim, no otherwise."
)
JUDGE_EVIDENCE_CHARS = 3000  # the small generator's context holds this with room for the claim


def diagnosis_score(d: Diagnosis) -> float:
    if d.verdict is not None:
        return d.verdict.p_unsupported
    return 1.0 if d.failed else 1.0 - (d.e_r.support or 0.0)


def record(case: Case, d: Diagnosis) -> dict[str, Any]:
    evidence = [premise_text(p) for p in case.passages]
    return {
        "set": case.set,
        "group": case.group,
        "id": case.id,
        "unsupported": case.unsupported,
        "answerable": case.answerable,
        "answer_in_evidence": case.answer_in_evidence,
        "score": diagnosis_score(d),
        "failure": d.failure,
        "egc": 1.0 - d.egc.score,
        "coverage": 1.0 - d.egc.coverage,
        "ms": d.timings.get("total_s", 0.0) * 1000,
        "timings_ms": {k.removesuffix("_s"): round(v * 1000, 1) for k, v in d.timings.items()},
        "claims": [h.hypothesis for h in d.e_r.hypotheses],
        "sentences": sentence_count(case.response),
        # With a verdict: Algorithm 1's own decision beside it and every feature it read, so the
        # rule's figures come from the same run and another verdict can be scored on these rows.
        "rule_failure": d.verdict.rule_failure if d.verdict else d.failure,
        "off_question": d.off_question,
        "comparison": d.comparison.outcome if d.comparison else None,
        "alternatives": d.alternatives.outcome if d.alternatives else None,
        "only_the_pick": only_the_pick(case.query, [h.hypothesis for h in d.e_r.hypotheses]),
        # kappa as decided (missing where no graph was read), and how many graph conflicts the
        # passage their triple came from entails (kg_crosscheck): without that check each would
        # have made the answer WP.
        "kappa": d.kg.kappa if d.kg.available else "missing",
        "kg_entailed": sum(m.verdict == "entailed" for m in d.kg.matches),
        "features": d.verdict.features if d.verdict else {},
        "signals": asdict(d.signals) if d.signals else None,
        "grade": d.grade,
        "unsupported_by": list(d.verdict.unsupported_by) if d.verdict else [],
        "claim_features": [claim_features(h, evidence, case.query, case.response) for h in d.e_r.hypotheses],
    }


class LLMJudge:
    """The local generator as a per-claim support judge (a baseline of the detector benchmarks)."""

    def __init__(self, generator: Any):
        self.generator = generator

    def judge(self, case: Case, claims: Sequence[str]) -> tuple[float, float]:
        """(share of claims judged unsupported, seconds the calls took)."""
        evidence = "\n".join(f"[{n}] {premise_text(p)}" for n, p in enumerate(case.passages, start=1))
        evidence = evidence[:JUDGE_EVIDENCE_CHARS]
        verdicts, seconds = [], 0.0
        for claim in claims or [case.response]:
            g = self.generator.chat(
                [
                    {"role": "system", "content": JUDGE_SYSTEM},
                    {
                        "role": "user",
                        "content": f"Passages:\n{evidence}\n\nClaim: {claim}\n\nSupported (yes or no)?",
                    },
                ],
                max_tokens=3,
                temperature=0.0,
            )
            seconds += g.seconds
            verdicts.append(not re.match(r"\W*yes\b", g.text, re.I))
        return float(np.mean(verdicts)), seconds


def _auroc(scores: Sequence[float], labels: Sequence[bool] | np.ndarray) -> float | None:
    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return None
    return round(float(auroc(np.asarray(scores, dtype=np.float64), y)), 4)


def _p50(values: Sequence[float]) -> float | None:
    return round(float(np.median(values)), 1) if len(values) else None


def decision_figures(flagged: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    """F1, precision and recall of one yes/no detector, and the share of supported answers it flags."""
    tp = float((flagged & y).sum())
    precision = tp / flagged.sum() if flagged.sum() else None
    recall = tp / y.sum() if y.sum() else None
    f1 = 2 * tp / (flagged.sum() + y.sum()) if (flagged.sum() + y.sum()) else None
    return {
        "f1": None if f1 is None else round(f1, 4),
        "precision": None if precision is None else round(float(precision), 4),
        "recall": None if recall is None else round(float(recall), 4),
        "flagged_supported": round(float(flagged[~y].mean()), 4) if (~y).any() else None,
    }


Spans = Sequence[tuple[int, int]]


def span_figures(predicted: Sequence[Spans], gold: Sequence[Spans]) -> dict[str, float | None]:
    """Character-level precision, recall and F1 of unsupported spans over all responses (the
    span-level measure LettuceDetect reports): a character counts once however many spans hold it.

    >>> span_figures([[(0, 10)]], [[(5, 15)]])
    {'f1': 0.5, 'precision': 0.5, 'recall': 0.5}
    """
    hit = marked = labelled = 0
    for pred, true in zip(predicted, gold, strict=True):
        p = {i for a, b in pred for i in range(a, b)}
        t = {i for a, b in true for i in range(a, b)}
        hit, marked, labelled = hit + len(p & t), marked + len(p), labelled + len(t)
    return {
        "f1": round(2 * hit / (marked + labelled), 4) if marked + labelled else None,
        "precision": round(hit / marked, 4) if marked else None,
        "recall": round(hit / labelled, 4) if labelled else None,
    }


def ie_rate(rows: Sequence[Mapping[str, Any]], key: str = "failure") -> float:
    """The share of rows typed IE, by the verdict (`failure`) or by Algorithm 1's rule."""
    return round(float(np.mean([r[key] == "IE" for r in rows])), 4)


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of one data set (or one group of it)."""
    y = np.array([r["unsupported"] for r in rows], dtype=bool)
    flagged = np.array([r["failure"] != "NoFailure" for r in rows], dtype=bool)
    judged = [r for r in rows if "judge" in r]
    out: dict[str, Any] = {
        "n": len(rows),
        "unsupported": int(y.sum()),
        "auroc": _auroc([r["score"] for r in rows], y),
        **decision_figures(flagged, y),
        "egc_auroc": _auroc([r["egc"] for r in rows], y),
        "coverage_auroc": _auroc([r["coverage"] for r in rows], y),
        "diagnosis_ms_p50": _p50([r["ms"] for r in rows]),
        "llm_judge_n": len(judged),
        "llm_judge_auroc": _auroc([r["judge"] for r in judged], [r["unsupported"] for r in judged]),
        "diagnosis_auroc_on_judged": _auroc([r["score"] for r in judged], [r["unsupported"] for r in judged]),
        "llm_judge_ms_p50": _p50([r["judge_ms"] for r in judged]),
    }
    if any(r.get("features") for r in rows):  # a verdict decided: Algorithm 1's rule beside it
        rule = np.array([r.get("rule_failure", r["failure"]) != "NoFailure" for r in rows], dtype=bool)
        out["rule"] = decision_figures(rule, y)
        if not all(r["answerable"] for r in rows):
            out["rule"]["ie_rate"] = ie_rate([r for r in rows if not r["answerable"]], "rule_failure")
    if not all(r["answerable"] for r in rows):
        out["ie_rate"] = ie_rate([r for r in rows if not r["answerable"]])
    return out


def run_detect(
    diagnoser: Diagnoser,
    sets: Mapping[str, Sequence[Case]],
    judge: LLMJudge | None = None,
    judge_limit: int = 0,
    log: Callable[[str], None] = print,
    rows_path: Path | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Every case of every set diagnosed (and judged), summarised per set and per group. With
    `rows_path`, each case's row is appended there (JSONL) as it is made, so figures at other
    operating points can be read off later without diagnosing again, and a run cut short keeps
    what it did: with `resume`, the cases that already have a row there are not run again."""
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if rows_path is not None and resume and rows_path.exists():
        done = {(r["set"], r["id"]): r for r in _read_rows(rows_path)}
        log(f"resuming: {len(done)} rows in {rows_path}")
    elif rows_path is not None:
        atomic_write_text(rows_path, "")
    all_rows: dict[str, list[dict[str, Any]]] = {}
    seconds: dict[str, float] = {}
    for name, cases in sets.items():
        rows = []
        t0 = time.perf_counter()
        for n, case in enumerate(cases):
            if (r := done.get((case.set, case.id))) is None:
                r = _run_case(diagnoser, case, judge if n < judge_limit else None)
                if rows_path is not None:
                    with open(rows_path, "a", encoding="utf-8") as out:
                        out.write(json.dumps(r) + "\n")
            rows.append(r)
            if (n + 1) % 100 == 0:
                log(f"{name}: {n + 1}/{len(cases)}")
        all_rows[name] = rows
        seconds[name] = round(time.perf_counter() - t0, 1)
        log(f"{name}: {len(rows)} cases in {seconds[name]} s")
    result = summaries(all_rows)
    for name, s in seconds.items():
        result[name]["seconds"] = s
    return result


def _run_case(diagnoser: Diagnoser, case: Case, judge: LLMJudge | None) -> dict[str, Any]:
    d = diagnoser.diagnose(case.query, case.passages, case.response, token_logprobs=case.token_logprobs)
    r = record(case, d)
    if judge is not None:
        share, judge_s = judge.judge(case, r["claims"])
        r["judge"], r["judge_ms"] = share, judge_s * 1000
    return r


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a rows file; a last line cut short by a kill is left out."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def summaries(all_rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Each data set's figures, with its groups' where it has several; the IE rate of answerable
    questions beside the unanswerable ones'."""
    result: dict[str, Any] = {}
    for name, rows in all_rows.items():
        summary = summarize(rows)
        groups = sorted({r["group"] for r in rows})
        if len(groups) > 1:
            summary["groups"] = {g: summarize([r for r in rows if r["group"] == g]) for g in groups}
        result[name] = summary
    if "unanswerable" in all_rows and "hotpotqa" in all_rows:
        answerable = all_rows["hotpotqa"]
        result["unanswerable"]["ie_rate_answerable"] = ie_rate(answerable)
        # Apart by whether the retrieved passages hold the gold answer: IE is right where they
        # do not (the question is answerable from the corpus, not from what was retrieved).
        result["unanswerable"]["ie_rate_answerable_by_evidence"] = {
            name: {"n": len(part), "ie_rate": ie_rate(part)}
            for name, held in (("answer_in_evidence", True), ("answer_not_in_evidence", False))
            if (part := [r for r in answerable if r.get("answer_in_evidence") is held])
        }
        if all(r.get("features") for r in answerable):
            result["unanswerable"]["rule"]["ie_rate_answerable"] = ie_rate(answerable, "rule_failure")
    return result


def rescore(
    rows: Sequence[Mapping[str, Any]],
    model: VerdictModel,
    relevance_threshold: float,
    cases: Mapping[tuple[str, str], Case] | None = None,
    refute_threshold: float | None = None,
    support_floor: float | None = None,
) -> list[dict[str, Any]]:
    """The rows as another verdict model decides them, from the features they recorded (no
    diagnosis runs again): its claim model gives claim_p_max, its answer model P(unsupported),
    and the failure follows as the diagnoser decides it (`decision.decide`; answerable when the
    best passage's cross-encoder relevance reaches `relevance_threshold` and the response does
    not abstain, as Diagnoser._answerability decides with a reranker loaded; an answer off the
    question, as recorded, is WR). With `cases`, the text features and whether the answer
    addresses the question are computed afresh from each row's case (case_text_features,
    off_question.unaddressed), so rows recorded before a change to either are scored with it. A claim
    contradicted at `refute_threshold` makes a row unsupported (decision.VERDICT_RULES; its `refuted`
    feature is read from the claims the row recorded), and so does an answer to a question whose
    recorded `backing` is under `support_floor` (the same table)."""
    out = []
    for r in rows:
        if not r.get("features"):
            why = "diagnosed without a verdict: run bench detect with diagnosis.verdict set"
            raise InputError(f"row {r['set']}/{r['id']} has no verdict features ({why})")
        x, claims = r["features"], r["claim_features"]
        query: str | None = None  # the case's, where rows are refreshed from their cases
        sentences = r.get("sentences", 1)  # rows from before it was recorded: as one sentence
        if cases is not None:
            if (case := cases.get((r["set"], r["id"]))) is None:
                raise InputError(f"row {r['set']}/{r['id']}: no such case in the data to refresh it from")
            fresh, fresh_claims = case_text_features(case.query, case.passages, case.response, r["claims"])
            query = case.query
            sentences = sentence_count(case.response)
            x = {**x, **_rounded(fresh)}
            claims = [{**c, **_rounded(f)} for c, f in zip(claims, fresh_claims, strict=True)]
            if "comparison" not in r:  # rows from before the check; recorded ones may read the corpus
                passages = [(p.title, p.text) for p in case.passages]
                check = check_comparison(case.query, case.response, passages)
                r = {**r, "comparison": check.outcome if check else None}
            r = {**r, "off_question": unaddressed(case.query, case.response)}
        x = {**x, "refuted": refutation(claims)}
        # Recorded for an answer to a question; rows from before it get it from their case.
        if "backing" in x or (query is not None and judges_backing(asks_question(query), x)):
            x["backing"] = backing(claims)
        p, threshold = model.score(x, claims)
        # As the diagnoser decided it where the row records it (the answerability model's
        # decision); rows from before that model: the relevance rule.
        if "answerable" in x:
            answerable = x["answerable"] > 0
        else:
            answerable = x.get("relevance", 1.0) >= relevance_threshold
        # Rows from before it was recorded, without their case: one claim was the pick alone.
        if query is not None:
            alone = only_the_pick(query, r["claims"])
        else:
            alone = r.get("only_the_pick", len(r["claims"]) <= 1)
        e_q, e_r, matches = _rule_states(r)
        decision = decide(
            DecisionSignals(
                kappa=r.get("kappa", "missing"),  # rows from before the graph was recorded: none read
                e_q=e_q,
                e_r=e_r,
                label_matches=matches,
                off_question=r.get("off_question"),  # rows recorded before the check: unknown
                unsupported=bool(
                    unsupported_by(
                        Support.of(
                            p,
                            threshold,
                            x,
                            refute_at=refute_threshold,
                            support_floor=support_floor,
                            sentences=sentences,
                        )
                    )
                ),
                abstained=x.get("abstained", 0.0) > 0,
                grounded=grounded(x),
                answerable=answerable,
                comparison=r.get("comparison"),
                alternatives=r.get("alternatives"),
                only_the_pick=alone,
            )
        )
        out.append({**r, "score": p, "failure": decision.failure, "grade": decision.grade})
    return out


def _rule_states(row: Mapping[str, Any]) -> tuple[NLIState, NLIState, bool | None]:
    """Algorithm 1's e_q, e_r and label agreement as a row recorded them, or, for rows recorded
    before the signals were, states that make Algorithm 1 decide the row's `rule_failure`."""
    if (signals := row.get("signals")) is not None:
        return signals["e_q"], signals["e_r"], signals["label_matches"]
    rule = row.get("rule_failure", row["failure"])
    e_q: NLIState = "neutral" if rule == "IE" else "entail"
    e_r: NLIState = "neutral" if rule in ("IE", "WR") else "entail"
    return e_q, e_r, False if rule == "LEM" else None


def _rounded(features: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in features.items()}
