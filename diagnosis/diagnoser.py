"""diagnose(q, E, r, y) -> Diagnosis: D2R-RAG Algorithm 1 with its signals, and what ragmend adds.

Every premise-hypothesis pair of one answer (the query's hypothesis and each response claim,
against every passage and the joint premise) goes through the NLI model in ONE batched call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ragmend.diagnosis.aggregate import hypothesis_state, mixed_evidence, signal_state
from ragmend.diagnosis.alternatives import (
    check_alternatives,
    choice_statement,
    swap_alternative,
    without_echo,
)
from ragmend.diagnosis.answerability import AnswerabilityModel, answerability_features
from ragmend.diagnosis.comparison import TitleLookup, check_comparison, only_the_pick, settle_checks
from ragmend.diagnosis.compound import atomic_claims, decompose
from ragmend.diagnosis.egc import egc_features
from ragmend.diagnosis.failure import StageEvidence, attribute_stage, failure_type, gated_label
from ragmend.diagnosis.hypotheses import (
    is_abstention,
    negate,
    parse_claim_label,
    question_statement,
    split_claims,
    split_sentences,
)
from ragmend.diagnosis.kg_crosscheck import crosscheck
from ragmend.diagnosis.spans import (
    anchored_passages,
    asks_question,
    best_passage_coverage,
    claimed_roles,
    content_words,
    credited_roles,
    editions,
    is_bare,
    key_spans,
    names_any,
    normalise,
    other_edition,
    role_of_another,
    span_coverage,
    unaddressed,
)
from ragmend.diagnosis.types import (
    Diagnosis,
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
    failure_of,
    text_features,
    unsupported_by,
)


class NLIModel(Protocol):
    def predict(self, pairs: list[tuple[str, str]]) -> Any: ...  # -> NLIBatch (probs, truncated)


class Reranker(Protocol):
    def score(self, query: str, passages: list[str]) -> list[float]: ...


class EvidencePassage(Protocol):
    """What diagnosis reads of a retrieved passage (rag.types.Passage has these).

    Read-only properties, so a frozen dataclass such as rag.types.Passage satisfies the protocol.
    """

    @property
    def id(self) -> str: ...

    @property
    def doc_id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def retriever(self) -> str: ...


Embed = Callable[[list[str]], np.ndarray]  # normalised rows
# The vectors the index already holds for these passage ids, in order; None when it lacks one.
StoredVectors = Callable[[list[str]], np.ndarray | None]
AlignKG = Callable[[str], KGSignal]  # response text -> kappa with its matched triples


@dataclass(frozen=True)
class DiagnosisOptions:
    thresholds: Thresholds = field(default_factory=Thresholds)
    query_hypothesis: str = "statement"  # statement | question | rerank (hypotheses.py)
    # One extra premise per hypothesis: the top passages concatenated, so a multi-hop answer whose
    # facts sit in two passages can still be entailed (the NLI model truncates its tail).
    joint_premise: bool = True
    joint_passages: int = 2
    max_claims: int = 8
    # > 0: each passage is judged as windows of this many sentences (overlapping by one), the
    # passage's score being its most decisive window's (SummaC-style): a hypothesis is then
    # supported by what one window says, not by the length of a paragraph. 0: whole passages.
    window_sentences: int = 0
    # > 0: each hypothesis is scored against only this many windows, those sharing most words
    # with it (select_premises); 0: against every window. Bounds the cost on long sources.
    window_top: int = 0
    # > 0: a whole passage longer than this many words is read as consecutive windows of whole
    # sentences of at most this many words (overlapping by one sentence), its score being its most
    # decisive window's, as with window_sentences. The NLI model reads a fixed number of tokens and
    # drops the rest of a premise: without this, a claim about the second half of a news article
    # (RAGTruth's Summary sources run to 400-1,100 tokens) met a premise that no longer held it.
    premise_words: int = 0
    # The calibrated verdict (diagnosis/verdict.py); None: Algorithm 1's rule alone decides.
    verdict: VerdictModel | None = None
    unsupported_threshold: float | None = None  # None: the verdict model's own operating point
    # A claim contradicted at this probability (and entailed less) makes the answer unsupported
    # whatever its P(unsupported) (verdict.refuted); None: the score alone decides.
    refute_threshold: float | None = None
    # A window that names none of a claim's names and numbers cannot contradict it: its
    # contradiction is read as neutral. The NLI model learned from SNLI's captions that another
    # subject is a contradiction ("Marc Rosset is a professional tennis player." contradicted at
    # 0.96 by a window about Mariaan de Swardt); entailment is left as the model reads it.
    contradiction_needs_name: bool = True
    # A window about another edition of what a claim names by its edition (the 51st Golden Globe
    # Awards, for a claim about the 31st: spans.other_edition) says nothing of it: its entailment
    # and contradiction are read as neutral. The NLI model reads the two as one subject, and
    # contradicted the right date of the 31st at 0.95 with the 51st's while entailing the 51st's
    # date for the 31st at 0.69.
    other_edition_is_neutral: bool = True
    # A window that credits a role a claim credits to someone else ("Charles Bronson as Captain
    # Jack" against "Audrey Dalton played Captain Jack": spans.role_of_another) contradicts the
    # claim: what it entails of it is read as contradiction. The NLI model cannot tell which name
    # of a cast list holds which role: it entailed that claim at 0.95 with any of the window's
    # names in the slot (docs/nli.md "Names in another role").
    role_of_another_refutes: bool = True
    # An answer to a question none of whose claims a window entails at this probability is
    # unsupported whatever its P(unsupported) (verdict.unbacked); None: the score alone decides.
    support_floor: float | None = None
    # With a verdict, e_q is answerability: a passage whose cross-encoder relevance reaches
    # thresholds.relevance; without a reranker, one naming answerable_coverage of the question's
    # names and numbers. An unsupported answer to an unanswerable question is IE, not WR.
    answerable_coverage: float = 0.5
    # With a reranker: answerability from the relevance, the question's names in the passages and
    # their titles, and the question's similarity (diagnosis/answerability.py); None: the best
    # relevance against thresholds.relevance alone.
    answerability: AnswerabilityModel | None = None


def premise_text(p: EvidencePassage) -> str:
    return f"{p.title}: {p.text}" if p.title else p.text


def response_claims(query: str, response: str, max_claims: int, bare: bool | None = None) -> list[str]:
    """The claims a response to a question is judged by: its sentences, none for an abstention.
    `bare`: whether it is a bare answer span (None: spans.is_bare)."""
    claims = [] if is_abstention(response) else split_claims(response, max_claims, keep=query)
    if bare is None:
        bare = is_bare(response)
    if claims and bare:
        # A bare answer span ("23", "Paris") asserts nothing on its own: it is judged as the
        # question's statement with the span in its slot (of a choice question, the span with
        # what is asked of it: "Tweaker is in the pop genre.").
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


def premise_windows(p: EvidencePassage, sentences: int, max_words: int = 0) -> list[str]:
    """The premises one passage is judged by: the whole passage, or its windows of `sentences`
    sentences (stride sentences - 1, so a fact split across a sentence boundary stays in one
    window), or, for a whole passage over `max_words` words, consecutive runs of sentences within
    that many (each after the first opening with the previous one's last sentence); each led by
    the title, which names the subject a window's pronouns refer to."""
    if sentences > 0:
        parts = split_sentences(p.text)
        if len(parts) > sentences:
            stride = max(1, sentences - 1)
            starts = range(0, len(parts) - sentences + stride, stride)
            return _titled(p, [" ".join(parts[i : i + sentences]) for i in starts if i < len(parts)])
    elif max_words > 0 and len(p.text.split()) > max_words:
        return _titled(p, _word_windows(split_sentences(p.text), max_words))
    return [premise_text(p)]


def _titled(p: EvidencePassage, windows: list[str]) -> list[str]:
    return [f"{p.title}: {w}" if p.title else w for w in windows]


def _word_windows(sentences: list[str], max_words: int) -> list[str]:
    """Consecutive runs of whole sentences of at most `max_words` words (a longer sentence alone),
    each after the first opening with the previous run's last sentence where both fit."""
    windows: list[str] = []
    run: list[tuple[str, int]] = []  # (sentence, its words)
    for sentence in sentences:
        n = len(sentence.split())
        if run and sum(w for _, w in run) + n > max_words:
            windows.append(" ".join(t for t, _ in run))
            run = run[-1:] if len(run) > 1 and run[-1][1] + n <= max_words else []
        run.append((sentence, n))
    if run:  # it holds the last sentence: a flush is always followed by one
        windows.append(" ".join(t for t, _ in run))
    return windows


def select_premises(hypothesis: str, premises: Sequence[tuple[str, str]], top: int) -> list[int]:
    """The premises (indices) one hypothesis is scored against: all of them, or the `top` passage
    windows sharing most content words with it, plus the joint premise. Word overlap, not a model:
    a window that names nothing of the claim can neither support nor contradict it."""
    windows = [i for i, (pid, _) in enumerate(premises) if pid != "joint"]
    if top <= 0 or len(windows) <= top:
        return list(range(len(premises)))
    words = content_words(hypothesis)
    overlap = {i: len(words & content_words(premises[i][1])) for i in windows}
    keep = sorted(sorted(windows, key=lambda i: -overlap[i])[:top])
    return keep + [i for i, (pid, _) in enumerate(premises) if pid == "joint"]


def _decisive(s: PassageScores) -> float:
    return max(s.entail, s.contradict)


def _joint_may_support(
    hypothesis: str, joint_text: str, scores: Sequence[PassageScores], t: Thresholds
) -> bool:
    """The joint premise (top passages read together) may only bridge facts the passages state:
    every name and number of the hypothesis occurs in it, and no single passage contradicts the
    hypothesis. Otherwise its entailment is what a long, on-topic premise draws from the NLI
    model for any claim ("the capital of Australia is Canberra" from passages that never name
    Canberra), and it is left out."""
    if any(s.contradict >= t.contradict for s in scores if s.passage != "joint"):
        return False
    return _joint_covers(hypothesis, joint_text)


def _joint_covers(hypothesis: str, joint_text: str) -> bool:
    """Every name and number of the hypothesis occurs in the joint premise (or it names none)."""
    coverage = span_coverage(hypothesis, [joint_text])
    return coverage is None or coverage >= 1.0


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
        self.nli = nli
        self.embed = embed
        # Retrieved passages were embedded when they were indexed (with the same model): EGC and
        # the query similarities read those vectors instead of encoding the passages again, the
        # costliest step of a diagnosis on CPU. Given passages (not from the index) are embedded.
        self.stored_vectors = stored_vectors
        # The corpus's pages by title: a comparison whose alternative the retrieval missed is
        # dated from that alternative's own page (comparison.py).
        self.titled = titled
        self.options = options = options or DiagnosisOptions()
        self.reranker = reranker
        self.align_kg = align_kg
        if options.query_hypothesis == "rerank" and reranker is None:
            raise ValueError("query_hypothesis 'rerank' needs the reranker")
        # The cross-encoder's relevance depends on the question and the passages alone: it runs
        # beside the NLI pass instead of after it (one thread, owned here; on 2 cores the two
        # models' runs interleave, HotpotQA answers p50 -17%, docs/diagnosis.md).
        self._beside = ThreadPoolExecutor(1, thread_name_prefix="ragmend-relevance")

    def diagnose(
        self,
        query: str,
        passages: Sequence[EvidencePassage],
        response: str,
        mode: Mode = "qa",
        reranked: bool = False,
        token_logprobs: Sequence[float] | None = None,
    ) -> Diagnosis:
        """`token_logprobs`: the generator's log-probability of each answer token, where its
        engine reports them (a verdict feature: how sure the generator was)."""
        o, t = self.options, self.options.thresholds
        timings: dict[str, float] = {}
        t_start = time.perf_counter()

        # -- hypotheses ---------------------------------------------------------------------
        label: str | None = None
        # What an answer claims: a choice answer's echo of the other alternative is no claim.
        said = without_echo(query, response) if mode == "qa" else response
        if mode == "claim":
            label, reason = parse_claim_label(response)
            query_hyp, construction = query, "claim"
            claims = split_claims(reason, o.max_claims) if reason else []
        else:
            construction = o.query_hypothesis
            query_hyp = question_statement(query, said) if construction == "statement" else query
            claims = response_claims(query, said, o.max_claims)
        use_nli_for_query = construction != "rerank"
        query_hyps = decompose(query_hyp) if construction == "statement" else [query_hyp]
        # A choice of attribute answered in one claim: the same claim naming the other
        # alternative is scored too, against single windows (alternatives.py).
        swap = swap_alternative(query, said) if mode == "qa" and len(claims) == 1 else None
        # The other alternative is read as the answer was: a bare span stays a span ("Rogers
        # Locomotive and Machine Works" for "Magna Home Entertainment" is no sentence either).
        bare = is_bare(response)
        other_claims = response_claims(query, swap.other_response, o.max_claims, bare) if swap else []
        contrast = other_claims[0] if len(other_claims) == 1 else None
        # Each passage's cross-encoder relevance: answerability (the rerank construction's e_q, and
        # e_q under a verdict) reads it; one call serves both, started now, read after EGC.
        relevance_job: Future[tuple[np.ndarray | None, float]] | None = None
        if not use_nli_for_query or (o.verdict is not None and mode == "qa"):
            relevance_job = self._beside.submit(self._timed_relevance, query, passages, reranked)

        # -- one batched NLI call -----------------------------------------------------------
        windows = [premise_windows(p, o.window_sentences, o.premise_words) for p in passages]
        premises = [(p.id, text) for p, texts in zip(passages, windows, strict=True) for text in texts]
        if o.joint_premise and len(passages) > 1:
            joint = " ".join(premise_text(p) for p in passages[: o.joint_passages])
            premises.append(("joint", joint))
        premise_ids = list(dict.fromkeys(pid for pid, _ in premises))  # one score per passage
        hypotheses = (query_hyps if use_nli_for_query else []) + claims + ([contrast] if contrast else [])
        # Each hypothesis meets every premise, or with window_top only the windows that share most
        # words with it (and the joint premise): a long source is not scored window by window
        # for every claim.
        # Whole passages, none of them split: every one.
        windowed = o.window_sentences > 0 or any(len(texts) > 1 for texts in windows)
        top = o.window_top if windowed else 0
        evidence = [premise_text(p) for p in passages]
        joint_text = " ".join(evidence[: o.joint_passages])
        chosen = [
            # The joint premise is read only for a hypothesis whose names and numbers it all
            # holds: for any other, _joint_may_support would drop its score anyway, and it is the
            # longest pair of the batch.
            [i for i in select_premises(h, premises, top) if premises[i][0] != "joint" or covers]
            for h in hypotheses
            # The contrast is read against single windows only, as the claim it is set against.
            for covers in (h is not contrast and _joint_covers(h, joint_text),)
        ]
        pairs = [(premises[i][1], h) for h, idx in zip(hypotheses, chosen, strict=True) for i in idx]
        # A one-sentence answer is often its own question statement: each distinct pair once.
        slot = {pair: n for n, pair in enumerate(dict.fromkeys(pairs))}
        t0 = time.perf_counter()
        batch = self.nli.predict(list(slot)) if pairs else None
        timings["nli_s"] = time.perf_counter() - t0
        verdicts: list[HypothesisVerdict] = []
        row = 0
        plain: dict[int, str] = {}  # each premise normalised once, for the names it holds
        editioned: dict[int, dict[str, frozenset[str]]] = {}  # ... and its editioned names once
        credited: dict[int, dict[str, frozenset[str]]] = {}  # ... and the roles it credits once
        for h, idx in zip(hypotheses, chosen, strict=True):
            best: dict[str, PassageScores] = {}
            names = key_spans(h) if o.contradiction_needs_name else []
            claim_editions = editions(h) if o.other_edition_is_neutral else {}
            claim_roles = claimed_roles(h) if o.role_of_another_refutes else {}
            for i in idx:
                assert batch is not None  # a premise and a hypothesis made a pair
                pid = premises[i][0]
                k = slot[pairs[row]]
                e, n, c = (float(x) for x in batch.probs[k])
                if claim_editions:
                    if i not in editioned:
                        editioned[i] = editions(premises[i][1])
                    if other_edition(claim_editions, editioned[i]):
                        e, n, c = 0.0, e + n + c, 0.0
                if claim_roles:
                    if i not in credited:
                        credited[i] = credited_roles(premises[i][1])
                    if role_of_another(claim_roles, credited[i]):
                        e, c = 0.0, c + e
                if names and pid != "joint":
                    if i not in plain:
                        plain[i] = normalise(premises[i][1])
                    if not names_any(names, plain[i]):
                        n, c = n + c, 0.0
                s = PassageScores(pid, round(e, 4), round(n, 4), round(c, 4), batch.truncated[k])
                row += 1
                if pid not in best or _decisive(s) > _decisive(best[pid]):
                    best[pid] = s  # a passage's windows: the one that says most, either way
            scores = [best[pid] for pid in premise_ids if pid in best]
            if "joint" in best and not _joint_may_support(h, joint_text, scores, t):
                scores = [s for s in scores if s.passage != "joint"]
            verdicts.append(hypothesis_state(h, scores, t))
        contrast_verdict = verdicts.pop() if contrast else None

        # -- e_q ----------------------------------------------------------------------------
        if use_nli_for_query:
            q_verdicts, claim_verdicts = verdicts[: len(query_hyps)], verdicts[len(query_hyps) :]
            e_q = NLISignal(signal_state(q_verdicts), tuple(q_verdicts), construction)
        else:
            claim_verdicts = verdicts  # e_q is answerability, read after EGC (it uses q_sims)

        # -- e_r ----------------------------------------------------------------------------
        if mode == "claim" and not claims:
            e_r = _label_signal(label, e_q)
        elif not claims:
            e_r = NLISignal("neutral", (), "abstained" if response.strip() else "empty")
        else:
            e_r = NLISignal(signal_state(claim_verdicts), tuple(claim_verdicts), "claims")

        # -- knowledge graph ----------------------------------------------------------------
        t0 = time.perf_counter()
        kg = self.align_kg(reason if mode == "claim" and claims else response) if self.align_kg else None
        kg = kg or KGSignal("missing", (), available=False)
        kg = crosscheck(kg, claim_verdicts, t.entail)  # a conflict its own passage entails is none
        timings["kg_s"] = time.perf_counter() - t0

        # -- EGC ----------------------------------------------------------------------------
        t0 = time.perf_counter()
        # Two calls: a batch is padded to its longest text, and a passage can be ten times a claim.
        short = self.embed([query, *claims])
        qv, cv = short[0], short[1:]
        ev = self._evidence_vectors(passages, evidence, len(qv))
        egc = egc_features(qv, ev, cv, t.egc_tau)
        q_sims = ev @ qv if len(passages) else np.zeros(0)
        timings["egc_s"] = time.perf_counter() - t0
        relevance: np.ndarray | None = None
        if relevance_job is not None:
            # Its own duration: it overlapped the NLI pass, so the stages add up to more than total.
            relevance, timings["rerank_s"] = relevance_job.result()
        if not use_nli_for_query:
            e_q = self._answerability(query, passages, evidence, relevance, q_sims)

        # -- failure (the verdict's where there is one), label gate, stage ------------------
        failure = failure_type(kg.kappa, e_q.state, e_r.state, label)
        # An answer about another person, place or work, stating another relation than the one
        # asked (born, when asked founded), or supported only by passages about something the
        # question does not name, fails even where a passage entails it: it does not address
        # what was asked.
        off_question = unaddressed(query, response) if mode == "qa" else None
        if (
            mode == "qa"
            and off_question is None
            and _support_off_question(query, passages, claim_verdicts, t.entail)
        ):
            off_question = "support"
        if off_question and failure == "NoFailure":
            failure = "WR"
        verdict: Verdict | None = None
        if o.verdict is not None and mode == "qa":
            t0 = time.perf_counter()
            e_r, verdict = self._verdict(
                o.verdict, query, response, evidence, e_q, e_r, egc.score, q_sims, relevance, token_logprobs
            )
            # e_q becomes answerability: does the evidence answer the QUESTION, whatever the
            # response says. The statement built from the response stays a verdict feature
            # (statement_entail); it cannot be e_q, since an answer about someone else makes a
            # statement that some passage entails.
            if use_nli_for_query:  # else e_q is answerability already (read above)
                e_q = self._answerability(query, passages, evidence, relevance, q_sims)
            # Recorded with the verdict's features, so rows scored offline decide IE the same way.
            answerable = {"p_answerable": e_q.support or 0.0, "answerable": float(e_q.state == "entail")}
            verdict = replace(verdict, rule_failure=failure, features={**verdict.features, **answerable})
            addresses = off_question is None
            failure = failure_of(
                verdict.unsupported, failure, kg.kappa, e_q.state == "entail", addresses, verdict.features
            )
            timings["verdict_s"] = time.perf_counter() - t0
        # A comparison in time is checked hop by hop against the passages' dates (comparison.py).
        comparison = (
            check_comparison(query, response, [(p.title, p.text) for p in passages], self.titled)
            if mode == "qa"
            else None
        )
        alternatives = None
        if swap is not None and contrast_verdict is not None:
            alternatives = check_alternatives(swap, claim_verdicts[0], contrast_verdict, t.entail)
        failure = settle_checks(
            failure,
            comparison.outcome if comparison else None,
            alternatives.outcome if alternatives else None,
            off_question is None,
            only_the_pick(query, claims),
        )
        doc_ids = [p.doc_id for p in passages]
        truncated = any(s.truncated for v in verdicts for s in v.scores if s.passage != "joint")
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
            evidence_conflict=mixed_evidence(verdicts, t),
            stage=stage,
            stage_reason=reason_line,
            label=label,
            final_label=gated_label(mode, failure, label),
            timings={k: round(v, 4) for k, v in timings.items()},
            verdict=verdict,
            off_question=off_question,
            comparison=comparison,
            alternatives=alternatives,
        )

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
            evidence,
            claims,
            p_claims,
            e_q.support,
            egc,
            q_sims,
            relevance,
            token_logprobs,
            question=asks_question(query),
        )
        p, fitted_threshold = model.score(features, claims)
        threshold = self.options.unsupported_threshold or fitted_threshold
        rounded = {k: round(v, 4) for k, v in features.items()}
        scored = tuple(
            replace(v, p_unsupported=round(p_c, 4)) for v, p_c in zip(e_r.hypotheses, p_claims, strict=True)
        )
        o = self.options
        why = unsupported_by(p, threshold, features, o.refute_threshold, o.support_floor)
        verdict = Verdict(
            round(p, 4), threshold, bool(why), "NoFailure", rounded, model.profile_for(features), why
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
        (IE)."""
        if not passages:
            return NLISignal("neutral", (HypothesisVerdict(query, "neutral", None, ()),), "rerank")
        model, p_answerable = self.options.answerability, None
        if relevance is not None and model is not None:
            features = answerability_features(query, [p.title for p in passages], evidence, relevance, q_sims)
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
            PassageScores(p.id, round(float(r), 4), round(float(1 - r), 4), 0.0)
            for p, r in zip(passages, rel, strict=True)
        )
        state: NLIState = "entail" if answers else "neutral"
        best = passages[int(rel.argmax())].id if answers else None
        support = None if p_answerable is None else round(p_answerable, 4)  # None: from the scores
        return NLISignal(state, (HypothesisVerdict(query, state, best, scores),), construction, support)


def _support_off_question(
    query: str, passages: Sequence[EvidencePassage], verdicts: Sequence[HypothesisVerdict], entail: float
) -> bool:
    """The answer is entailed, but only by passages that are not about what was asked
    (spans.anchored_passages): "Dover is the county seat of Strafford County." for a question
    about the county of East Lempster, entailed by the Strafford County page alone. On the local
    generator's HotpotQA answers it caught 6 of 100 wrong answers and none of 30 right ones
    (DEV and TEST, docs/diagnosis.md)."""
    ids = {p.id for p in passages}
    support = {
        s.passage
        for v in verdicts
        if v.state == "entail"
        for s in v.scores
        if s.passage in ids and s.entail >= entail
    }
    if not support:  # nothing entailed: no passage text needs reading
        return False
    anchored = anchored_passages(query, [(p.title, p.text) for p in passages])
    if anchored is None:
        return False
    about = {p.id: a for p, a in zip(passages, anchored, strict=True)}
    return not any(about[pid] for pid in support)


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
    return NLISignal(state, (HypothesisVerdict(shown, state, None, ()),), "label")
