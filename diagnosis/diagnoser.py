"""diagnose(q, E, r) -> Diagnosis: the diagnosis's procedure, top-down.

One answer, in this order (each step a function below, or in the module named):

  language       English, or the reason the answer is not judged                     language.py
  claims         the response as atomic claims, and the question as a statement      _hypotheses
  premises       passages, their windows, a claim's joint premise                    premises.py
  NLI            every premise-hypothesis pair in ONE batched call                   _judge
  checks         another edition, a role of another, a window naming nothing        adjust.py
  aggregate      per hypothesis, then per signal: e_q and e_r                        aggregate.py
  graph          kappa from the answer's triples, cross-checked by the passages      kg_crosscheck.py
  EGC            the evidence graph, and the question's similarity to each passage   egc.py
  answerability  whether the evidence answers the question, whatever the answer      _answerability
  off question   another subject, relation or kind of answer than the one asked      off_question.unaddressed
  verdict        P(unsupported) over every signal, and its overrules                 verdict.py
  picks          a comparison in time; the other alternative of a choice             comparison.py
  failure        decided once, from one record of signals                            decision.py
  stage          where the pipeline most likely failed (RAGEC)                       stage.py

The rules (names, years, sentence splitting) and the NLI model read English: a question or an
answer that reads as another language is not judged (language.py), and the diagnosis says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ragmend.diagnosis.adjust import Checks, PremiseFacts, adjusted, claim_facts
from ragmend.diagnosis.aggregate import hypothesis_state, signal_state
from ragmend.diagnosis.alternatives import (
    Swap,
    check_alternatives,
    choice_statement,
    swap_alternative,
    without_echo,
)
from ragmend.diagnosis.answer_spans import unsupported_spans
from ragmend.diagnosis.answerability import answerability_features
from ragmend.diagnosis.comparison import TitleLookup, check_comparison, only_the_pick
from ragmend.diagnosis.compound import atomic_claims, decompose
from ragmend.diagnosis.conflict import conflict_on_claims
from ragmend.diagnosis.decision import (
    Support,
    decide,
    gated_label,
    label_matches,
    unsupported_by,
    verdict_sure,
)
from ragmend.diagnosis.egc import egc_features
from ragmend.diagnosis.hypotheses import (
    is_abstention,
    negate,
    parse_claim_label,
    sentence_count,
    split_claims,
)
from ragmend.diagnosis.kg_crosscheck import crosscheck
from ragmend.diagnosis.language import LANGUAGE_NAMES, check_language
from ragmend.diagnosis.off_question import asks_question, is_instruction, unaddressed
from ragmend.diagnosis.options import DiagnosisOptions, shipped_options
from ragmend.diagnosis.polar import denial, polar_reading
from ragmend.diagnosis.premises import (
    JOINT,
    EvidencePassage,
    Premises,
    build_premises,
    joint_may_support,
    premise_text,
)
from ragmend.diagnosis.spans import best_passage_coverage, is_bare
from ragmend.diagnosis.stage import StageEvidence, attribute_stage
from ragmend.diagnosis.statement import question_statement
from ragmend.diagnosis.types import (
    ABSTAINED,
    DecisionSignals,
    Diagnosis,
    EGCFeatures,
    HypothesisVerdict,
    KGSignal,
    Mode,
    NLISignal,
    NLIState,
    PassageScores,
    Thresholds,
    Verdict,
)
from ragmend.diagnosis.verdict import (
    VerdictModel,
    answer_features,
    claim_features,
    claim_text_features,
    grounded,
    text_features,
)


class NLIModel(Protocol):
    def predict(self, pairs: list[tuple[str, str]]) -> Any: ...  # -> NLIBatch (probs, truncated)


class Reranker(Protocol):
    def score(self, query: str, passages: list[str]) -> list[float]: ...


Embed = Callable[[list[str]], np.ndarray]  # normalised rows
# The vectors the index already holds for these passage ids, in order; None when it lacks one.
StoredVectors = Callable[[list[str]], np.ndarray | None]
AlignKG = Callable[[str], KGSignal]  # response text -> kappa with its matched triples


def response_claims(query: str, response: str, max_claims: int, bare: bool | None = None) -> list[str]:
    """The claims a response to a question is judged by: its sentences, none for an abstention.
    `bare`: whether it is a bare answer span (None: spans.is_bare)."""
    if polar := polar_reading(query, response):
        return list(polar.judged[:max_claims])  # what its "Yes" asserts, or a "No"'s denial of it
    claims = [] if is_abstention(response) else split_claims(response, max_claims, keep=query)
    if bare is None:
        bare = is_bare(response)
    if claims and bare:
        # A bare answer span ("23", "Paris") asserts nothing on its own: it is judged as the
        # question's statement with the span in its slot (of a choice question, the span with
        # what is asked of it).
        claims = [choice_statement(query, response) or question_statement(query, response)]
    # A compound claim ("both A and B are in Michigan") is checked as its atomic claims, each
    # against single passages: two passages read together cannot support it.
    return atomic_claims(claims, max_claims)


def case_text_features(
    query: str, passages: Sequence[EvidencePassage], response: str, claims: Sequence[str]
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """The verdict's features that are functions of the texts alone, as `diagnose` computes them,
    for the answer and for each of its claims: what examples and benchmark rows recorded before
    such a feature are given from their cases."""
    evidence = [premise_text(p) for p in passages]
    return text_features(query, response, evidence), [
        claim_text_features(c, evidence, query, response) for c in claims
    ]


@dataclass(frozen=True, kw_only=True)
class Hypotheses:
    """What one answer is judged by: the query's hypotheses (e_q), the response's claims (e_r),
    and, for a choice answered in one claim, the same claim naming the other alternative."""

    construction: str  # how the query hypothesis was built: statement | question | rerank | claim
    nli_reads_query: bool  # False: e_q is answerability from the start (rerank)
    query: list[str]  # the query's hypotheses NLI reads (none where it does not)
    claims: list[str]
    label: str | None  # claim mode: the label the response gives
    reason: str  # claim mode: the response's reasons (what the graph reads)
    swap: Swap | None
    contrast: str | None
    # A bare "No" to a yes/no question: `query` and `claims` are what its "Yes" would assert, and
    # each is judged by its denial (polar.py).
    denied: bool = False

    @property
    def all(self) -> list[str]:
        return self.query + self.claims + ([self.contrast] if self.contrast else [])


def _decisive(s: PassageScores) -> float:
    return max(s.entail, s.contradict)


@dataclass(frozen=True, kw_only=True, eq=False)
class EvidenceReading:
    """What the diagnosis reads of a question and its passages alone, before any answer exists:
    each passage's cross-encoder relevance and whether the evidence answers the question. Taken
    first where the router chooses on it, then handed to `diagnose` so nothing is read twice."""

    query: str
    passage_ids: tuple[str, ...]
    relevance: np.ndarray | None
    rerank_s: float
    answerability: NLISignal

    @property
    def p_answerable(self) -> float:
        """The answerability model's P(answerable) (or the construction's graded support)."""
        return float(self.answerability.support or 0.0)

    def fits(self, query: str, passages: Sequence[EvidencePassage]) -> bool:
        return query == self.query and tuple(p.id for p in passages) == self.passage_ids


class Diagnoser:
    def __init__(
        self,
        nli: NLIModel,
        embed: Embed,
        options: DiagnosisOptions | None = None,
        reranker: Reranker | None = None,
        align_kg: AlignKG | None = None,
        stored_vectors: StoredVectors | None = None,
        titled: TitleLookup | None = None,
    ):
        """`options`: None, the shipped defaults (diagnosis/options.py)."""
        self.nli = nli
        self.embed = embed
        # Retrieved passages were embedded when they were indexed (with the same model): EGC and
        # the query similarities read those vectors instead of encoding the passages again, the
        # costliest step of a diagnosis on CPU. Given passages (not from the index) are embedded.
        self.stored_vectors = stored_vectors
        # The corpus's pages by title: a comparison whose alternative the retrieval missed is
        # dated from that alternative's own page (comparison.py).
        self.titled = titled
        self.options = options = options or shipped_options()
        self.reranker = reranker
        self.align_kg = align_kg
        if options.query_hypothesis == "rerank" and reranker is None:
            raise ValueError("query_hypothesis 'rerank' needs the reranker")
        self._checks = Checks(
            options.contradiction_needs_name,
            options.other_edition_is_neutral,
            options.role_of_another_refutes,
        )
        # The cross-encoder's relevance depends on the question and the passages alone: it runs
        # beside the NLI pass instead of after it (one thread, owned here; on 2 cores the two
        # models' runs interleave).
        self._beside = ThreadPoolExecutor(1, thread_name_prefix="ragmend-relevance")

    def read_evidence(
        self, query: str, passages: Sequence[EvidencePassage], reranked: bool = False
    ) -> EvidenceReading:
        """The question's evidence read before any answer: relevance, then answerability."""
        relevance, rerank_s = self._timed_relevance(query, passages, reranked)
        evidence = list(self._premises(passages).evidence)
        qv = self.embed([query])[0]
        q_sims = self._evidence_vectors(passages, evidence, len(qv)) @ qv if passages else np.zeros(0)
        answerability = self._answerability(
            query, passages, evidence=evidence, relevance=relevance, q_sims=q_sims
        )
        return EvidenceReading(
            query=query,
            passage_ids=tuple(p.id for p in passages),
            relevance=relevance,
            rerank_s=rerank_s,
            answerability=answerability,
        )

    def _premises(self, passages: Sequence[EvidencePassage]) -> Premises:
        o = self.options
        return build_premises(
            passages,
            o.window_sentences,
            premise_words=o.premise_words,
            joint_premise=o.joint_premise,
            window_top=o.window_top,
        )

    def diagnose(
        self,
        query: str,
        passages: Sequence[EvidencePassage],
        response: str,
        mode: Mode = "qa",
        reranked: bool = False,
        token_logprobs: Sequence[float] | None = None,
        reading: EvidenceReading | None = None,
    ) -> Diagnosis:
        """`token_logprobs`: the generator's log-probability of each answer token, where its
        engine reports them (a verdict feature: how sure the generator was); `reading`: the
        evidence read already (`read_evidence`), used where it read this question's passages."""
        o, t = self.options, self.options.thresholds
        timings: dict[str, float] = {}
        t_start = time.perf_counter()
        qa = mode == "qa"
        with_verdict = o.verdict is not None and qa
        language, not_english = _language(query, response, mode)
        if not_english is not None:
            return _not_judged(mode, language, not_english, time.perf_counter() - t_start)

        # -- claims, premises, and the relevance started beside the NLI pass ------------------
        hyp = self._hypotheses(query, response, mode)
        relevance_job: Future[tuple[np.ndarray | None, float]] | None = None
        if reading is not None and not reading.fits(query, passages):
            reading = None
        if (not hyp.nli_reads_query or with_verdict) and reading is None:
            relevance_job = self._beside.submit(self._timed_relevance, query, passages, reranked)
        premises = self._premises(passages)
        evidence = list(premises.evidence)

        # -- NLI with its checks, aggregated per hypothesis -----------------------------------
        t0 = time.perf_counter()
        verdicts = self._judge(hyp, premises, t)
        timings["nli_s"] = time.perf_counter() - t0
        contrast_verdict = verdicts.pop() if hyp.contrast else None
        q_verdicts, claim_verdicts = verdicts[: len(hyp.query)], verdicts[len(hyp.query) :]
        # The evidence conflicts on what a "No" denies as on what a "Yes" asserts.
        stated_verdicts = claim_verdicts
        if hyp.denied:
            q_verdicts = [denial(q_verdicts, t)] if q_verdicts else []
            claim_verdicts = [denial(claim_verdicts, t)]

        # -- e_q and e_r ----------------------------------------------------------------------
        e_q = (
            NLISignal(signal_state(q_verdicts), tuple(q_verdicts), hyp.construction)
            if hyp.nli_reads_query
            else None
        )
        e_r = _response_signal(mode, response, hyp=hyp, claim_verdicts=claim_verdicts, e_q=e_q)

        # -- knowledge graph ------------------------------------------------------------------
        t0 = time.perf_counter()
        kg = self._graph(mode, response, hyp=hyp, claim_verdicts=claim_verdicts, t=t)
        timings["kg_s"] = time.perf_counter() - t0

        # -- EGC, and the question's similarity to each passage --------------------------------
        t0 = time.perf_counter()
        # Two calls: a batch is padded to its longest text, and a passage can be ten times a claim.
        short = self.embed([query, *hyp.claims])
        qv, cv = short[0], short[1:]
        ev = self._evidence_vectors(passages, evidence, len(qv))
        egc = egc_features(qv, ev, cv, t.egc_tau)
        q_sims = ev @ qv if len(passages) else np.zeros(0)
        timings["egc_s"] = time.perf_counter() - t0

        # -- answerability: e_q where NLI does not read the question ---------------------------
        relevance: np.ndarray | None = None
        if relevance_job is not None:
            # Its own duration: it overlapped the NLI pass, so the stages add up to more than total.
            relevance, timings["rerank_s"] = relevance_job.result()
        elif reading is not None:
            relevance = reading.relevance  # its seconds were spent before the answer
        if e_q is None:
            e_q = self._answerability(query, passages, evidence=evidence, relevance=relevance, q_sims=q_sims)
        # Algorithm 1 reads e_q as it stands here: the statement built from the answer, or
        # answerability where no statement is read.
        rule_e_q = e_q.state

        # -- does the answer address the question ----------------------------------------------
        off_question = unaddressed(query, response) if qa else None

        # -- the calibrated verdict -----------------------------------------------------------
        verdict: Verdict | None = None
        if with_verdict:
            assert o.verdict is not None
            t0 = time.perf_counter()
            e_r, verdict = self._verdict(
                o.verdict,
                query,
                response=response,
                evidence=evidence,
                e_q=e_q,
                e_r=e_r,
                egc=egc.score,
                q_sims=q_sims,
                relevance=relevance,
                token_logprobs=token_logprobs,
            )
            # e_q becomes answerability: does the evidence answer the QUESTION, whatever the
            # response says. The statement built from the response stays a verdict feature
            # (statement_entail); it cannot be e_q, since an answer about someone else makes a
            # statement that some passage entails.
            if hyp.nli_reads_query:  # else e_q is answerability already
                e_q = self._answerability(
                    query, passages, evidence=evidence, relevance=relevance, q_sims=q_sims
                )
            # Recorded with the verdict's features, so rows scored offline decide IE the same way.
            answerable = {"p_answerable": e_q.support or 0.0, "answerable": float(e_q.state == "entail")}
            verdict = replace(verdict, features={**verdict.features, **answerable})
            timings["verdict_s"] = time.perf_counter() - t0

        # -- the checks of an answer's pick ---------------------------------------------------
        # A comparison in time is checked hop by hop against the passages' dates (comparison.py).
        comparison = (
            check_comparison(query, response, [(p.title, p.text) for p in passages], self.titled)
            if qa
            else None
        )
        alternatives = None
        if hyp.swap is not None and contrast_verdict is not None:
            alternatives = check_alternatives(hyp.swap, claim_verdicts[0], contrast_verdict, t.entail)

        # -- incompatible answers in the evidence ----------------------------------------------
        conflict = (
            conflict_on_claims(
                stated_verdicts,
                [(p.id, p.text) for p in passages],
                threshold=o.conflict_threshold,
                nli=self._nli_scores,
                relevance=None if relevance is None else relevance_by_id(passages, relevance),
                trust={p.id: p.trust for p in passages if p.trust is not None},
            )
            if qa
            else None
        )

        # -- the failure type, decided once ---------------------------------------------------
        features = verdict.features if verdict else {}
        signals = DecisionSignals(
            kappa=kg.kappa,
            e_q=rule_e_q,
            e_r=e_r.state,
            label_matches=label_matches(hyp.label, rule_e_q),
            off_question=off_question,
            unsupported=verdict.unsupported if verdict else None,
            sure=verdict.sure if verdict else True,
            abstained=features.get("abstained", 0.0) > 0,
            grounded=grounded(features),
            answerable=e_q.state == "entail",
            comparison=comparison.outcome if comparison else None,
            alternatives=alternatives.outcome if alternatives else None,
            only_the_pick=only_the_pick(query, hyp.claims),
            conflict=conflict is not None,
        )
        decision = decide(signals)
        if verdict is not None:
            verdict = replace(verdict, rule_failure=decision.rule_failure)
        failure = decision.failure

        # -- stage ----------------------------------------------------------------------------
        doc_ids = [p.doc_id for p in passages]
        truncated = any(s.truncated for v in verdicts for s in v.scores if s.passage != JOINT)
        stage, reason_line = attribute_stage(
            StageEvidence(
                failure=failure,
                e_q=e_q.state,
                reranked=reranked,
                on_topic=bool((q_sims >= t.egc_tau).any()),
                best_query_similarity=float(q_sims.max()) if len(q_sims) else 0.0,
                cut_evidence=truncated or len(set(doc_ids)) < len(doc_ids),
            )
        )
        timings["total_s"] = time.perf_counter() - t_start
        return Diagnosis(
            mode=mode,
            e_q=e_q,
            e_r=e_r,
            kg=kg,
            failure=failure,
            egc=egc,
            evidence_conflict=conflict is not None,
            stage=stage,
            stage_reason=reason_line,
            label=hyp.label,
            final_label=gated_label(mode, failure, hyp.label),
            timings={k: round(v, 4) for k, v in timings.items()},
            verdict=verdict,
            off_question=off_question,
            comparison=comparison,
            alternatives=alternatives,
            failure_steps=decision.applied,
            decided_by=decision.decided_by,
            grade=decision.grade,
            signals=signals,
            language=language,
            unsupported_spans=unsupported_spans(response, e_r.hypotheses, failure != "NoFailure", verdict),
            conflict=conflict,
        )

    # -- the steps ------------------------------------------------------------------------------

    def _hypotheses(self, query: str, response: str, mode: Mode) -> Hypotheses:
        """What the answer claims, and the query's hypotheses. Claim mode: the response is a
        label and its reasons, and e_q judges the claim itself."""
        o = self.options
        if mode == "claim":
            label, reason = parse_claim_label(response)
            claims = split_claims(reason, o.max_claims) if reason else []
            return Hypotheses(
                construction="claim",
                nli_reads_query=True,
                query=[query],
                claims=claims,
                label=label,
                reason=reason,
                swap=None,
                contrast=None,
            )
        # A choice answer's echo of the other alternative is no claim.
        said = without_echo(query, response)
        construction = o.query_hypothesis
        polar = polar_reading(query, said)
        # A bare yes or no: NLI reads what its "Yes" asserts; a "No" is judged as their denial.
        claims = list(polar.claims) if polar else response_claims(query, said, o.max_claims)
        nli_reads_query = construction != "rerank"
        if not nli_reads_query:
            query_hyps = []
        elif construction == "statement":
            # A bare yes or no asserts the question's own statement, its claims.
            query_hyps = list(claims) if polar else decompose(question_statement(query, said))
        else:
            query_hyps = [query]
        # A choice of attribute answered in one claim: the same claim naming the other
        # alternative is scored too, against single windows (alternatives.py). It is read as the
        # answer was: a bare span stays a span.
        swap = swap_alternative(query, said) if len(claims) == 1 else None
        other = response_claims(query, swap.other_response, o.max_claims, is_bare(response)) if swap else []
        contrast = other[0] if len(other) == 1 else None
        return Hypotheses(
            construction=construction,
            nli_reads_query=nli_reads_query,
            query=query_hyps,
            claims=claims,
            label=None,
            reason="",
            swap=swap,
            contrast=contrast,
            denied=polar is not None and polar.denied,
        )

    def _nli_scores(self, pairs: list[tuple[str, str]]) -> list[list[float]]:
        """(P(entail), P(neutral), P(contradict)) of each (premise, hypothesis) pair, in one batch."""
        rows: list[list[float]] = self.nli.predict(pairs).probs.tolist()
        return rows

    def _judge(self, hyp: Hypotheses, premises: Premises, t: Thresholds) -> list[HypothesisVerdict]:
        """Every hypothesis against its premises in ONE batched NLI call, each score adjusted by
        the checks (adjust.py), each passage scored by its most decisive window, and a joint
        premise kept only where no single passage contradicts the hypothesis."""
        hypotheses = hyp.all
        contrast_at = len(hypotheses) - 1 if hyp.contrast else -1
        # Each hypothesis meets its windows and, where no single passage holds its words, its own
        # joint premise; the contrast is read against single windows only, as the claim it is set
        # against.
        items = list(premises.items)
        joined: dict[int, tuple[str, ...]] = {}  # a joint premise's item: the passages it joins
        chosen: list[list[int]] = []
        for at, h in enumerate(hypotheses):
            idx = premises.for_hypothesis(h)
            if at != contrast_at and (joint := premises.joint_for(h)) is not None:
                joined[len(items)] = joint.joined
                items.append((JOINT, joint.text))
                idx = [*idx, len(items) - 1]
            chosen.append(idx)
        pairs = [(items[i][1], h) for h, idx in zip(hypotheses, chosen, strict=True) for i in idx]
        # A one-sentence answer is often its own question statement: each distinct pair once.
        slot = {pair: n for n, pair in enumerate(dict.fromkeys(pairs))}
        batch = self.nli.predict(list(slot)) if pairs else None
        facts = PremiseFacts(items)
        passage_ids = premises.passage_ids
        verdicts: list[HypothesisVerdict] = []
        row = 0
        for h, idx in zip(hypotheses, chosen, strict=True):
            claim = claim_facts(h, self._checks)
            best: dict[str, PassageScores] = {}
            for i in idx:
                assert batch is not None  # a premise and a hypothesis made a pair
                pid = items[i][0]
                k = slot[pairs[row]]
                row += 1
                p = batch.probs[k]
                e, n, c = adjusted((float(p[0]), float(p[1]), float(p[2])), claim, i, facts)
                s = PassageScores(
                    passage=pid,
                    entail=round(e, 4),
                    neutral=round(n, 4),
                    contradict=round(c, 4),
                    truncated=batch.truncated[k],
                    joined=joined.get(i, ()),
                )
                if pid not in best or _decisive(s) > _decisive(best[pid]):
                    best[pid] = s  # a passage's windows: the one that says most, either way
            scores = [best[pid] for pid in passage_ids if pid in best]
            if JOINT in best and not joint_may_support(scores, t):
                scores = [s for s in scores if s.passage != JOINT]
            verdicts.append(hypothesis_state(h, scores, t))
        return verdicts

    def _graph(
        self,
        mode: Mode,
        response: str,
        hyp: Hypotheses,
        claim_verdicts: Sequence[HypothesisVerdict],
        t: Thresholds,
    ) -> KGSignal:
        """kappa of the answer's triples against the corpus graph; a conflict that its own
        passage entails is none (kg_crosscheck.py)."""
        text = hyp.reason if mode == "claim" and hyp.claims else response
        kg = self.align_kg(text) if self.align_kg else None
        kg = kg or KGSignal("missing", (), available=False)
        return crosscheck(kg, claim_verdicts, t.entail)

    def _evidence_vectors(
        self, passages: Sequence[EvidencePassage], evidence: list[str], dim: int
    ) -> np.ndarray:
        if not evidence:
            return np.zeros((0, dim), dtype=np.float32)
        stored = self.stored_vectors([p.id for p in passages]) if self.stored_vectors else None
        if stored is not None and stored.shape == (len(evidence), dim):
            norms = np.linalg.norm(stored, axis=1, keepdims=True)
            return (stored / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return self.embed(evidence)

    def _verdict(
        self,
        model: VerdictModel,
        query: str,
        response: str,
        evidence: list[str],
        e_q: NLISignal,
        e_r: NLISignal,
        egc: float,
        q_sims: np.ndarray,
        relevance: np.ndarray | None,
        token_logprobs: Sequence[float] | None = None,
    ) -> tuple[NLISignal, Verdict]:
        """Each claim's P(unsupported), then the answer's, from every signal (diagnosis/verdict.py).
        Returns e_r with the claims' probabilities filled in, and the verdict."""
        claims = [claim_features(v, evidence, query, response) for v in e_r.hypotheses]
        p_claims = [model.claim.probability(x) for x in claims]
        features = answer_features(
            query,
            response,
            evidence=evidence,
            claims=claims,
            p_claims=p_claims,
            statement_support=e_q.support,
            egc=egc,
            q_sims=q_sims,
            relevance=relevance,
            token_logprobs=token_logprobs,
            question=asks_question(query),
        )
        p, fitted_threshold = model.score(features, claims)
        threshold = self.options.unsupported_threshold or fitted_threshold
        rounded = {k: round(v, 4) for k, v in features.items()}
        scored = tuple(
            replace(v, p_unsupported=round(p_c, 4)) for v, p_c in zip(e_r.hypotheses, p_claims, strict=True)
        )
        o = self.options
        why = unsupported_by(
            Support.of(
                p,
                threshold,
                features,
                refute_at=o.refute_threshold,
                support_floor=o.support_floor,
                sentences=sentence_count(response),
            )
        )
        sure = verdict_sure(p, o.replace_threshold, why)
        profile = model.profile_for(features)
        verdict = Verdict(
            p_unsupported=round(p, 4),
            threshold=threshold,
            unsupported=bool(why),
            rule_failure="NoFailure",
            features=rounded,
            profile=profile,
            unsupported_by=why,
            sure=sure,
        )
        return replace(e_r, hypotheses=scored), verdict

    def _timed_relevance(
        self, query: str, passages: Sequence[EvidencePassage], reranked: bool
    ) -> tuple[np.ndarray | None, float]:
        t0 = time.perf_counter()
        relevance = self._relevance(query, passages, reranked)
        return relevance, time.perf_counter() - t0

    def _relevance(
        self, query: str, passages: Sequence[EvidencePassage], reranked: bool
    ) -> np.ndarray | None:
        """Each passage's cross-encoder relevance to the question (None without a reranker): the
        scores the reranker already gave where it chose the passages, else one call."""
        if reranked and passages and all(p.retriever == "rerank" for p in passages):
            return relevance_of([p.score for p in passages])
        if self.reranker is None or not passages:
            return None
        return relevance_of(self.reranker.score(query, [premise_text(p) for p in passages]))

    def _answerability(
        self,
        query: str,
        passages: Sequence[EvidencePassage],
        evidence: Sequence[str],
        relevance: np.ndarray | None,
        q_sims: np.ndarray,
    ) -> NLISignal:
        """Whether the evidence answers the question, independently of any response: with the
        answerability model, entail when its P(answerable) reaches its threshold (construction
        "answerability", support = that probability); else entail when the best passage's
        cross-encoder relevance reaches thresholds.relevance ("rerank"); without a reranker, when
        one passage names answerable_coverage of the question's names and numbers ("coverage"; a
        question naming nothing counts as covered). Else neutral: the evidence is insufficient
        (IE). A task over text the request gives ("Summarize the following news.") asks no
        question of the evidence: the text it gives is what it works on, so it is answered by
        construction ("given_text", P(answerable) 1), and what is judged is the answer's support."""
        if not passages:
            return NLISignal(
                "neutral",
                (HypothesisVerdict(hypothesis=query, state="neutral", best_passage=None, scores=()),),
                "rerank",
            )
        if is_instruction(query):
            given = HypothesisVerdict(hypothesis=query, state="entail", best_passage=None, scores=())
            return NLISignal("entail", (given,), "given_text", 1.0)
        model, p_answerable = self.options.answerability, None
        if relevance is not None and model is not None:
            features = answerability_features(
                query, [p.title for p in passages], evidence=evidence, relevance=relevance, q_sims=q_sims
            )
            p_answerable = model.probability(features)
            rel, construction, answers = relevance, "answerability", p_answerable >= model.threshold
        elif relevance is not None:
            rel, construction = relevance, "rerank"
            answers = rel.max() >= self.options.thresholds.relevance
        else:
            rel = np.array([best_passage_coverage(query, [e]) or 0.0 for e in evidence])
            if best_passage_coverage(query, evidence) is None:
                rel = np.ones(len(evidence))
            construction, answers = "coverage", rel.max() >= self.options.answerable_coverage
        scores = tuple(
            PassageScores(
                passage=p.id, entail=round(float(r), 4), neutral=round(float(1 - r), 4), contradict=0.0
            )
            for p, r in zip(passages, rel, strict=True)
        )
        state: NLIState = "entail" if answers else "neutral"
        best = passages[int(rel.argmax())].id if answers else None
        support = None if p_answerable is None else round(p_answerable, 4)  # None: from the scores
        return NLISignal(
            state,
            (HypothesisVerdict(hypothesis=query, state=state, best_passage=best, scores=scores),),
            construction,
            support,
        )


def relevance_by_id(passages: Sequence[EvidencePassage], relevance: np.ndarray) -> dict[str, float]:
    """Each passage's relevance (`relevance_of`'s probabilities) back as the cross-encoder's logit."""
    p = np.clip(np.asarray(relevance, dtype=np.float64), 1e-12, 1 - 1e-12)
    return {passage.id: float(x) for passage, x in zip(passages, np.log(p / (1 - p)), strict=True)}


def relevance_of(logits: Sequence[float]) -> np.ndarray:
    """The cross-encoder's logits as probabilities that a passage answers the question."""
    return 1 / (1 + np.exp(-np.asarray(logits, dtype=np.float64)))


def _label_signal(label: str | None, e_q: NLISignal) -> NLISignal:
    """Claim mode with a bare label: the response asserts the claim (SUPPORTS), its negation
    (REFUTES) or that it cannot be decided (NOT ENOUGH INFO); it is entailed when the evidence
    says the same thing."""
    asserted = {"SUPPORTS": "entail", "REFUTES": "contradict", "NOT ENOUGH INFO": "neutral"}.get(label or "")
    if asserted is None:
        return NLISignal("neutral", (), "label")
    # Agreeing with the evidence is support; disagreeing with decisive evidence is contradiction.
    decisive: NLIState = "contradict" if e_q.state != "neutral" else "neutral"
    state: NLIState = "entail" if e_q.state == asserted else decisive
    hyp = e_q.hypotheses[0].hypothesis if e_q.hypotheses else ""
    shown = negate(hyp) if label == "REFUTES" else hyp
    return NLISignal(
        state, (HypothesisVerdict(hypothesis=shown, state=state, best_passage=None, scores=()),), "label"
    )


def _response_signal(
    mode: Mode,
    response: str,
    hyp: Hypotheses,
    claim_verdicts: Sequence[HypothesisVerdict],
    e_q: NLISignal | None,
) -> NLISignal:
    """e_r: the claims' states aggregated; claim mode, what the label asserts against e_q, which
    its reasons fail only where the evidence contradicts one (`_labelled_reasons`); no claim, an
    abstention or an empty response."""
    if mode == "claim" and (not hyp.claims or hyp.label is not None):
        assert e_q is not None  # claim mode reads the claim itself by NLI
        label = _label_signal(hyp.label, e_q)
        return _labelled_reasons(label, claim_verdicts) if hyp.claims else label
    if not hyp.claims:
        return NLISignal("neutral", (), ABSTAINED if response.strip() else "empty")
    return NLISignal(signal_state(claim_verdicts), tuple(claim_verdicts), "claims")


def _labelled_reasons(label: NLISignal, reasons: Sequence[HypothesisVerdict]) -> NLISignal:
    """A verdict on a claim with its reasons: what the user asked is the label, so a label the
    evidence agrees with stands unless the evidence contradicts a reason. A reason the passages
    merely do not state (a restatement of the refutation, "..., not a gorilla", which NLI reads as
    neutral) does not fail a right label; a wrong label fails whatever its reasons say."""
    contradicted = signal_state(reasons) == "contradict"
    state: NLIState = "contradict" if label.state == "entail" and contradicted else label.state
    return NLISignal(state, (*label.hypotheses, *reasons), "label")


def _language(query: str, response: str, mode: Mode) -> tuple[str, str | None]:
    """The language the texts read as, and, where one is not English, why the answer is not
    judged (None: it is)."""
    names = ("claim", "response") if mode == "claim" else ("question", "answer")
    read = "und"
    for name, text in zip(names, (query, response), strict=True):
        check = check_language(text)
        if not check.english:
            language = LANGUAGE_NAMES.get(check.language, check.language)
            return check.language, (
                f"the {name} reads as {language} ({check.language}): the diagnosis judges English text only"
            )
        if check.language == "en":
            read = "en"
    return read, None


def _not_judged(mode: Mode, language: str, reason: str, seconds: float) -> Diagnosis:
    """The diagnosis of an answer it cannot read: no signal, no failure found, the reason."""
    nothing = NLISignal("neutral", (), "not_judged")
    return Diagnosis(
        mode=mode,
        e_q=nothing,
        e_r=nothing,
        kg=KGSignal("missing", (), available=False),
        failure="NoFailure",
        egc=EGCFeatures(
            coverage=0.0, support_density=0.0, agreement=0.0, connectivity=0.0, isolation=0.0, score=0.0
        ),
        evidence_conflict=False,
        stage="none",
        stage_reason=f"not judged: {reason}",
        timings={"total_s": round(seconds, 4)},
        language=language,
        not_judged=reason,
    )
