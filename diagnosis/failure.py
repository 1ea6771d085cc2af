"""The failure type, decided once from one record of signals; the gated label; the stage.

`decide_failure` is the only place a failure type is assigned. It runs these steps, in order,
and records each one that ran with the type it left (Diagnosis.failure_steps):

  rule          D2R-RAG Algorithm 1 over the discrete signals: WP, IE, WR, LEM, else NoFailure
  off_question  an answer that does not address what was asked is WR, however well supported
  verdict       the calibrated verdict's decision (P(unsupported) and its overrules) replaces
                the rule's, which keeps only the types the verdict cannot see (WP, LEM)
  comparison    dates in the passages that pick the other alternative make the answer WR;
                dates that agree with an answer that is its pick alone make it NoFailure
  alternatives  the evidence supporting the other alternative of a choice makes it WR
  conflict      an answer that takes one side where the evidence holds incompatible answers
                (diagnosis/conflict.py) is WR: it is not reported as supported
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmend.diagnosis.comparison import settle
from ragmend.diagnosis.types import (
    ABSTAIN_LABEL,
    FailureStep,
    FailureType,
    Kappa,
    Mode,
    NLIState,
    OffQuestion,
    Outcome,
    Stage,
)
from ragmend.diagnosis.verdict import grounded

# LabelCompatible(y, e_q) for claim verification: the label must say what the evidence says.
_COMPATIBLE: dict[str, NLIState] = {
    "SUPPORTS": "entail",
    "REFUTES": "contradict",
    "NOT ENOUGH INFO": "neutral",
}


def label_compatible(label: str, e_q: NLIState) -> bool:
    expected = _COMPATIBLE.get(label.upper())
    return expected is None or expected == e_q


def failure_type(kappa: Kappa, e_q: NLIState, e_r: NLIState, label: str | None) -> FailureType:
    """D2R-RAG Algorithm 1, in its order: WP, IE, WR, LEM, else NoFailure."""
    if kappa == "conflict":
        return "WP"
    if e_q == "neutral":
        return "IE"
    if e_r != "entail":
        return "WR"
    if label is not None and not label_compatible(label, e_q):
        return "LEM"
    return "NoFailure"


@dataclass(frozen=True)
class FailureSignals:
    """Everything the failure type is decided from (one answer's, or one recorded row's)."""

    rule: FailureType  # Algorithm 1 over the discrete states (`failure_type`)
    kappa: Kappa
    off_question: OffQuestion | None = None  # what of the question the answer does not address
    # The calibrated verdict's decision (None: no verdict) and the features it read: whether the
    # answer abstains, and whether the evidence holds its key spans (verdict.grounded).
    unsupported: bool | None = None
    features: Mapping[str, float] = field(default_factory=dict)
    answerable: bool = True  # the evidence answers the question (answerability)
    comparison: Outcome | None = None  # a comparison in time against the passages' dates
    alternatives: Outcome | None = None  # a choice of attribute against the other alternative
    only_the_pick: bool = False  # the answer is its pick alone (comparison.only_the_pick)
    conflict: bool = False  # the evidence holds incompatible answers on a claim of the answer


@dataclass(frozen=True)
class FailureDecision:
    failure: FailureType
    rule: FailureType  # Algorithm 1 with the off-question step: what the rule alone decides
    steps: tuple[FailureStep, ...]


def decide_failure(s: FailureSignals) -> FailureDecision:
    """The failure type, step by step (the module's docstring has the order and why)."""
    failure = s.rule
    steps = [FailureStep("rule", failure)]
    if s.off_question is not None:
        if failure == "NoFailure":
            failure = "WR"
        steps.append(FailureStep("off_question", failure))
    rule = failure
    addresses = s.off_question is None
    if s.unsupported is not None:
        failure = failure_of(s.unsupported, rule, s.kappa, s.answerable, addresses, s.features)
        steps.append(FailureStep("verdict", failure))
    if s.comparison is not None:
        failure = settle(failure, s.comparison, addresses, s.only_the_pick)
        steps.append(FailureStep("comparison", failure))
    # Of the alternatives check only disagreement decides: where the passages agree with the
    # pick, the claim's own support has already spoken.
    if s.alternatives == "disagrees":
        failure = settle(failure, "disagrees", addresses, s.only_the_pick)
        steps.append(FailureStep("alternatives", failure))
    if s.conflict:
        if failure == "NoFailure":
            failure = "WR"
        steps.append(FailureStep("conflict", failure))
    return FailureDecision(failure, rule, tuple(steps))


def failure_of(
    unsupported: bool,
    rule: FailureType,
    kappa: Kappa,
    answerable: bool,
    addresses_question: bool,
    features: Mapping[str, float],
) -> FailureType:
    """`derive_failure` with what the verdict's own features say (no claim: an abstention;
    `grounded`)."""
    return derive_failure(
        unsupported,
        rule,
        kappa,
        answerable,
        addresses_question,
        abstained=features.get("abstained", 0.0) > 0,
        grounded=grounded(features),
    )


def derive_failure(
    unsupported: bool,
    rule: FailureType,
    kappa: Kappa,
    answerable: bool,
    addresses_question: bool = True,
    abstained: bool = False,
    grounded: bool = True,
) -> FailureType:
    """Algorithm 1's types, in its order, from the verdict.

    WP stays the knowledge graph's: a conflict with the corpus graph is a failure whatever the
    text scores say. IE for an abstention, and for an unsupported or ungrounded answer to a
    question the evidence does not answer (answerability replaces the answer-built e_q). A
    supported answer is not a failure because the question looked unanswerable: answerability
    reads the question and the passages alone, and a supported answer is better evidence that
    they answer it. An answer that does not address the question is WR whatever its verdict: a
    passage may well entail what it says. Then a supported verdict is NoFailure; an unsupported
    one takes the rule's type where the rule found one the verdict cannot see (LEM), else WR.
    `grounded` (verdict.grounded): an answer none of whose key spans occur in the evidence, to
    a question the evidence does not answer, is IE whatever its score: nothing read supports it,
    and that should not move with a refit of the score's intercepts."""
    if kappa == "conflict":
        return "WP"
    if abstained or (not answerable and (unsupported or not grounded)):
        return "IE"
    if not addresses_question:
        return "WR"
    if not unsupported:
        return "NoFailure"
    # The evidence answers the question here, so the rule's IE came from the statement built
    # from the answer, which a wrong answer fails as surely as missing evidence does: WR.
    return "WR" if rule in ("NoFailure", "IE") else rule


def gated_label(mode: Mode, failure: FailureType, label: str | None) -> str | None:
    """Claim mode: IE and LEM abstain ("Unverified", NOT ENOUGH INFO) instead of guessing."""
    if mode == "claim" and failure in ("IE", "LEM"):
        return ABSTAIN_LABEL
    return label


@dataclass(frozen=True)
class StageEvidence:
    """What the stage cascade looks at, all observable at request time (no ground truth)."""

    failure: FailureType
    e_q: NLIState
    reranked: bool
    on_topic: bool  # some passage is similar to the query (an EGC Q-E edge)
    best_query_similarity: float
    cut_evidence: bool  # a premise was truncated, or several chunks of one document came back


def attribute_stage(ev: StageEvidence) -> tuple[Stage, str]:
    """RAGEC's cascade (Section 4; docs/references.md), generation first, with request-time
    signals in place of its ground-truth recall: sufficient evidence -> generation; else reranking
    when a reranker chose the passages; else chunking when on-topic text was cut; else retrieval."""
    if ev.failure == "NoFailure":
        return "none", "no failure found"
    if ev.e_q != "neutral":
        if ev.failure == "LEM":
            return "generation", "the evidence decides the claim but the label says otherwise"
        what = "conflicts with the knowledge graph" if ev.failure == "WP" else "is not supported by it"
        return "generation", f"the evidence decides the question (e_q={ev.e_q}) but the response {what}"
    if ev.reranked:
        return "reranking", "the reranker's top passages do not answer the question"
    if ev.on_topic and ev.cut_evidence:
        return "chunking", "passages are on topic but cut (truncated, or one document split across chunks)"
    if ev.on_topic:
        return "retrieval", (
            f"passages are on topic (similarity {ev.best_query_similarity:.2f}) but none answers the question"
        )
    return "retrieval", (
        f"no retrieved passage is about the question (best similarity {ev.best_query_similarity:.2f})"
    )
