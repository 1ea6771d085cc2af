"""The values a diagnosis produces. Frozen: they cross into policy/, engine/ and the server."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

NLIState = Literal["entail", "neutral", "contradict"]
Kappa = Literal["consistent", "conflict", "missing", "no_triplet"]
FailureType = Literal["NoFailure", "WP", "IE", "WR", "LEM"]
Stage = Literal["none", "chunking", "retrieval", "reranking", "generation"]
Mode = Literal["qa", "claim"]
# How sure a failure is (decision.py): a confident one replaces the answer, an uncertain one marks it.
Grade = Literal["confident", "uncertain"]
# What of the question an answer does not address: its subject (an answer about someone else),
# its relation (born, when asked founded), the kind of answer (no date for "when", no number for
# "how many"), the year the question set (an answer dating it otherwise), anything beyond the
# question's own words (restated), or the alternatives it offers (choice).
OffQuestion = Literal["subject", "relation", "kind", "year", "restated", "choice"]

OFF_QUESTION: tuple[OffQuestion, ...] = (
    "subject",
    "relation",
    "kind",
    "year",
    "restated",
    "choice",
)
NLI_STATES: tuple[NLIState, ...] = ("entail", "neutral", "contradict")
KAPPAS: tuple[Kappa, ...] = ("consistent", "conflict", "missing", "no_triplet")
FAILURE_TYPES: tuple[FailureType, ...] = ("NoFailure", "WP", "IE", "WR", "LEM")
STAGES: tuple[Stage, ...] = ("none", "chunking", "retrieval", "reranking", "generation")
# FEVER labels; "Unverified" is the evidence-gated abstention (NOT ENOUGH INFO).
CLAIM_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
ABSTAIN_LABEL = "NOT ENOUGH INFO"


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """The aggregation rule's thresholds (the diagnosis settings *_threshold and egc_tau, whose
    defaults are the only ones: diagnosis/options.py)."""

    entail: float  # a passage entails a hypothesis when P(entail) >= this
    contradict: float  # ... contradicts it when P(contradict) >= this (and none entails)
    relevance: float  # rerank construction: sigmoid(max reranker logit) >= this = answers
    egc_tau: float  # EGC edge threshold on cosine similarity (the EGC paper's)
    joint_entail: float  # the joint premise (top passages concatenated) entails at this


@dataclass(frozen=True, kw_only=True)
class PassageScores:
    """One passage (or the joint premise) against one hypothesis: calibrated probabilities."""

    passage: str  # passage id, or "joint" for a claim's joint premise
    entail: float
    neutral: float
    contradict: float
    truncated: bool = False
    joined: tuple[str, ...] = ()  # the joint premise: the passages it reads together


@dataclass(frozen=True, kw_only=True)
class HypothesisVerdict:
    """A hypothesis (the query statement, or one claim of the response) over all passages."""

    hypothesis: str
    state: NLIState
    best_passage: str | None  # the passage that decided the state (None when neutral)
    scores: tuple[PassageScores, ...]
    p_unsupported: float | None = None  # the verdict's, for a response claim (diagnosis/verdict.py)


@dataclass(frozen=True, kw_only=True)
class AnswerSpan:
    """A character range of the answer holding a claim the diagnosis found unsupported
    (diagnosis/answer_spans.py)."""

    start: int
    end: int  # exclusive
    text: str  # answer[start:end]
    claim: int  # the claim's index among e_r's hypotheses
    p_unsupported: float | None  # the claim's (None without a verdict)
    state: NLIState  # the claim's NLI state


# The construction of e_r when the response abstains ("I don't know.": no claim to check).
ABSTAINED = "abstained"


@dataclass(frozen=True)
class NLISignal:
    state: NLIState
    hypotheses: tuple[HypothesisVerdict, ...]
    construction: str  # how the hypothesis was built (query signal) or "claims" (response)
    # The graded form of `state`: the mean over hypotheses of the best P(entail) any premise gives
    # it (rerank construction: the best relevance); None without scores (a bare label, an
    # abstention). Filled from the hypotheses when not given. On RAGTruth it ranks hallucinated
    # responses best of the diagnosis' signals (reports/ragtruth.md).
    support: float | None = None

    def __post_init__(self) -> None:
        if self.support is None:
            best = [max(s.entail for s in h.scores) for h in self.hypotheses if h.scores]
            if best:
                object.__setattr__(self, "support", round(sum(best) / len(best), 4))


@dataclass(frozen=True, kw_only=True)
class TripleMatch:
    """A response triple and the KG triple it was aligned with (the explanation of kappa)."""

    triple: tuple[str, str, str]
    verdict: str  # consistent | conflict | missing
    kg_triple: tuple[str, str, str] | None = None
    similarity: tuple[float, float, float] | None = None  # subject, relation, object
    source: str = ""  # the KG triple's node id
    reason: str = ""  # why this verdict ("same subject and relation, another name")
    # A conflict only because the graph holds another object for the subject and relation (no
    # clash of names, numbers or negation on a matching object): maybe another fact, such as a
    # place within a place, which the graph cannot tell (diagnosis/kg_crosscheck.py).
    another_object: bool = False


@dataclass(frozen=True)
class KGSignal:
    kappa: Kappa
    matches: tuple[TripleMatch, ...] = ()
    available: bool = True  # False: no knowledge graph was built for this index


@dataclass(frozen=True, kw_only=True)
class EGCFeatures:
    """Evidence Graph Consistency (the EGC paper): claim / evidence / question nodes, cosine edges."""

    coverage: float
    support_density: float
    agreement: float
    connectivity: float
    isolation: float
    score: float  # (coverage + support_density + connectivity - isolation) / 3, in [-1/3, 1]


# Why a verdict calls an answer unsupported: its P(unsupported) at the operating point, a claim a
# passage refutes (diagnosis.refute_threshold), nothing that supports it (diagnosis.support_floor).
UnsupportedBy = Literal["score", "refuted", "unbacked"]
UNSUPPORTED_BY: tuple[UnsupportedBy, ...] = ("score", "refuted", "unbacked")


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The calibrated verdict over every signal (diagnosis/verdict.py): the failure follows it."""

    p_unsupported: float
    threshold: float  # the operating point: unsupported when p_unsupported >= threshold
    unsupported: bool  # that, or a claim refuted, or nothing supports it (unsupported_by)
    rule_failure: FailureType  # what Algorithm 1 over the discrete NLI states alone would say
    features: dict[str, float]  # every signal the verdict read, by name
    # Whose operating point: "generated" (the generator's own answers, with its log-probabilities),
    # "claim" (a claim given to check), "response", or "default" (a file without profiles).
    profile: str = "default"
    unsupported_by: tuple[UnsupportedBy, ...] = ()  # what made it unsupported; () when supported
    sure: bool = True  # sure enough that a failure it finds replaces the answer (decision.verdict_sure)


# The rules that decide the failure type, in their order (decision.RULES, where each is explained).
RuleName = Literal[
    "graph_conflict",
    "comparison_disagrees",
    "alternatives_disagree",
    "comparison_agrees",
    "missed_answer",
    "abstained",
    "unanswered",
    "insufficient_evidence",
    "off_question",
    "evidence_conflict",
    "supported",
    "label_mismatch",
    "unsupported",
    "no_failure",
]


@dataclass(frozen=True)
class FailureStep:
    """One rule of the failure decision that applies, and the failure type it decides."""

    step: RuleName
    failure: FailureType


Direction = Literal["earlier", "later"]
Outcome = Literal["agrees", "disagrees", "undecided"]


@dataclass(frozen=True, kw_only=True)
class DecisionSignals:
    """Everything the failure type is decided from (diagnosis/decision.py): what the checks and
    the verdict found, for one answer or one recorded row."""

    kappa: Kappa  # the answer's triples against the corpus graph, cross-checked by the passages
    e_q: NLIState  # Algorithm 1's e_q: the statement built from the answer, or answerability
    e_r: NLIState  # the response's claims, aggregated
    label_matches: bool | None = None  # claim mode: the label says what e_q says; None: no label
    off_question: OffQuestion | None = None  # what of the question the answer does not address
    unsupported: bool | None = None  # the verdict's decision (decision.VERDICT_RULES); None: no verdict
    sure: bool = True  # the verdict is sure enough to replace an answer (decision.verdict_sure)
    abstained: bool = False  # the response makes no claim
    grounded: bool = True  # the evidence holds one of a one-claim answer's key spans
    answerable: bool = True  # the evidence answers the question (answerability), whatever the answer
    comparison: Outcome | None = None  # a comparison in time against the passages' dates
    alternatives: Outcome | None = None  # a choice of attribute against the other alternative
    only_the_pick: bool = False  # the answer is its pick alone (comparison.only_the_pick)
    conflict: bool = False  # the evidence holds incompatible answers on a claim of the answer


@dataclass(frozen=True)
class Date:
    year: int
    month: int = 0  # 0: not given
    day: int = 0

    def __str__(self) -> str:
        return "-".join([f"{self.year:04d}", *(f"{v:02d}" for v in (self.month, self.day) if v)])


@dataclass(frozen=True, kw_only=True)
class ComparisonCheck:
    """A comparison in time against the passages' own dates (diagnosis/comparison.py)."""

    alternatives: tuple[str, str]
    direction: Direction
    dates: tuple[Date | None, Date | None]  # each alternative's, from its passage's opening
    expected: int | None  # the alternative the dates pick; None: they do not decide
    picked: int  # the alternative the answer picks
    outcome: Outcome
    from_corpus: tuple[bool, bool] = (False, False)  # a date read from the corpus, not the passages


@dataclass(frozen=True)
class AlternativeCheck:
    """A choice of attribute ("Which company is based in Kentucky, A or B?") checked against the
    alternative the answer did not pick (diagnosis/alternatives.py)."""

    alternatives: tuple[str, str]
    picked: int  # the alternative the answer picks
    # Each alternative's support: the best single window's P(entailment) of the answer's claim
    # naming it (the answer as given for the pick, the other swapped in for the other).
    support: tuple[float, float]
    outcome: Outcome  # disagrees: the evidence supports the other alternative, not the pick


@dataclass(frozen=True)
class ConflictSide:
    """The passages that give one answer to the question, and what they say."""

    passages: tuple[str, ...]  # passage ids
    says: str  # the answer's claim (its side), or the sentence quoted from the passage
    takes_answer: bool  # the side the answer took
    # The sum of its passages' source trust levels; None where any of them has none.
    trust: float | None = None


@dataclass(frozen=True)
class EvidenceConflict:
    """The evidence holds incompatible answers: passages entailing a claim of the answer beside
    passages contradicting it (diagnosis/conflict.py)."""

    claim: str
    sides: tuple[ConflictSide, ...]
    strength: float  # min(best entailment, best contradiction) of the two sides


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    mode: Mode
    e_q: NLISignal
    e_r: NLISignal
    kg: KGSignal
    failure: FailureType
    egc: EGCFeatures
    evidence_conflict: bool  # the evidence holds incompatible answers (`conflict` says which)
    stage: Stage
    stage_reason: str
    label: str | None = None  # the task label y read from the response (claim mode)
    final_label: str | None = None  # y, or the abstention label when the evidence gate closes
    timings: dict[str, float] = field(default_factory=dict)  # seconds per diagnosis step
    verdict: Verdict | None = None  # None: no verdict model (Algorithm 1's rule decides)
    off_question: OffQuestion | None = None  # None: the answer addresses the question (or no check)
    comparison: ComparisonCheck | None = None  # None: not a comparison in time the answer answers
    alternatives: AlternativeCheck | None = None  # None: not a choice of attribute the answer makes
    # How the failure type was decided: every rule that applies, in order, with the type it
    # decides; the first one decided (`decided_by`). None: not judged.
    failure_steps: tuple[FailureStep, ...] = ()
    decided_by: RuleName | None = None
    grade: Grade | None = None  # how sure the failure is (decision.py); None: no failure
    signals: DecisionSignals | None = None  # what the rules read
    # The language the question and the answer read as (ISO 639-1; "und": nothing to tell, such
    # as a bare number), and why the diagnosis did not judge the answer: its rules and its NLI
    # model read English only, so a text in another language is left unjudged, not guessed at.
    # Such a diagnosis finds no failure (nothing was checked) and triggers no repair.
    language: str = "en"
    not_judged: str | None = None
    # Where the answer is unsupported, claim by claim; empty when it passes or was not judged.
    unsupported_spans: tuple[AnswerSpan, ...] = ()
    # Which passages hold which answer, when the evidence holds incompatible answers to the
    # question on a claim of the answer; None: it does not.
    conflict: EvidenceConflict | None = None

    @property
    def kappa(self) -> Kappa:
        return self.kg.kappa

    @property
    def failed(self) -> bool:
        return self.failure != "NoFailure"

    @property
    def judged(self) -> bool:
        return self.not_judged is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
