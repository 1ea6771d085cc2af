"""The calibrated verdict: one P(unsupported) per answer and per claim from all the signals.

Algorithm 1 reads three discrete states; each hides a graded score and none alone separates right
from wrong answers well (docs/diagnosis.md). The verdict is two logistic regressions over named
features, fitted on DEV answers and RAGTruth's train sample (`ragmend verdict fit`):

- per claim: its best window P(entail) and P(contradict), whether its names and numbers occur
  in the evidence, and the share of its content words the evidence never says (novelty);
- per answer: the claims' support (mean and weakest) and the highest claim P(unsupported), the
  query statement's support, the answer's key-span coverage, its relevance to the question
  (entity overlap, answer type), the share of its content words the evidence does not hold
  (novelty), the question's coverage by one passage, the cross-encoder's
  relevance of the best passage to the question (answerability), the query-evidence
  similarity, EGC, whether the response abstains, and the generator's confidence (its mean and
  lowest token log-probability) where its engine reports it.

A feature the model was not fitted with is ignored; one it needs and the request lacks takes its
neutral value from `NEUTRAL`, or, without one, the mean it was fitted with (so a model file never
breaks an older or newer diagnoser, and a response with no log-probabilities is scored on the rest). The file
(JSON) records its features, weights, standardisation, operating threshold and what it was fitted
on; whether the score and its overrules make an answer unsupported, and the failure type that
follows, are decided in decision.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ragmend
from ragmend.diagnosis.choices import offered_choice
from ragmend.diagnosis.off_question import answer_relevance
from ragmend.diagnosis.spans import (
    best_passage_coverage,
    names_unasked,
    normalise,
    novel_words,
    span_coverage,
)
from ragmend.diagnosis.types import HypothesisVerdict
from ragmend.errors import ConfigError
from ragmend.fileio import atomic_write_text
from ragmend.logistic import Logistic, fit_logistic

# ragmend's package directory, not this file's parent: in a checkout diagnosis/ is a link target
# outside ragmend/, where the assets are.
BUNDLED = Path(ragmend.__file__).parent / "assets" / "verdict" / "verdict.json"

CLAIM_FEATURES = ("entail", "contradict", "span_coverage", "joint_entail", "novel_share", "novel_count")
ANSWER_FEATURES = (
    "support_mean",
    "support_min",
    "contradict_max",
    "claim_p_max",
    "statement_entail",
    "span_coverage",
    "novel_share",
    "novel_count",
    "entity_overlap",
    "type_match",
    "question_coverage",
    "relevance",
    "query_similarity",
    "egc",
    "abstained",
    "log_claims",
    "logprob_mean",
    "logprob_min",
)
# Each signal's direction by what it means (+1: raises P(unsupported), -1: lowers it, 0: either):
# fitted on a few hundred dev answers of a mix of data sets, a weight may otherwise take the sign
# of a quirk of that mix (in the first unconstrained fit the question's coverage by a passage
# RAISED the risk), which then misleads on data it never saw.
SIGNS: dict[str, int] = {
    "entail": -1,
    "contradict": 1,
    "joint_entail": -1,
    "support_mean": -1,
    "support_min": -1,
    "contradict_max": 1,
    "claim_p_max": 1,
    "statement_entail": -1,
    "span_coverage": -1,
    "novel_share": 1,
    "novel_count": 1,
    "entity_overlap": -1,
    "type_match": -1,
    "question_coverage": -1,
    "relevance": -1,
    "query_similarity": -1,
    "egc": -1,
    "abstained": 1,
    "log_claims": 0,
    "logprob_mean": -1,
    "logprob_min": -1,
}
# What a missing feature counts as: the value that says least (full coverage, no contradiction).
NEUTRAL: dict[str, float] = {
    "span_coverage": 1.0,
    "entity_overlap": 1.0,
    "type_match": 1.0,
    "question_coverage": 1.0,
    "relevance": 1.0,
    "contradict": 0.0,
    "contradict_max": 0.0,
    "joint_entail": 0.0,
    "abstained": 0.0,
}


@dataclass(frozen=True, kw_only=True)
class LinearScore:
    """A fitted logistic regression with its feature names (the JSON form of ragmend.logistic)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def probability(self, x: Mapping[str, float], intercept: float | None = None) -> float:
        z = self.intercept if intercept is None else intercept
        for name, m, s, c in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            z += c * (x.get(name, NEUTRAL.get(name, m)) - m) / s
        return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))

    @staticmethod
    def of(features: Sequence[str], fitted: Logistic) -> LinearScore:
        return LinearScore(
            features=tuple(features),
            mean=tuple(round(float(v), 6) for v in fitted.mean),
            # A feature constant on the fitting data has no spread (its weight is 0): scale 1.
            scale=tuple(round(float(v), 6) if v > 1e-6 else 1.0 for v in fitted.scale),
            coef=tuple(round(float(v), 6) for v in fitted.coef),
            intercept=round(float(fitted.intercept), 6),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> LinearScore:
        n = len(d["features"])
        if not all(len(d[k]) == n for k in ("mean", "scale", "coef")):
            raise ConfigError("verdict model: features, mean, scale and coef differ in length")
        return LinearScore(
            features=tuple(d["features"]),
            mean=tuple(d["mean"]),
            scale=tuple(d["scale"]),
            coef=tuple(d["coef"]),
            intercept=float(d["intercept"]),
        )


@dataclass(frozen=True)
class GeneratedAnswers:
    """The answer model for answers of the deployment's own generator, recognised by the token
    log-probabilities its engine reports: fitted on the local generator's DEV answers only, where
    the generator's confidence is a signal and the mix of given responses (RAGTruth's, FEVER's
    claims) would otherwise set the weights."""

    answer: LinearScore
    threshold: float

    def as_json(self) -> dict[str, Any]:
        return {"answer": self.answer.as_json(), "threshold": self.threshold}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> GeneratedAnswers:
        return GeneratedAnswers(LinearScore.from_json(d["answer"]), float(d["threshold"]))


@dataclass(frozen=True)
class Profile:
    """The answer model's baseline and operating point for one kind of text judged: the weights
    are shared (what a signal means does not change), the base rate and the scale of the signals
    do (a claim given to check is one sentence; a summary is ten)."""

    intercept: float
    threshold: float


def profile_of(features: Mapping[str, float]) -> str:
    """The kind of text an answer is: a claim given to check (the response is the query itself),
    or a response to a question or a task."""
    return "claim" if features.get("restates_query") else "response"


@dataclass(frozen=True, kw_only=True)
class VerdictModel:
    claim: LinearScore
    answer: LinearScore
    threshold: float  # P(unsupported) at or above which an answer fails (fitted on dev)
    about: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, and its dev figures
    generated: GeneratedAnswers | None = None  # for answers with the generator's log-probabilities
    profiles: Mapping[str, Profile] = field(default_factory=dict)  # by profile_of; absent: the above

    def score(
        self, features: Mapping[str, float], claims: Sequence[Mapping[str, float]]
    ) -> tuple[float, float]:
        """(P(unsupported), the threshold it is read against) of one answer from its features
        (claim_p_max is recomputed from its claims' features with this model's claim score)."""
        x = {**features, "claim_p_max": max((self.claim.probability(c) for c in claims), default=1.0)}
        name = self.profile_for(x)
        if name == "generated":
            assert self.generated is not None  # profile_for names it only when there is one
            return self.generated.answer.probability(x), self.generated.threshold
        if (profile := self.profiles.get(name)) is not None:
            return self.answer.probability(x, profile.intercept), profile.threshold
        return self.answer.probability(x), self.threshold

    def profile_for(self, features: Mapping[str, float]) -> str:
        """Which operating point scores an answer with these features (the Verdict's `profile`)."""
        if self.generated is not None and "logprob_mean" in features:
            return "generated"
        name = profile_of(features)
        return name if name in self.profiles else "default"

    @staticmethod
    def load(path: Path) -> VerdictModel:
        try:
            d = json.loads(Path(path).read_text())
            return VerdictModel(
                claim=LinearScore.from_json(d["claim"]),
                answer=LinearScore.from_json(d["answer"]),
                threshold=float(d["threshold"]),
                about=dict(d.get("about", {})),
                generated=GeneratedAnswers.from_json(d["generated"]) if d.get("generated") else None,
                profiles={
                    name: Profile(float(p["intercept"]), float(p["threshold"]))
                    for name, p in (d.get("profiles") or {}).items()
                },
            )
        except FileNotFoundError:
            raise ConfigError(f"verdict model {path} not found (diagnosis.verdict)") from None
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"verdict model {path} is not a verdict file: {e}") from None

    def save(self, path: Path) -> None:
        body = {
            "claim": self.claim.as_json(),
            "answer": self.answer.as_json(),
            "threshold": self.threshold,
            "generated": self.generated.as_json() if self.generated else None,
            "profiles": {
                name: {"intercept": p.intercept, "threshold": p.threshold}
                for name, p in self.profiles.items()
            },
            "about": self.about,
        }
        atomic_write_text(Path(path), json.dumps(body, indent=2) + "\n")


def open_verdict(spec: str) -> VerdictModel | None:
    """diagnosis.verdict: "off", "bundled" or a file path."""
    if spec == "off":
        return None
    return VerdictModel.load(BUNDLED if spec == "bundled" else Path(spec).expanduser())


def claim_features(
    v: HypothesisVerdict, evidence: Sequence[str], query: str, response: str
) -> dict[str, float]:
    """One response claim: its best window P(entail) and P(contradict), the joint premise's
    P(entail) where it was allowed to bridge, the share of its names found in the evidence, and
    its novelty (claim_text_features)."""
    own = [s for s in v.scores if s.passage != "joint"]
    x = {
        "entail": max((s.entail for s in own), default=0.0),
        "contradict": max((s.contradict for s in own), default=0.0),
        "joint_entail": max((s.entail for s in v.scores if s.passage == "joint"), default=0.0),
        **claim_text_features(v.hypothesis, evidence, query, response),
    }
    if (cov := span_coverage(v.hypothesis, evidence, exclude=query)) is not None:
        x["span_coverage"] = cov
    return x


def _restated(query: str, response: str) -> str:
    """The text whose words are not new in the response: the question (restating it asserts
    nothing), or nothing when the response IS the query (a claim given to check is judged
    against the evidence alone)."""
    return "" if normalise(query) == normalise(response) else query


def claim_text_features(claim: str, evidence: Sequence[str], query: str, response: str) -> dict[str, float]:
    """A claim's novelty: the share of its content words the evidence never says, and how many
    (log1p). A hallucinated sentence is often one that adds words (RAGTruth's "baseless info").
    And `choice`: whether it answers a question offering two alternatives ("Who is younger, A or
    B?") with nothing the question does not name, a claim ("B is younger than A") no single
    window can settle (`refutation`, `backing`). One that names more ("Aleksandr Ivanovsky was
    born 7 August 1952.", a date a passage gives for someone else) a window can settle."""
    share, count = novel_words(claim, evidence, exclude=_restated(query, response))
    choice = offered_choice(query) is not None and not names_unasked(claim, normalise(query))
    return {
        "novel_share": share,
        "novel_count": float(np.log1p(count)),
        "choice": float(choice),
    }


def answer_features(
    query: str,
    response: str,
    evidence: Sequence[str],
    claims: Sequence[Mapping[str, float]],
    p_claims: Sequence[float],
    statement_support: float | None,
    egc: float,
    q_sims: np.ndarray,
    relevance: np.ndarray | None = None,
    token_logprobs: Sequence[float] | None = None,
    question: bool = False,
) -> dict[str, float]:
    """Every answer-level signal by name (ANSWER_FEATURES), from the claims' features and
    probabilities and the request's other signals (`relevance`: each passage's cross-encoder
    probability of answering the question, where a reranker is loaded; `token_logprobs`: the
    generator's log-probability of each answer token, where its engine reports them; `question`:
    the request asks a question, whose answer's `backing` is then recorded)."""
    support = [max(x["entail"], x["joint_entail"]) for x in claims]
    overlap, kind = answer_relevance(query, response)
    covered = best_passage_coverage(query, evidence)
    features: dict[str, float] = {
        "support_mean": float(np.mean(support)) if support else 0.0,
        "support_min": min(support, default=0.0),
        "contradict_max": max((x["contradict"] for x in claims), default=0.0),
        "claim_p_max": max(p_claims, default=1.0),
        "statement_entail": statement_support or 0.0,
        "entity_overlap": overlap,
        "type_match": kind,
        "question_coverage": 1.0 if covered is None else covered,
        "query_similarity": float(q_sims.max()) if len(q_sims) else 0.0,
        "egc": egc,
        "abstained": float(not claims),
        "log_claims": float(np.log1p(len(claims))),
        "refuted": refutation(claims),
    }
    if (cov := span_coverage(response, evidence, exclude=query)) is not None:
        features["span_coverage"] = cov
    features.update(text_features(query, response, evidence))
    if relevance is not None and len(relevance):
        features["relevance"] = float(np.max(relevance))
    if judges_backing(question, features):
        features["backing"] = backing(claims)
    if token_logprobs:
        # The generator's confidence: its mean per-token log-probability, and its least sure
        # token (a guessed name is often one uncertain token in an otherwise fluent sentence).
        features["logprob_mean"] = float(np.mean(token_logprobs))
        features["logprob_min"] = float(min(token_logprobs))
    return features


def text_features(query: str, response: str, evidence: Sequence[str]) -> dict[str, float]:
    """What the response says that its evidence does not (the share of its content words absent
    from the evidence and the question, and how many, log1p), and whether the response is the
    query itself (a claim given to check: its profile, not a signal). Pure functions of the texts,
    so examples and benchmark rows recorded before them can be given them from their cases."""
    exclude = _restated(query, response)
    share, count = novel_words(response, evidence, exclude=exclude)
    return {"novel_share": share, "novel_count": float(np.log1p(count)), "restates_query": float(not exclude)}


def fit_score(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[bool] | np.ndarray,
    features: Sequence[str],
    balanced: bool = False,
    weights: Sequence[float] | None = None,
) -> LinearScore:
    """Fit one score on feature rows. A missing feature takes its neutral value, or where it has
    none (the generator's log-probabilities, absent from given responses) the mean of the rows
    that have it: as `LinearScore.probability` reads a missing one, it then moves nothing."""
    x = _matrix(rows, features)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    signs = np.array([SIGNS.get(f, 0) for f in features], dtype=np.float64)
    fitted = fit_logistic(
        x, np.asarray(labels, dtype=bool), l2=1.0, balanced=balanced, weights=w, signs=signs
    )
    return LinearScore.of(features, fitted)


def fit_stratified(
    rows: Sequence[Mapping[str, float]],
    labels: Sequence[bool] | np.ndarray,
    features: Sequence[str],
    strata: Sequence[str],
    weights: Sequence[float] | None = None,
) -> tuple[LinearScore, dict[str, float]]:
    """One score fitted within strata: each stratum (a kind of text) has its own intercept, so
    the weights say how a signal moves P(unsupported) among texts of one kind, not how the kinds
    differ. Pooled, a mix confounds the two: the local generator's short answers are mostly wrong
    and add no words to their evidence, so a pooled fit learns that new words LOWER the risk,
    which is the reverse of what they mean within every data set. Returns the score (its
    intercept the strata's mean) and each stratum's intercept."""
    names = sorted(set(strata))
    x = _matrix(rows, features)
    dummies = np.array([[s == n for n in names[1:]] for s in strata], dtype=np.float64).reshape(
        len(strata), -1
    )
    signs = np.array([SIGNS.get(f, 0) for f in features] + [0] * (len(names) - 1), dtype=np.float64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    fitted = fit_logistic(
        np.column_stack([x, dummies]),
        np.asarray(labels, dtype=bool),
        l2=1.0,
        balanced=False,
        weights=w,
        signs=signs,
    )
    k = len(features)
    # A stratum's intercept: the shared one plus its indicator columns' standardised terms.
    d_coef, d_mean, d_scale = fitted.coef[k:], fitted.mean[k:], fitted.scale[k:]
    intercepts = {
        n: float(
            fitted.intercept
            + sum(
                c * (float(i == j) - m) / s
                for j, (c, m, s) in enumerate(zip(d_coef, d_mean, d_scale, strict=True))
            )
        )
        for i, n in enumerate(names, start=-1)
    }
    mean_intercept = float(np.mean(list(intercepts.values())))
    score = LinearScore.of(
        features, Logistic(fitted.mean[:k], fitted.scale[:k], fitted.coef[:k], mean_intercept)
    )
    return score, {n: round(v, 6) for n, v in intercepts.items()}


def _matrix(rows: Sequence[Mapping[str, float]], features: Sequence[str]) -> np.ndarray:
    """The rows' features as a matrix; a missing one takes its neutral value, or the mean of the
    rows that have it."""
    x = np.array([[r.get(f, NEUTRAL.get(f, np.nan)) for f in features] for r in rows], dtype=np.float64)
    for j in range(x.shape[1]):
        seen = ~np.isnan(x[:, j])
        x[~seen, j] = x[seen, j].mean() if seen.any() else 0.0
    return x


def refutation(claims: Sequence[Mapping[str, float]]) -> float:
    """The strongest contradiction of a claim that no window (nor the joint premise) entails
    more strongly: the answer's `refuted` feature. Entailment wins over contradiction within a
    claim, as in Algorithm 1's rule (aggregate.py): a retrieved set often holds a passage that
    disagrees with what another states, and the claim is still supported. A claim choosing
    between two alternatives is left out: each window holds one alternative's fact, and the NLI
    model reads a comparison of the two as contradicted by either (on DEV, most right answers
    such a bar flagged were these)."""
    return max(
        (
            c["contradict"]
            for c in claims
            if not c.get("choice") and c["contradict"] > max(c["entail"], c.get("joint_entail", 0.0))
        ),
        default=0.0,
    )


def backing(claims: Sequence[Mapping[str, float]]) -> float:
    """The best support (P(entailment) of one window, or of the joint premise where it may
    bridge) of any claim one passage could settle: a claim choosing between two alternatives is
    left out, as in `refutation`. 1 when no claim is left (an abstention is judged apart)."""
    return max(
        (max(c["entail"], c.get("joint_entail", 0.0)) for c in claims if not c.get("choice")),
        default=1.0,
    )


def judges_backing(question: bool, features: Mapping[str, float]) -> bool:
    """Whether an answer's `backing` is recorded (and `unbacked` can fail it): it answers a
    question, and is not a claim given to check (a response restating its request)."""
    return question and not features.get("restates_query")


def grounded(features: Mapping[str, float]) -> bool:
    """Whether the evidence holds any of a one-claim answer's key spans (its `span_coverage`
    feature; an answer naming nothing beyond the question counts as grounded). A response of
    several claims counts as grounded: over a long paraphrasing response, no span found says
    little (RAGTruth's DEV sample: 10 supported and 7 unsupported such responses; one-claim
    answers: 2 supported, 7 unsupported)."""
    if round(float(np.expm1(features.get("log_claims", 0.0)))) > 1:  # log_claims = log1p(claims)
        return True
    return features.get("span_coverage", 1.0) > 0
