"""The diagnoser's options, built from the settings in one place.

The `diagnosis:` section of the settings (ragmend/settings.py) is the only source of defaults:
DiagnosisOptions and Thresholds have none of their own, so a diagnoser built here is the one
the server runs. A test about another value builds the shipped options and replaces that one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragmend.diagnosis.answerability import AnswerabilityModel, open_answerability
from ragmend.diagnosis.types import Thresholds
from ragmend.diagnosis.verdict import VerdictModel, open_verdict
from ragmend.settings import DiagnosisSettings, NLISettings, Settings


@dataclass(frozen=True, kw_only=True)
class DiagnosisOptions:
    """What one Diagnoser does; each field is the setting of the same name (docs/diagnosis.md)."""

    thresholds: Thresholds
    query_hypothesis: str  # statement | question | rerank (hypotheses.py)
    # One extra premise per hypothesis: the top passages concatenated, so a multi-hop answer whose
    # facts sit in two passages can still be entailed (premises.joint_may_support gates it).
    joint_premise: bool
    max_claims: int
    # > 0: each passage is judged as windows of this many sentences (overlapping by one).
    window_sentences: int
    # > 0: each hypothesis is scored against only this many windows, those sharing most words
    # with it (premises.select_premises); 0: against every window.
    window_top: int
    # > 0: a whole passage longer than this many words is read as consecutive windows of whole
    # sentences of at most this many words (the NLI model drops the tail of a longer premise).
    premise_words: int
    verdict: VerdictModel | None  # None: Algorithm 1's rule alone decides
    unsupported_threshold: float | None  # None: the verdict model's own operating point
    refute_threshold: float | None  # a claim contradicted at this fails the answer (decision.py "refuted")
    support_floor: float | None  # an answer nothing entails at this fails (decision.py "unbacked")
    replace_threshold: float | None  # a failure this sure replaces the answer (decision.py "grade")
    contradiction_needs_name: bool  # adjust.py
    other_edition_is_neutral: bool  # adjust.py
    role_of_another_refutes: bool  # adjust.py
    # Without a reranker: the evidence answers the question when one passage names this share of
    # the question's names and numbers.
    answerable_coverage: float
    answerability: AnswerabilityModel | None  # None: the best relevance against the threshold
    # One passage entails a claim and another contradicts it at this: the evidence is in conflict.
    conflict_threshold: float = 0.6


def options_from_settings(settings: Settings) -> DiagnosisOptions:
    """The options the server's diagnoser runs with, from the settings' `diagnosis` section (and
    the NLI model's input length, which bounds a whole-passage premise)."""
    return diagnosis_options(settings.diagnosis, settings.models.nli.max_length)


def diagnosis_options(d: DiagnosisSettings, nli_max_length: int) -> DiagnosisOptions:
    return DiagnosisOptions(
        thresholds=Thresholds(
            entail=d.entail_threshold,
            contradict=d.contradict_threshold,
            relevance=d.relevance_threshold,
            egc_tau=d.egc_tau,
            joint_entail=d.joint_entail_threshold,
        ),
        query_hypothesis=d.query_hypothesis,
        joint_premise=d.joint_premise,
        max_claims=d.max_claims,
        window_sentences=d.window_sentences,
        window_top=d.window_top,
        # Half the NLI model's tokens in words leaves a claim room beside the premise.
        premise_words=nli_max_length // 2 if d.premise_words is None else d.premise_words,
        verdict=open_verdict(d.verdict),
        unsupported_threshold=d.unsupported_threshold,
        refute_threshold=d.refute_threshold,
        conflict_threshold=d.conflict_threshold,
        support_floor=d.support_floor,
        replace_threshold=d.replace_threshold,
        contradiction_needs_name=d.contradiction_needs_name,
        other_edition_is_neutral=d.other_edition_is_neutral,
        role_of_another_refutes=d.role_of_another_refutes,
        answerable_coverage=d.answerable_coverage,
        answerability=open_answerability(d.answerability, d.answerable_threshold),
    )


def shipped_options() -> DiagnosisOptions:
    """The options of the default settings (no configuration file, no environment): what a
    server with no `diagnosis:` section runs."""
    return diagnosis_options(DiagnosisSettings(), NLISettings().max_length)
