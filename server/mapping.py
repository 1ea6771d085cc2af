"""From ragmend's internal values to the HTTP contract (schemas.py): the one place that knows both.

Every response field is named here, explicitly: a field renamed or removed inside ragmend fails
in this module (mypy, and every test that answers a request), never silently in the published
API; a field added inside ragmend reaches the API only when a line here passes it on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragmend.actions import catalogue, meter
from ragmend.diagnosis import types as diag
from ragmend.engine import repair, router
from ragmend.engine.presentation import Reading, present
from ragmend.policy import reward as policy_reward
from ragmend.policy import types as policy_types
from ragmend.policy.facade import action_budgets
from ragmend.rag import types as rag
from ragmend.server import diagnose_schemas as check_api
from ragmend.server import schemas as api
from ragmend.server.chat_sources import status_line

if TYPE_CHECKING:
    from ragmend.engine import Engine
    from ragmend.engine.checking import Checked
    from ragmend.engine.collections import CollectionInfo
    from ragmend.engine.outcome import Outcome
    from ragmend.rag.ingest import IngestReport
    from ragmend.rag.store import DocEntry

# --- requests ------------------------------------------------------------------------------------


def conversation(messages: Sequence[tuple[str, str]]) -> tuple[tuple[rag.Turn, ...], str | None]:
    """A chat's earlier messages (role, text) as the engine reads them: the user and assistant
    turns (what a follow-up may refer to), and the system and developer messages joined as the
    answer's style instructions (None when there are none). Tool messages carry nothing here."""
    history = tuple(
        rag.Turn(role=role, content=text) for role, text in messages if role in ("user", "assistant")
    )
    notes = [text.strip() for role, text in messages if role in ("system", "developer") and text.strip()]
    return history, "\n".join(notes) or None


# --- one pipeline pass -------------------------------------------------------------------------


def passage(p: rag.Passage, collection: str | None = None) -> api.Passage:
    """`collection`: the one whose index held it (None: a passage given to check)."""
    return api.Passage(
        id=p.id,
        doc_id=p.doc_id,
        title=p.title,
        text=p.text,
        score=p.score,
        retriever=p.retriever,
        trust=p.trust,
        collection=collection,
    )


def rag_config(c: rag.RAGConfig) -> api.RAGConfig:
    return api.RAGConfig(
        mode=c.mode,
        k=c.k,
        rerank=c.rerank,
        rerank_top_n=c.rerank_top_n,
        prompt=c.prompt,
        context_tokens=c.context_tokens,
        evidence=c.evidence,
        hops=c.hops,
        generator=c.generator,
        query=c.query,
        temperature=c.temperature,
        max_tokens=c.max_tokens,
        stop=list(c.stop) if c.stop else None,
        seed=c.seed,
        instructions=c.instructions,
    )


def timings(t: rag.StageTimings) -> api.StageTimings:
    return api.StageTimings(
        retrieve_s=t.retrieve_s, rerank_s=t.rerank_s, generate_s=t.generate_s, first_token_s=t.first_token_s
    )


def answer(a: rag.Answer, collection: str | None = None) -> api.Answer:
    return api.Answer(
        query=a.query,
        response=a.response,
        evidence=[passage(p, collection) for p in a.evidence],
        config=rag_config(a.config),
        timings=timings(a.timings),
        model=a.model,
        prompt_tokens=a.prompt_tokens,
        completion_tokens=a.completion_tokens,
        index_generation=a.index_generation,
        finish_reason=a.finish_reason,
    )


# --- the diagnosis -----------------------------------------------------------------------------


def passage_scores(s: diag.PassageScores) -> api.PassageScores:
    return api.PassageScores(
        passage=s.passage,
        entail=s.entail,
        neutral=s.neutral,
        contradict=s.contradict,
        truncated=s.truncated,
        joined=list(s.joined),
    )


def hypothesis(h: diag.HypothesisVerdict) -> api.HypothesisVerdict:
    return api.HypothesisVerdict(
        hypothesis=h.hypothesis,
        state=h.state,
        best_passage=h.best_passage,
        scores=[passage_scores(s) for s in h.scores],
        p_unsupported=h.p_unsupported,
    )


def nli_signal(s: diag.NLISignal) -> api.NLISignal:
    return api.NLISignal(
        state=s.state,
        hypotheses=[hypothesis(h) for h in s.hypotheses],
        construction=s.construction,
        support=s.support,
    )


def triple_match(m: diag.TripleMatch) -> api.TripleMatch:
    return api.TripleMatch(
        triple=m.triple,
        verdict=m.verdict,
        kg_triple=m.kg_triple,
        similarity=m.similarity,
        source=m.source,
        reason=m.reason,
    )


def kg_signal(k: diag.KGSignal) -> api.KGSignal:
    return api.KGSignal(kappa=k.kappa, matches=[triple_match(m) for m in k.matches], available=k.available)


def egc(e: diag.EGCFeatures) -> api.EGCFeatures:
    return api.EGCFeatures(
        coverage=e.coverage,
        support_density=e.support_density,
        agreement=e.agreement,
        connectivity=e.connectivity,
        isolation=e.isolation,
        score=e.score,
    )


def diagnosis(d: diag.Diagnosis) -> api.Diagnosis:
    return api.Diagnosis(
        mode=d.mode,
        e_q=nli_signal(d.e_q),
        e_r=nli_signal(d.e_r),
        kg=kg_signal(d.kg),
        failure=d.failure,
        egc=egc(d.egc),
        evidence_conflict=d.evidence_conflict,
        stage=d.stage,
        stage_reason=d.stage_reason,
        label=d.label,
        final_label=d.final_label,
        timings=dict(d.timings),
        verdict=None if d.verdict is None else verdict(d.verdict),
        off_question=d.off_question,
        comparison=None if d.comparison is None else comparison(d.comparison),
        alternatives=None if d.alternatives is None else alternatives(d.alternatives),
        failure_steps=[api.FailureStep(step=s.step, failure=s.failure) for s in d.failure_steps],
        decided_by=d.decided_by,
        grade=d.grade,
        language=d.language,
        not_judged=d.not_judged,
        unsupported_spans=[
            api.UnsupportedSpan(
                start=s.start,
                end=s.end,
                text=s.text,
                claim=s.claim,
                p_unsupported=s.p_unsupported,
                state=s.state,
            )
            for s in d.unsupported_spans
        ],
        conflict=None if d.conflict is None else evidence_conflict(d.conflict),
    )


def evidence_conflict(c: diag.EvidenceConflict) -> api.EvidenceConflict:
    sides = [
        api.ConflictSide(passages=list(s.passages), says=s.says, takes_answer=s.takes_answer, trust=s.trust)
        for s in c.sides
    ]
    return api.EvidenceConflict(claim=c.claim, sides=sides, strength=c.strength)


def alternatives(a: diag.AlternativeCheck) -> api.Alternatives:
    return api.Alternatives(
        alternatives=list(a.alternatives), picked=a.picked, support=list(a.support), outcome=a.outcome
    )


def comparison(c: diag.ComparisonCheck) -> api.Comparison:
    return api.Comparison(
        alternatives=list(c.alternatives),
        direction=c.direction,
        dates=[None if x is None else str(x) for x in c.dates],
        expected=c.expected,
        picked=c.picked,
        from_corpus=list(c.from_corpus),
        outcome=c.outcome,
    )


def verdict(v: diag.Verdict) -> api.Verdict:
    return api.Verdict(
        p_unsupported=v.p_unsupported,
        threshold=v.threshold,
        unsupported=v.unsupported,
        rule_failure=v.rule_failure,
        features=dict(v.features),
        profile=v.profile,
        unsupported_by=list(v.unsupported_by),
    )


def optional_diagnosis(d: diag.Diagnosis | None) -> api.Diagnosis | None:
    return None if d is None else diagnosis(d)


# --- the repair --------------------------------------------------------------------------------


def decision(d: policy_types.Decision) -> api.Decision:
    return api.Decision(
        arm=d.arm,
        kind=d.kind,
        scores=dict(d.scores),
        exploit=dict(d.exploit),
        explore=dict(d.explore),
        seed=d.seed,
        masked=list(d.masked),
    )


def masked(m: catalogue.Masked) -> api.Masked:
    return api.Masked(name=m.name, reason=m.reason)


def cost(c: meter.Cost) -> api.Cost:
    return api.Cost(
        latency_s=c.latency_s,
        memory_bytes=c.memory_bytes,
        memory_source=c.memory_source,
        nvml=c.nvml,
        device_used_before=c.device_used_before,
        device_used_after=c.device_used_after,
        device_peak=c.device_peak,
        torch_cuda_peak_bytes=c.torch_cuda_peak_bytes,
        replayed_s=c.replayed_s,
        waited_s=c.waited_s,
    )


def reward(r: policy_reward.Reward) -> api.Reward:
    return api.Reward(
        total=r.total,
        quality=r.quality,
        no_failure=r.no_failure,
        kg_consistent=r.kg_consistent,
        response_entailed=r.response_entailed,
        latency_factor=r.latency_factor,
        memory_factor=r.memory_factor,
        memory_measured=r.memory_measured,
        violated=list(r.violated),
        variant=r.variant,
        latency_s=r.latency_s,
        memory_bytes=r.memory_bytes,
        budgets=api.Budgets(latency_s=r.budgets.latency_s, memory_bytes=r.budgets.memory_bytes),
    )


def repair_trace(
    t: repair.RepairTrace, internals: bool = True, collection: str | None = None
) -> api.RepairTrace:
    return api.RepairTrace(
        action=t.action if internals else None,
        failure=t.failure,
        decision=decision(t.decision) if internals else None,
        masked=[masked(m) for m in t.masked],
        config=rag_config(t.config),
        answer=answer(t.answer, collection),
        diagnosis=diagnosis(t.diagnosis),
        cost=cost(t.cost),
        reward=reward(t.reward),
        learned=t.learned,
        kept=t.kept.value,
        success=t.success,
        latency_budget_s=t.latency_budget_s,
        over_budget=list(t.over_budget),
    )


def repair_skip(s: repair.RepairSkip, internals: bool = True) -> api.RepairSkip:
    return api.RepairSkip(
        reason=s.reason,
        masked=[masked(m) for m in s.masked],
        timed_out=s.timed_out,
        action=s.action if internals else None,
    )


def repair_result(
    r: repair.RepairTrace | repair.RepairSkip | None, internals: bool = True, collection: str | None = None
) -> api.RepairTrace | api.RepairSkip | None:
    if r is None:
        return None
    if isinstance(r, repair.RepairSkip):
        return repair_skip(r, internals)
    return repair_trace(r, internals, collection)


def route(r: router.Route, internals: bool = True) -> api.Route:
    """`internals`: the plan the router chose and its scores are shown (else null; a plan the
    request or the configuration fixed is no policy's and stays)."""
    return api.Route(
        plan=r.plan if internals or not r.routed else None,
        chosen_by=r.chosen_by,
        kind=r.kind,
        decision=decision(r.decision) if r.decision is not None and internals else None,
        masked=[masked(m) for m in r.masked],
        expected_s=r.expected_s,
        cost=cost(r.cost) if r.cost is not None else None,
        reward=reward(r.reward) if r.reward is not None else None,
        learned=r.learned,
    )


# --- /v1/answer (and the `ragmend` extension of a chat completion) ---------------------------


def token_usage(outcome: Outcome) -> api.TokenUsage:
    total = outcome.total_usage()
    return api.TokenUsage(
        prompt_tokens=total.prompt_tokens,
        completion_tokens=total.completion_tokens,
        by_purpose={
            purpose: api.PurposeUsage(
                prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens, calls=t.calls
            )
            for purpose, t in outcome.usage.items()
        },
    )


def answer_response(
    outcome: Outcome,
    reading: Reading | None = None,
    response_id: str = "",
    internals: bool = False,
) -> api.AnswerResponse:
    """The body for an engine outcome; its `answer` is what the user reads, as `reading` says
    (engine/presentation.py). `internals`: the policy's choices are shown (the arm and plan a
    vote credits, every arm's score, the seed); else they are null, for a key that could aim its
    votes with them."""
    result = outcome.answer
    evidence = [(p.id, p.title) for p in result.evidence]
    shown = present(
        result.response,
        outcome.diagnosis,
        evidence,
        reading or Reading(),
        query=result.query,
        decided=outcome.decided,
    )
    reply = api.AnswerResponse(
        id=response_id,
        query=result.query,
        answer=shown.text,
        generated=result.response,
        citations=[
            api.CitedSentence(text=s.text, passages=list(s.passages), supported=s.supported)
            for s in shown.sentences
        ],
        answer_policy=shown.policy_applied,
        answer_note=shown.note,
        abstained_by=shown.abstained_by,
        conflict_by=shown.conflict_by,
        evidence=[passage(p, outcome.collection) for p in result.evidence],
        config=rag_config(result.config),
        timings=timings(result.timings),
        model=result.model,
        usage=token_usage(outcome),
        index_generation=result.index_generation,
        condensed_from=outcome.condensed_from,
        diagnosis=optional_diagnosis(outcome.diagnosis),
        first_diagnosis=optional_diagnosis(outcome.first_diagnosis),
        route=route(outcome.route, internals) if outcome.route is not None else None,
        repair=repair_result(outcome.repair, internals, outcome.collection),
        second_repair=repair_result(outcome.second_repair, internals, outcome.collection),
        seconds=outcome.seconds,
        generator_seconds=outcome.generator_s,
    )
    # The status line reads the reply as a client does (chat_sources.py words it for both APIs).
    return reply.model_copy(update={"status": status_line(reply)})


# --- /readyz and /admin ------------------------------------------------------------------------


def ready_status(status: Mapping[str, Any]) -> api.ReadyStatus:
    """Engine.status() (a dict: its keys are checked here, at run time)."""
    return api.ReadyStatus(
        ready=status["ready"], models=dict(status["models"]), index=status["index"], error=status["error"]
    )


def policy_view(engine: Engine) -> api.PolicyView:
    """GET /admin/policy: the settings in force and every arm's statistics."""
    policy = engine.policy
    cfg = policy.config
    enabled = set(cfg.enabled_actions)
    scaled, rss = action_budgets(cfg), action_budgets(cfg, "rss")
    return api.PolicyView(
        kind=policy.kind,
        alpha=policy.alpha,  # LinUCB's; None for the other kinds
        learn=policy.learn,
        mode="learn" if policy.learn else "frozen",
        repair=engine.settings.policy.repair,
        refresh_cooldown_s=cfg.refresh_cooldown_s,
        enabled_actions=list(cfg.enabled_actions),
        budgets=api.PolicyBudgets(
            latency_budget_s=cfg.latency_budget_s,
            memory_budget_bytes=cfg.memory_budget_bytes,
            rss_memory_budget_bytes=cfg.rss_memory_budget_bytes,
            request_latency_budget_s=cfg.request_latency_budget_s,
            budget_scale=cfg.budget_scale,
            scaled=api.ScaledBudgets(
                latency_s=scaled.latency_s,
                memory_bytes=scaled.memory_bytes,
                rss_memory_bytes=rss.memory_bytes,
            ),
        ),
        arms={
            arm: api.ArmView(
                enabled=arm in enabled,
                pulls=s.pulls,
                mean_reward=s.mean_reward,
                successes=s.successes,
                failures=s.failures,
            )
            for arm, s in policy.stats().items()
        },
    )


def policy_change(engine: Engine, changed: Sequence[str]) -> api.PolicyChange:
    """PATCH /admin/policy: the policy after the change, and the settings it set."""
    return api.PolicyChange(**dict(policy_view(engine)), changed=list(changed))


def index_refresh(report: IngestReport) -> api.IndexRefresh:
    return api.IndexRefresh(
        generation=report.generation,
        documents=report.documents,
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        removed=report.removed,
        chunks=report.chunks,
        embedded_chunks=report.embedded_chunks,
        seconds=report.seconds,
        chunk_s=report.chunk_s,
        embed_s=report.embed_s,
        write_s=report.write_s,
        chunks_per_s=report.chunks_per_s,
    )


def collection_view(info: CollectionInfo, model_name: str) -> api.CollectionView:
    spec = info.spec
    return api.CollectionView(
        name=info.name,
        model=model_name if info.name == "default" else f"{model_name}/{info.name}",
        sources=[str(p) for p in spec.sources],
        policy=spec.policy,
        declared=spec.declared,
        documents=info.documents,
        generation=info.generation,
    )


def document_list(name: str, generation: str | None, docs: Mapping[str, DocEntry]) -> api.DocumentList:
    return api.DocumentList(
        collection=name,
        generation=generation,
        data=[
            api.DocumentView(id=doc_id, title=d.title, source=d.source, chunks=len(d.node_ids))
            for doc_id, d in sorted(docs.items())
        ],
    )


def checked_response(c: Checked, check_id: str, model: str) -> check_api.DiagnoseResponse:
    d = c.diagnosis
    return check_api.DiagnoseResponse(
        id=check_id,
        model=model,
        diagnosis=diagnosis(d),
        supported=None if not d.judged else not d.failed,
        passages=[passage(p, c.collection) for p in c.passages],
        retrieved=c.retrieved,
        truncated_passages=list(c.truncated),
        seconds=c.seconds,
    )
