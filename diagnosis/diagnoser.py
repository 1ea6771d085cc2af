"""diagnose(q, E, r, y) -> Diagnosis: D2R-RAG Algorithm 1 with its signals, and what ragmend adds.

Every premise-hypothesis pair of one answer (the query's hypothesis and each response claim,
against every passage and the joint premise) goes through the NLI model in ONE batched call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragmend.diagnosis.aggregate import hypothesis_state, mixed_evidence, signal_state
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
from ragmend.diagnosis.types import (
    Diagnosis,
    HypothesisVerdict,
    KGSignal,
    Mode,
    NLISignal,
    NLIState,
    PassageScores,
    Thresholds,
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
BARE_ANSWER_WORDS = 4  # a response shorter than this is an answer span, not a sentence
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


def premise_text(p: EvidencePassage) -> str:
    return f"{p.title}: {p.text}" if p.title else p.text


def premise_windows(p: EvidencePassage, sentences: int) -> list[str]:
    """The premises one passage is judged by: the whole passage, or its windows of `sentences`
    sentences (stride sentences - 1, so a fact split across a sentence boundary stays in one
    window), each led by the title, which names the subject a window's pronouns refer to."""
    parts = split_sentences(p.text) if sentences > 0 else []
    if len(parts) <= sentences or sentences <= 0:
        return [premise_text(p)]
    stride = max(1, sentences - 1)
    starts = range(0, len(parts) - sentences + stride, stride)
    windows = [" ".join(parts[i : i + sentences]) for i in starts if i < len(parts)]
    return [f"{p.title}: {w}" if p.title else w for w in windows]


def _decisive(s: PassageScores) -> float:
    return max(s.entail, s.contradict)


class Diagnoser:
    def __init__(
        self,
        nli: NLIModel,
        embed: Embed,
        options: DiagnosisOptions | None = None,
        reranker: Reranker | None = None,
        align_kg: AlignKG | None = None,
    ):
        self.nli = nli
        self.embed = embed
        self.options = options = options or DiagnosisOptions()
        self.reranker = reranker
        self.align_kg = align_kg
        if options.query_hypothesis == "rerank" and reranker is None:
            raise ValueError("query_hypothesis 'rerank' needs the reranker")

    def diagnose(
        self,
        query: str,
        passages: Sequence[EvidencePassage],
        response: str,
        mode: Mode = "qa",
        reranked: bool = False,
    ) -> Diagnosis:
        o, t = self.options, self.options.thresholds
        timings: dict[str, float] = {}
        t_start = time.perf_counter()

        # -- hypotheses ---------------------------------------------------------------------
        label: str | None = None
        if mode == "claim":
            label, reason = parse_claim_label(response)
            query_hyp, construction = query, "claim"
            claims = split_claims(reason, o.max_claims) if reason else []
        else:
            construction = o.query_hypothesis
            query_hyp = question_statement(query, response) if construction == "statement" else query
            claims = [] if is_abstention(response) else split_claims(response, o.max_claims)
            if claims and len(response.split()) < BARE_ANSWER_WORDS:
                # A bare answer span ("23", "Paris") asserts nothing on its own: it is judged as
                # the question's statement with the span in its slot.
                claims = [question_statement(query, response)]
        use_nli_for_query = construction != "rerank"

        # -- one batched NLI call -----------------------------------------------------------
        premises = [(p.id, text) for p in passages for text in premise_windows(p, o.window_sentences)]
        if o.joint_premise and len(passages) > 1:
            joint = " ".join(premise_text(p) for p in passages[: o.joint_passages])
            premises.append(("joint", joint))
        premise_ids = list(dict.fromkeys(pid for pid, _ in premises))  # one score per passage
        hypotheses = ([query_hyp] if use_nli_for_query else []) + claims
        pairs = [(text, h) for h in hypotheses for _, text in premises]
        t0 = time.perf_counter()
        batch = self.nli.predict(pairs) if pairs else None
        timings["nli_s"] = time.perf_counter() - t0
        verdicts: list[HypothesisVerdict] = []
        for hi, h in enumerate(hypotheses):
            best: dict[str, PassageScores] = {}
            for pi, (pid, _) in enumerate(premises):
                assert batch is not None  # a premise and a hypothesis made a pair
                row = hi * len(premises) + pi
                e, n, c = (float(x) for x in batch.probs[row])
                s = PassageScores(pid, round(e, 4), round(n, 4), round(c, 4), batch.truncated[row])
                if pid not in best or _decisive(s) > _decisive(best[pid]):
                    best[pid] = s  # a passage's windows: the one that says most, either way
            verdicts.append(hypothesis_state(h, [best[pid] for pid in premise_ids], t))

        # -- e_q ----------------------------------------------------------------------------
        if use_nli_for_query:
            q_verdict, claim_verdicts = verdicts[0], verdicts[1:]
            e_q = NLISignal(q_verdict.state, (q_verdict,), construction)
        else:
            claim_verdicts = verdicts
            t0 = time.perf_counter()
            e_q = self._rerank_signal(query, passages, reranked)
            timings["rerank_s"] = time.perf_counter() - t0

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
        timings["kg_s"] = time.perf_counter() - t0

        # -- EGC ----------------------------------------------------------------------------
        t0 = time.perf_counter()
        texts = [query] + [text for _, text in premises[: len(passages)]] + claims
        vecs = self.embed(texts) if texts else np.zeros((0, 1))
        qv, ev, cv = vecs[0], vecs[1 : 1 + len(passages)], vecs[1 + len(passages) :]
        egc = egc_features(qv, ev, cv, t.egc_tau)
        q_sims = ev @ qv if len(passages) else np.zeros(0)
        timings["egc_s"] = time.perf_counter() - t0

        # -- failure, label gate, stage -----------------------------------------------------
        failure = failure_type(kg.kappa, e_q.state, e_r.state, label)
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
        )

    def _rerank_signal(self, query: str, passages: Sequence[EvidencePassage], reranked: bool) -> NLISignal:
        """The cross-encoder's relevance as the query signal: entail when the best passage is
        relevant enough (sigmoid(logit) >= thresholds.relevance), else neutral."""
        if not passages:
            return NLISignal("neutral", (HypothesisVerdict(query, "neutral", None, ()),), "rerank")
        if reranked and all(p.retriever == "rerank" for p in passages):
            logits = [p.score for p in passages]  # already the cross-encoder's scores
        else:
            assert self.reranker is not None
            logits = self.reranker.score(query, [premise_text(p) for p in passages])
        rel = 1 / (1 + np.exp(-np.asarray(logits, dtype=np.float64)))
        scores = tuple(
            PassageScores(p.id, round(float(r), 4), round(float(1 - r), 4), 0.0)
            for p, r in zip(passages, rel, strict=True)
        )
        best = int(rel.argmax())
        state: NLIState = "entail" if rel[best] >= self.options.thresholds.relevance else "neutral"
        verdict = HypothesisVerdict(query, state, passages[best].id if state == "entail" else None, scores)
        return NLISignal(state, (verdict,), "rerank")


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
