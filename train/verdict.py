"""Fit the calibrated verdict (diagnosis/verdict.py) on DEV cases: `ragmend verdict fit`.

1. Every case goes through the deployment's Diagnoser with a probe verdict (no weights), which
   records each answer's features; each claim's features are read from its NLI scores.
2. The claim model is fitted on the claims whose ground truth is known (RAGTruth's labelled spans,
   FEVER's claims); the answers' `claim_p_max` is then that model's highest claim probability.
3. The answer model is fitted on every case, each data set weighing the same in total (FEVER's
   785 dev claims would otherwise teach it FEVER's mix of signals), classes as they come, WITHIN
   strata (a kind of text each: given responses, claims to check, the local generator's answers;
   fit_stratified): one intercept per stratum, weights shared. Each profile a request is
   recognised by (a response, a claim) keeps its stratum's intercept and its F1-best threshold
   on its own dev cases; the pooled threshold stays for a file without profiles (labelled so in
   the file's `about`: the figures to quote come from `ragmend bench detect` on test splits).

The examples (features and labels, no text) are written beside the answers, so a refit with
other choices takes seconds (`ragmend verdict fit --reuse`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ragmend.corpora.cases import Case, claim_labels
from ragmend.diagnosis.diagnoser import Diagnoser, case_text_features, response_claims
from ragmend.diagnosis.verdict import (
    ANSWER_FEATURES,
    CLAIM_FEATURES,
    GeneratedAnswers,
    LinearScore,
    Profile,
    VerdictModel,
    claim_features,
    fit_score,
    fit_stratified,
)

# The local generator's answers (bench/suites/answers.py), the data of its own answer model, and
# the features it reads: chosen by leave-one-out AUROC on the DEV HotpotQA answers (0.68, against
# 0.64 with every feature and 0.50 for the model of every data set; reports/history/diagnosis.md).
GENERATED_SETS = ("hotpotqa", "unanswerable")
GENERATED_FEATURES = ("logprob_min", "logprob_mean", "egc", "support_mean", "statement_entail", "relevance")

# The kind of text each data set's answers are (diagnosis/verdict.py profile_of): the answer model
# is fitted within these strata, and the two a request can be told apart by get their own
# intercept and threshold. The local generator's answers are a stratum of their own (mostly wrong,
# a sentence long); with log-probabilities they are scored by their own model (fit_generated).
STRATUM_OF_SET = {"ragtruth": "response", "fever": "claim", "hotpotqa": "answer", "unanswerable": "answer"}
PROFILES = ("response", "claim")

PROBE = VerdictModel(
    claim=LinearScore(features=(), mean=(), scale=(), coef=(), intercept=0.0),
    answer=LinearScore(features=(), mean=(), scale=(), coef=(), intercept=0.0),
    threshold=0.5,
)


@dataclass(frozen=True, kw_only=True)
class Example:
    """One case's features, as the verdict model reads them."""

    set: str
    group: str
    unsupported: bool
    answer: dict[str, float]
    claims: tuple[dict[str, float], ...]
    claim_labels: tuple[bool | None, ...]
    id: str = ""  # the case's id: its text features can be recomputed from it (refresh_text_features)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> Example:
        return Example(
            set=d["set"],
            group=d["group"],
            unsupported=bool(d["unsupported"]),
            answer=dict(d["answer"]),
            claims=tuple(dict(c) for c in d["claims"]),
            claim_labels=tuple(d["claim_labels"]),
            id=str(d.get("id", "")),
        )


def probe_diagnoser(diagnoser: Diagnoser) -> Diagnoser:
    return Diagnoser(
        diagnoser.nli,
        diagnoser.embed,
        replace(diagnoser.options, verdict=PROBE),
        reranker=diagnoser.reranker,
        align_kg=diagnoser.align_kg,
    )


def examples(
    diagnoser: Diagnoser, cases: Sequence[Case], log: Callable[[str], None] = print
) -> list[Example]:
    probe = probe_diagnoser(diagnoser)
    out = []
    for n, c in enumerate(cases, start=1):
        d = probe.diagnose(c.query, c.passages, c.response, token_logprobs=c.token_logprobs)
        assert d.verdict is not None  # qa mode with a verdict model
        evidence = [f"{p.title}: {p.text}" if p.title else p.text for p in c.passages]
        claims = tuple(claim_features(v, evidence, c.query, c.response) for v in d.e_r.hypotheses)
        labels = tuple(claim_labels(c, [v.hypothesis for v in d.e_r.hypotheses]))
        out.append(
            Example(
                set=c.set,
                group=c.group,
                unsupported=c.unsupported,
                answer=dict(d.verdict.features),
                claims=claims,
                claim_labels=labels,
                id=c.id,
            )
        )
        if n % 100 == 0:
            log(f"diagnosed {n}/{len(cases)}")
    return out


def refresh_text_features(
    exs: Sequence[Example], cases: Mapping[tuple[str, str], Case], max_claims: int
) -> list[Example]:
    """The examples with the text features the diagnoser computes today (case_text_features),
    for the answer and each claim, from their cases: a feature added since they were recorded
    needs no NLI run again."""
    out = []
    for ex in exs:
        if (case := cases.get((ex.set, ex.id))) is None:
            raise ValueError(f"example {ex.set}/{ex.id or '?'} has no case to refresh it from")
        # The claims as the diagnoser splits a response (every fitting case is diagnosed as one).
        texts = response_claims(case.query, case.response, max_claims) if ex.claims else []
        if len(texts) != len(ex.claims):
            raise ValueError(
                f"example {ex.set}/{ex.id}: {len(ex.claims)} claims recorded, {len(texts)} split "
                "today (another max_claims or claim splitter): record the examples again with "
                "`ragmend verdict fit --out FILE` (without --reuse)"
            )
        fresh, fresh_claims = case_text_features(case.query, case.passages, case.response, texts)
        claims = tuple({**c, **_rounded(f)} for c, f in zip(ex.claims, fresh_claims, strict=True))
        out.append(replace(ex, answer={**ex.answer, **_rounded(fresh)}, claims=claims))
    return out


def _rounded(features: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in features.items()}


def with_claim_model(ex: Example, claim: LinearScore) -> dict[str, float]:
    x = dict(ex.answer)
    x["claim_p_max"] = max((claim.probability(c) for c in ex.claims), default=1.0)
    return x


def f1_best_threshold(p: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float]:
    """The threshold with the best F1 of "unsupported", counts weighted by `w` (one per case)."""
    w = np.ones(len(y)) if w is None else w
    best = (0.5, -1.0)
    for t in np.round(np.arange(0.05, 0.951, 0.01), 2):  # the thresholds as they are stored
        pred = p >= t
        tp = float(w[pred & y].sum())
        f1 = 2 * tp / max(1e-9, float(w[pred].sum() + w[y].sum()))
        if f1 > best[1]:
            best = (round(float(t), 2), f1)
    return best


def set_weights(exs: Sequence[Example]) -> list[float]:
    """One weight per example so that every data set weighs the same in total (mean weight 1)."""
    sizes = {s: sum(ex.set == s for ex in exs) for s in {ex.set for ex in exs}}
    return [len(exs) / (len(sizes) * sizes[ex.set]) for ex in exs]


def fit_verdict(exs: Sequence[Example], about: dict[str, Any] | None = None) -> VerdictModel:
    claim_rows = [
        (c, lab) for ex in exs for c, lab in zip(ex.claims, ex.claim_labels, strict=True) if lab is not None
    ]
    if len({lab for _, lab in claim_rows}) < 2 or len({ex.unsupported for ex in exs}) < 2:
        raise ValueError("the fitting cases need both supported and unsupported answers and claims")
    claim = fit_score(
        [c for c, _ in claim_rows], [lab for _, lab in claim_rows], CLAIM_FEATURES, balanced=False
    )
    rows = [with_claim_model(ex, claim) for ex in exs]
    y = np.array([ex.unsupported for ex in exs])
    weights = set_weights(exs)
    strata = [STRATUM_OF_SET.get(ex.set, ex.set) for ex in exs]
    answer, intercepts = fit_stratified(rows, y, ANSWER_FEATURES, strata, weights=weights)
    p = np.array([answer.probability(r) for r in rows])
    threshold, f1 = f1_best_threshold(p, y, np.asarray(weights))
    profiles = {}
    for name in PROFILES:
        own = np.array([s == name for s in strata])
        if name in intercepts and len(set(y[own])) == 2:
            p_own = np.array(
                [answer.probability(r, intercepts[name]) for r, o in zip(rows, own, strict=True) if o]
            )
            profiles[name] = Profile(intercepts[name], f1_best_threshold(p_own, y[own])[0])
    sets = sorted({ex.set for ex in exs})
    info = {
        "claims": len(claim_rows),
        "answers": len(exs),
        "per_set": {s: sum(ex.set == s for ex in exs) for s in sets},
        "unsupported_share": round(float(y.mean()), 4),
        "weights": "each data set weighs the same in the answer model",
        "fitted": "within strata (one intercept per kind of text: "
        + ", ".join(
            f"{k} = {'+'.join(sorted({e.set for e in exs if STRATUM_OF_SET.get(e.set, e.set) == k}))}"
            for k in sorted(intercepts)
        )
        + "); the profiles' thresholds are F1-best on their own cases",
        "stratum_intercepts": intercepts,
        "f1_at_threshold_on_the_fitting_cases": round(f1, 4),
        **(about or {}),
    }
    generated = fit_generated(exs, claim)
    if generated is not None:
        info["generated"] = {
            "answers": sum(ex.set in GENERATED_SETS for ex in exs),
            "features": list(GENERATED_FEATURES),
            "threshold": "the point of largest TPR - FPR on those dev answers (Youden's J)",
        }
    return VerdictModel(
        claim=claim, answer=answer, threshold=threshold, about=info, generated=generated, profiles=profiles
    )


def fit_generated(exs: Sequence[Example], claim: LinearScore) -> GeneratedAnswers | None:
    """The answer model for the local generator's own answers (GENERATED_SETS), on the features
    that separate right from wrong ones there. Its threshold balances the two errors (Youden's
    J): most of the small generator's dev answers are wrong, so an F1-best point would flag
    every answer, right ones included."""
    own = [ex for ex in exs if ex.set in GENERATED_SETS]
    y = np.array([ex.unsupported for ex in own], dtype=bool)
    if len(own) < 20 or y.all() or not y.any():
        return None
    rows = [with_claim_model(ex, claim) for ex in own]
    score = fit_score(rows, y, GENERATED_FEATURES, balanced=True)
    p = np.array([score.probability(r) for r in rows])
    best = max(
        (float(t) for t in np.round(np.arange(0.05, 0.951, 0.01), 2)),
        key=lambda t: (p[y] >= t).mean() - (p[~y] >= t).mean(),
    )
    return GeneratedAnswers(score, round(best, 2))
