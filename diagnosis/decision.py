"""Every decision the diagnosis takes from its signals, in one place, as two ordered tables.

The checks (the NLI adjustments, the graph's cross-check, answerability, off-question,
comparison, alternatives, conflict) and the verdict's score only report what they found: into a
`Support` record (is the answer unsupported, and why) and a `DecisionSignals` record (what the failure
type is decided from). Nothing else in ragmend assigns a failure type.

- `VERDICT_RULES`: an answer is unsupported when any of them applies; the verdict lists each one
  that did (`Verdict.unsupported_by`).
- `RULES`: the failure type is what the FIRST rule that applies decides; the diagnosis names it
  (`decided_by`) and lists every rule that applied, in order (`failure_steps`).
- `grade`: how sure a failure is. A confident one replaces the answer (its repair, abstention or
  correction); an uncertain one leaves it, its unsupported sentences marked. A failure is
  confident where a sure rule decided it, or where the verdict is sure (P(unsupported) at
  `diagnosis.replace_threshold`, or a sure verdict rule applied), or without a verdict.

docs/diagnosis.md's "The failure type" is generated from these tables (`markdown`; the test of
this module checks that the two agree).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, Literal, TypeVar

from ragmend.diagnosis.types import (
    ABSTAIN_LABEL,
    DecisionSignals,
    FailureStep,
    FailureType,
    Grade,
    Mode,
    NLIState,
    RuleName,
    UnsupportedBy,
)

# -- whether the verdict calls an answer unsupported -------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Support:
    """What the verdict's decision reads: the score and its operating point, and the two claim
    signals that overrule it (verdict.refutation, verdict.backing), with their settings."""

    p_unsupported: float
    threshold: float
    refutation: float = 0.0  # the strongest contradiction of a claim nothing entails more
    sentences: int = 1  # the answer's sentences (one may hold several claims)
    backing: float | None = None  # the best support of a claim one window could settle; None: not read
    refute_at: float | None = None  # diagnosis.refute_threshold (None: off)
    support_floor: float | None = None  # diagnosis.support_floor (None: off)

    @staticmethod
    def of(
        p: float,
        threshold: float,
        features: Mapping[str, float],
        refute_at: float | None,
        support_floor: float | None,
        *,
        sentences: int = 1,
    ) -> Support:
        """From the verdict's named features (`refuted`, and `backing` where it was recorded) and
        the answer's number of sentences."""
        return Support(
            p_unsupported=p,
            threshold=threshold,
            refutation=features.get("refuted", 0.0),
            sentences=sentences,
            backing=features.get("backing"),
            refute_at=refute_at,
            support_floor=support_floor,
        )


S = TypeVar("S")
N = TypeVar("N", bound=str)


@dataclass(frozen=True)
class Rule(Generic[S, N]):
    """One named rule: when it applies to what the diagnosis read, and why it earns its place."""

    name: N
    applies: Callable[[S], bool]
    when: str
    why: str
    # What it finds is decisive evidence, not a score: a failure it decides replaces the answer.
    sure: bool = field(default=False, kw_only=True)


VerdictRule = Rule[Support, UnsupportedBy]

VERDICT_RULES: tuple[VerdictRule, ...] = (
    VerdictRule(
        "score",
        lambda s: s.p_unsupported >= s.threshold,
        "P(unsupported) is at or above the operating point",
        "the calibrated score over every signal (diagnosis/verdict.py)",
    ),
    VerdictRule(
        "refuted",
        lambda s: s.refute_at is not None and s.sentences == 1 and s.refutation >= s.refute_at,
        "an answer of one sentence has a claim contradicted at `diagnosis.refute_threshold` that nothing "
        "entails more",
        "a linear score weighs one decisive contradiction against all that speaks for the answer; in a "
        "longer answer the NLI model reads one step or section as contradicting another (on DEV every "
        "right answer of several sentences the rule alone flagged was of this kind)",
    ),
    VerdictRule(
        "unbacked",
        lambda s: s.support_floor is not None and s.backing is not None and s.backing < s.support_floor,
        "an answer to a question none of whose claims one window supports at `diagnosis.support_floor`",
        "the generated answers' score weighs relevance and confidence, which can pass an answer "
        "nothing read supports",
    ),
)


def unsupported_by(support: Support) -> tuple[UnsupportedBy, ...]:
    """Every verdict rule that applies, in order; () when the answer is supported."""
    return tuple(rule.name for rule in VERDICT_RULES if rule.applies(support))


def verdict_sure(p_unsupported: float, replace_at: float | None, applied: Sequence[UnsupportedBy]) -> bool:
    """Whether the verdict's flag is sure enough to replace an answer: its P(unsupported) reaches
    `replace_at` (diagnosis.replace_threshold; None: every flag is), or a sure verdict rule applied."""
    if replace_at is None or p_unsupported >= replace_at:
        return True
    return any(rule.sure for rule in VERDICT_RULES if rule.name in applied)


# -- the failure type ---------------------------------------------------------------------------


def rule_only(s: DecisionSignals) -> DecisionSignals:
    """The signals D2R-RAG's Algorithm 1 reads (with the off-question check): no verdict, no check
    of a pick, no conflict. What `RULES` then decides is the rule's own failure type."""
    return replace(s, unsupported=None, comparison=None, alternatives=None, conflict=False)


@dataclass(frozen=True)
class FailureRule(Rule[DecisionSignals, RuleName]):
    """A rule of the failure table, with the failure type it decides when it is the first."""

    decides: FailureType = field(kw_only=True)
    # A miss rather than a wrong claim: uncertain whatever the verdict, so the answer stays unless
    # a repair finds one the check supports (no abstention replaces it).
    keeps: bool = field(default=False, kw_only=True)


def _verdict(s: DecisionSignals) -> bool:
    return s.unsupported is not None


def _agreeing_pick(s: DecisionSignals) -> bool:
    return s.comparison == "agrees" and s.off_question is None and s.only_the_pick and not s.conflict


def _label_mismatch(s: DecisionSignals) -> bool:
    decided_by_evidence = s.e_q != "neutral" and s.e_r == "entail"
    return s.label_matches is False and decided_by_evidence and s.unsupported is not False


RULES: tuple[FailureRule, ...] = (
    FailureRule(
        "graph_conflict",
        lambda s: s.kappa == "conflict",
        "kappa is `conflict`: a triple of the answer clashes with the corpus graph",
        "Algorithm 1: the graph reads outside the retrieved passages, so no text score outweighs it",
        decides="WP",
    ),
    FailureRule(
        "comparison_disagrees",
        lambda s: s.comparison == "disagrees",
        "the passages' dates pick the other alternative of a comparison in time",
        "the NLI model does not compare dates; the dates themselves decide",
        decides="WR",
        sure=True,
    ),
    FailureRule(
        "alternatives_disagree",
        lambda s: s.alternatives == "disagrees",
        "the evidence supports the other alternative of a choice, and not the pick",
        "a pick the passages give to the other alternative is wrong however well its words match",
        decides="WR",
        sure=True,
    ),
    FailureRule(
        "comparison_agrees",
        _agreeing_pick,
        "the dates agree with an answer that is its pick alone and addresses the question, "
        "and the evidence holds no conflict",
        "the comparison is the whole answer and it is what the passages say",
        decides="NoFailure",
    ),
    FailureRule(
        "missed_answer",
        lambda s: _verdict(s) and s.abstained and s.answerable,
        "the answer abstains while the evidence answers the question",
        "the passages hold what the generator did not give: a miss a repair may mend, which the "
        "user must not read as sources that do not answer",
        decides="WR",
        keeps=True,
    ),
    FailureRule(
        "abstained",
        lambda s: _verdict(s) and s.abstained,
        "the answer abstains (no claim), and the evidence does not answer the question",
        "an abstention asserts nothing; the evidence was not enough for the generator",
        decides="IE",
        sure=True,
    ),
    FailureRule(
        "unanswered",
        lambda s: _verdict(s) and not s.answerable and (bool(s.unsupported) or not s.grounded),
        "the evidence does not answer the question and the answer is unsupported or ungrounded",
        "nothing read supports it; a supported answer is better evidence than answerability. Not "
        "sure of itself: answerability misreads questions unlike its DEV fit (MS MARCO's), so the "
        "verdict's sureness decides whether the abstention replaces the answer",
        decides="IE",
    ),
    FailureRule(
        "insufficient_evidence",
        lambda s: not _verdict(s) and s.e_q == "neutral",
        "no verdict, and e_q is neutral",
        "Algorithm 1: the evidence does not decide the question",
        decides="IE",
    ),
    FailureRule(
        "off_question",
        lambda s: s.off_question is not None,
        "the answer does not address what was asked (the diagnosis's `off_question`)",
        "a passage may well entail what an answer about something else says",
        decides="WR",
    ),
    FailureRule(
        "evidence_conflict",
        lambda s: s.conflict,
        "the answer takes one side where the evidence holds incompatible answers",
        "an answer the sources contradict is not reported as supported",
        decides="WR",
    ),
    FailureRule(
        "supported",
        lambda s: s.unsupported is False,
        "the verdict finds the answer supported",
        "the calibrated verdict replaces Algorithm 1's reading of e_r",
        decides="NoFailure",
    ),
    FailureRule(
        "label_mismatch",
        _label_mismatch,
        "claim mode: the evidence decides the claim, the response supports it, its label says otherwise",
        "Algorithm 1: LabelCompatible(y, e_q) fails",
        decides="LEM",
    ),
    FailureRule(
        "unsupported",
        lambda s: bool(s.unsupported) or (not _verdict(s) and s.e_r != "entail"),
        "the verdict finds the answer unsupported (no verdict: e_r is not entail)",
        "the evidence answers the question, so the answer is what fails",
        decides="WR",
    ),
    FailureRule(
        "no_failure",
        lambda s: True,
        "no rule above applies",
        "",
        decides="NoFailure",
    ),
)

RULE_NAMES: tuple[RuleName, ...] = tuple(r.name for r in RULES)


@dataclass(frozen=True, kw_only=True)
class Decision:
    failure: FailureType
    decided_by: RuleName
    applied: tuple[FailureStep, ...]  # every rule that applies, in order; the first decided
    rule_failure: FailureType  # what Algorithm 1 with the off-question check alone decides
    grade: Grade | None  # how sure the failure is; None: no failure


def _first(s: DecisionSignals, rules: tuple[FailureRule, ...]) -> FailureRule:
    return next(rule for rule in rules if rule.applies(s))


def decide(s: DecisionSignals, rules: tuple[FailureRule, ...] = RULES) -> Decision:
    """The failure type: the first of `rules` that applies (`rules`: the table, or the table less
    some rule, as the rule study measures it)."""
    applied = tuple(FailureStep(rule.name, rule.decides) for rule in rules if rule.applies(s))
    first = _first(s, rules)
    return Decision(
        failure=first.decides,
        decided_by=first.name,
        applied=applied,
        rule_failure=_first(rule_only(s), rules).decides,
        grade=_grade(first, s),
    )


def _grade(rule: FailureRule, s: DecisionSignals) -> Grade | None:
    """Uncertain where the deciding rule keeps the answer; else confident where that rule is sure,
    where the verdict is (`DecisionSignals.sure`), or without a verdict (Algorithm 1 decides on
    discrete states); else uncertain."""
    if rule.decides == "NoFailure":
        return None
    if rule.keeps:
        return "uncertain"
    return "confident" if rule.sure or s.unsupported is None or s.sure else "uncertain"


def gated_label(mode: Mode, failure: FailureType, label: str | None) -> str | None:
    """Claim mode: IE and LEM abstain ("Unverified", NOT ENOUGH INFO) instead of guessing."""
    if mode == "claim" and failure in ("IE", "LEM"):
        return ABSTAIN_LABEL
    return label


# LabelCompatible(y, e_q) for claim verification: the label must say what the evidence says.
_COMPATIBLE: dict[str, NLIState] = {
    "SUPPORTS": "entail",
    "REFUTES": "contradict",
    "NOT ENOUGH INFO": "neutral",
}


def label_matches(label: str | None, e_q: NLIState) -> bool | None:
    """Whether a claim's label says what the evidence says (None: no label, or one of no task)."""
    if label is None or (expected := _COMPATIBLE.get(label.upper())) is None:
        return None
    return expected == e_q


# -- the docs -----------------------------------------------------------------------------------

DocPart = Literal["verdict", "failure"]


def markdown() -> str:
    """docs/diagnosis.md's tables of the two rule sets, as the code holds them."""
    lines = [
        "An answer is **unsupported** when any of these applies (`diagnosis.verdict.unsupported_by`",
        "lists each that did):",
        "",
        "| rule | applies when | sure | why |",
        "|---|---|---|---|",
        *(f"| `{r.name}` | {r.when} | {_yes(r.sure)} | {r.why} |" for r in VERDICT_RULES),
        "",
        "The **failure type** is what the first of these rules that applies decides",
        "(`diagnosis.decided_by`; `diagnosis.failure_steps` lists every rule that applied, in order):",
        "",
        "| # | rule | applies when | decides | sure | why |",
        "|---|---|---|---|---|---|",
        *(
            f"| {n} | `{r.name}` | {r.when} | {r.decides} | {_sureness(r)} | {r.why} |"
            for n, r in enumerate(RULES, start=1)
        ),
        "",
        "A failure a **sure** rule decides is confident: it replaces the answer. Any other is",
        "confident where the verdict is sure (P(unsupported) at `diagnosis.replace_threshold`, or a",
        "sure verdict rule applied) or without a verdict, and else uncertain: the answer stays, its",
        "unsupported sentences marked (`diagnosis.grade`). A failure a rule that keeps the answer",
        "decides is uncertain whatever the verdict: a repair may replace the answer only with one the",
        "check supports.",
    ]
    return "\n".join(lines) + "\n"


def _sureness(rule: FailureRule) -> str:
    return "never: kept" if rule.keeps else _yes(rule.sure)


def _yes(sure: bool) -> str:
    return "yes" if sure else ""
