"""The HTTP contract of the native API: request and response bodies of /v1/answer, /readyz, the
admin routes, and the error body of every route (the OpenAI routes' own bodies are in
openai_schemas.py).

These models are the public API, declared here and nowhere else: they embed no internal type
(no dataclass or model of diagnosis/, engine/, policy/, actions/ or rag/), so renaming a field
inside ragmend cannot change a response. mapping.py fills them from the internal values, field by
field; a renamed internal field fails there (mypy, and the tests that answer real requests),
while docs/openapi.json, generated from these models, stays as it is. They may use the domain's
closed vocabularies (the Literal aliases: failure types, stages, NLI states...), which are part
of the contract; tests/test_openapi.py checks both rules and compares the document.

Response models declare no defaults: every field is always present in the reply (null where the
type allows it), and a field added here must be filled by mapping.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragmend.actions.meter import MemorySource
from ragmend.diagnosis.types import FailureType, Grade, Kappa, Mode, NLIState, OffQuestion, RuleName, Stage
from ragmend.errors import ApiErrorType
from ragmend.policy.reward import RewardVariant
from ragmend.policy.types import PolicyKind
from ragmend.settings import RetrievalMode

# --- /v1/answer: the request ------------------------------------------------------------------


# A conversation's bounds, for /v1/answer's history and /v1/chat/completions' messages alike: a
# client cannot hand the server megabytes of turns to parse.
MAX_MESSAGES = 100
MAX_MESSAGE_CHARS = 20_000


class HistoryMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        description="The question (or claim) to answer.", examples=["Who founded Marvel Comics?"]
    )
    config: dict[str, Any] | None = Field(
        default=None,
        description="Overrides of the RAG configuration for this request: mode (dense|bm25|hybrid), k, "
        "rerank, rerank_top_n, prompt, query.",
        examples=[{"mode": "hybrid", "k": 8, "rerank": True}],
    )
    history: list[HistoryMessage] | None = Field(
        default=None,
        max_length=MAX_MESSAGES,
        description="Earlier messages of a conversation, oldest first: user and assistant turns make "
        "a follow-up `query` standalone before retrieval; system and developer messages shape the "
        "answer's style and language (never its grounding).",
        examples=[[{"role": "user", "content": "Who founded The Conversation?"}]],
    )
    model: str | None = Field(
        default=None,
        description="Which corpus answers, as GET /v1/models names it: the server's model name (the "
        "default corpus; also when omitted) or `<model name>/<collection>`.",
        examples=["ragmend/handbook"],
    )


# --- one pipeline pass -------------------------------------------------------------------------


class Passage(BaseModel):
    """One passage of the evidence the generator saw, with where it came from: its collection, its
    document and the trust level its source was given. An answer consistent with it is only as
    good as its source."""

    id: str
    doc_id: str = Field(
        description="Its document: a file's path under the ingested folder (or the file's name), a "
        "JSONL row's id, or a passage given to check's id."
    )
    title: str
    text: str
    score: float
    retriever: str = Field(description="dense | bm25 | hybrid | rerank: what produced the score")
    trust: float | None = Field(
        None,
        description="its source's trust level in [0, 1] (a JSONL row's `trust` at ingest, or a "
        "given passage's); null: not said",
    )
    collection: str | None = Field(
        None,
        description="The collection whose index held it: default, or a collection's name; null: a "
        "passage given to check.",
    )


class RAGConfig(BaseModel):
    """The configuration of one pipeline pass (a repair action patches it)."""

    mode: RetrievalMode
    k: int = Field(description="passages retrieved")
    rerank: bool
    rerank_top_n: int = Field(description="passages kept after reranking")
    prompt: str
    context_tokens: int = Field(
        description="the prompt's evidence budget in tokens: the passages' sentences closest to the "
        "question; 0: the passages whole"
    )
    evidence: Literal["closest", "focus"] = Field(
        "closest",
        description="how the prompt's evidence was chosen: closest (the sentences closest to the question, "
        "in retrieval order) or focus (the sentences a cross-encoder ranks best, best first: a repair)",
    )
    hops: int = Field(
        1, description="retrieval hops (2: a second retrieval from the first hop's best sentence)"
    )
    generator: Literal["default", "escalation"] = Field(
        "default", description="which generator answered: the configured one, or models.escalation's"
    )
    query: str | None = Field(description="the text used for retrieval, when a rewrite replaced the question")
    temperature: float | None = Field(description="generator temperature (null: the configured one)")
    max_tokens: int | None = Field(description="most tokens generated (null: the configured number)")
    stop: list[str] | None = Field(None, description="sequences that end the answer (null: none)")
    seed: int | None = Field(None, description="sampling seed (null: the configured one)")
    instructions: str | None = Field(
        None, description="a chat's system/developer messages: the answer's style and language"
    )


class StageTimings(BaseModel):
    """Seconds per stage of one pass."""

    retrieve_s: float
    rerank_s: float
    generate_s: float
    first_token_s: float | None = Field(
        None,
        description="of generate_s, the seconds to the generator's first piece of text (the prompt's "
        "evaluation and one token); streamed requests only, else null",
    )


class Answer(BaseModel):
    """One pass's answer (in a repair trace: the second pass)."""

    query: str
    response: str
    evidence: list[Passage]
    config: RAGConfig
    timings: StageTimings
    model: str
    prompt_tokens: int
    completion_tokens: int
    index_generation: str
    finish_reason: str | None = Field(description="the generator's: stop, length...")


class PurposeUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    calls: int = Field(description="generator calls of this purpose")


class TokenUsage(BaseModel):
    """Every generator call of the request: the first pass, query rewrites, the repair pass."""

    prompt_tokens: int = Field(description="all the request's generator calls together")
    completion_tokens: int = Field(description="all the request's generator calls together")
    by_purpose: dict[str, PurposeUsage] = Field(
        default_factory=dict,
        description="the same split by purpose: answer (first pass), repair (the repair pass), "
        "rewrite (a query rewrite), condense (a follow-up made standalone), other",
    )


# --- the diagnosis (docs/diagnosis.md) ---------------------------------------------------------


class PassageScores(BaseModel):
    """One passage (or the joint premise) against one hypothesis: calibrated NLI probabilities."""

    passage: str = Field(
        description='the passage id, or "joint" for the two passages read together for this hypothesis'
    )
    entail: float
    neutral: float
    contradict: float
    truncated: bool
    joined: list[str] = Field(
        description='the passages a "joint" premise reads together; empty for a single passage'
    )


class HypothesisVerdict(BaseModel):
    """A hypothesis (the query statement, or one claim of the answer) over all passages."""

    hypothesis: str
    state: NLIState
    best_passage: str | None = Field(description="the passage that decided the state (null when neutral)")
    scores: list[PassageScores]
    p_unsupported: float | None = Field(
        description="an answer claim's calibrated probability of being unsupported (null without a verdict)"
    )


class UnsupportedSpan(BaseModel):
    """A character range of the answer holding a claim the diagnosis found unsupported."""

    start: int = Field(description="the span's first character in the answer (0-based)")
    end: int = Field(description="one past its last character: the span is answer[start:end]")
    text: str = Field(description="the answer's text in the span")
    claim: int = Field(description="the claim it holds: an index into e_r.hypotheses")
    p_unsupported: float | None = Field(
        description="the claim's calibrated probability of being unsupported (null without a verdict)"
    )
    state: NLIState = Field(description="the claim's NLI state over the passages")


class NLISignal(BaseModel):
    """An NLI signal: e_q (does the evidence answer the question) or e_r (does it support the answer)."""

    state: NLIState
    hypotheses: list[HypothesisVerdict]
    construction: str = Field(description='how the hypothesis was built, or "claims" (e_r)')
    support: float | None = Field(
        description="the graded state: the mean over hypotheses of the best P(entail) a premise gives it"
    )


class TripleMatch(BaseModel):
    """A triple of the answer and the knowledge-graph triple it was aligned with."""

    triple: tuple[str, str, str]
    verdict: str = Field(
        description="consistent | conflict | missing | entailed (a conflict with a graph triple whose own "
        "passage entails the claim: the passage says both, and it counts as consistent)"
    )
    kg_triple: tuple[str, str, str] | None
    similarity: tuple[float, float, float] | None = Field(description="subject, relation, object")
    source: str = Field(description="the KG triple's node id")
    reason: str = Field(
        default="", description='why this verdict ("same subject and relation, another name")'
    )


class KGSignal(BaseModel):
    kappa: Kappa
    matches: list[TripleMatch]
    available: bool = Field(description="false: no knowledge graph was built for this index")


class EGCFeatures(BaseModel):
    """Evidence graph consistency: claim, evidence and question nodes joined by cosine edges."""

    coverage: float
    support_density: float
    agreement: float
    connectivity: float
    isolation: float
    score: float = Field(description="(coverage + support_density + connectivity - isolation) / 3")


class Verdict(BaseModel):
    """The calibrated verdict over every signal: the failure type follows it (docs/diagnosis.md)."""

    p_unsupported: float = Field(description="the answer's calibrated probability of being unsupported")
    threshold: float = Field(description="the operating point: unsupported when p_unsupported >= threshold")
    unsupported: bool = Field(
        description="p_unsupported >= threshold, or, in an answer of one sentence, a claim a passage "
        "contradicts at diagnosis.refute_threshold or more (features.refuted) and none entails as "
        "strongly, or "
        "an answer to a question no passage window entails at diagnosis.support_floor "
        "(features.backing)"
    )
    rule_failure: FailureType = Field(description="what Algorithm 1 over the discrete NLI states alone says")
    features: dict[str, float] = Field(description="every signal the verdict read, by name")
    profile: str = Field(
        "default",
        description="whose operating point (intercept and threshold) scored it: generated (the "
        "generator's own answers), claim (a claim given to check), response, or default",
    )
    unsupported_by: list[Literal["score", "refuted", "unbacked"]] = Field(
        default_factory=list,
        description="what made it unsupported: score (p_unsupported >= threshold), refuted "
        "(features.refuted), unbacked (features.backing); empty when supported",
    )


# What a check of the answer's pick found: the passages agree with it, disagree, or do not decide.
Outcome = Literal["agrees", "disagrees", "undecided"]


class Comparison(BaseModel):
    """A comparison in time ("Who is older, A or B?") checked against the passages' own dates."""

    alternatives: list[str] = Field(description="the two answers the question offers")
    direction: Literal["earlier", "later"] = Field(description="whether it asks for the earlier or the later")
    dates: list[str | None] = Field(
        description="each alternative's date (YYYY, YYYY-MM or YYYY-MM-DD) from the opening of its own "
        "passage; null: no passage of its own, or no date there"
    )
    expected: int | None = Field(
        description="the alternative (0 or 1) the dates pick; null: they do not decide"
    )
    picked: int = Field(description="the alternative (0 or 1) the answer picks")
    from_corpus: list[bool] = Field(
        description="for each date, whether it was read from the alternative's own page in the corpus "
        "(the retrieval had not returned it) rather than from the retrieved passages"
    )
    outcome: Outcome = Field(
        description="disagrees: the answer is WR; agrees: a one-claim answer is NoFailure"
    )


class Alternatives(BaseModel):
    """A choice of attribute ("Which company is based in Kentucky, A or B?") checked against the
    alternative the answer did not pick."""

    alternatives: list[str] = Field(description="the two answers the question offers")
    picked: int = Field(description="the alternative (0 or 1) the answer picks")
    support: list[float] = Field(
        description="for each alternative, the best single passage's P(entailment) of the answer's "
        "claim naming it (the answer as given for the pick, the other alternative in its place)"
    )
    outcome: Outcome = Field(
        description="disagrees (the passages support the other alternative, not the pick): the answer is "
        "WR; agrees: they support the pick, not the other; undecided: both or neither"
    )


class ConflictSide(BaseModel):
    """The passages that give one answer to the question, and what they say."""

    passages: list[str] = Field(description="their ids (in `evidence`)")
    says: str = Field(
        description="what this side's passages say: the sentence quoted from them that entails the "
        "answer's claim most (the answer's side) or contradicts it most (the other)"
    )
    takes_answer: bool = Field(description="the side the answer took")
    trust: float | None = Field(
        None,
        description="the sum of its passages' source trust levels (a document's trust at ingest); "
        "null where any of them has none",
    )


class EvidenceConflict(BaseModel):
    """Incompatible answers in the evidence (docs/diagnosis.md, "When the sources disagree")."""

    claim: str = Field(description="the claim of the answer one side entails and the other contradicts")
    sides: list[ConflictSide]
    strength: float = Field(description="min(the best entailment, the best contradiction) of the two sides")


class FailureStep(BaseModel):
    """One rule of the failure decision that applies, and the failure type it decides."""

    step: RuleName = Field(description='the rule\'s name (docs/diagnosis.md, "The failure type")')
    failure: FailureType


class Diagnosis(BaseModel):
    """The diagnosis of one answer (docs/diagnosis.md)."""

    mode: Mode
    e_q: NLISignal
    e_r: NLISignal
    kg: KGSignal
    failure: FailureType
    egc: EGCFeatures
    evidence_conflict: bool = Field(description="the evidence holds incompatible answers (see `conflict`)")
    stage: Stage
    stage_reason: str
    label: str | None = Field(description="the task label read from the answer (claim mode)")
    final_label: str | None = Field(description="the label, or the abstention when the evidence gate closes")
    timings: dict[str, float] = Field(description="seconds per diagnosis step")
    verdict: Verdict | None = Field(description="the calibrated verdict (null: diagnosis.verdict is off)")
    off_question: OffQuestion | None = Field(
        default=None,
        description="what of the question the answer does not address (its subject: an answer about "
        "someone else; its relation: born when asked founded; kind: no date when asked when, no "
        "number when asked how many; year: it dates otherwise what the question dated, as in a 2008 "
        "film for a 2016 one; restated: it only repeats the question's words; choice: it names "
        "neither of the answers the question offers); such an answer is WR. Null: it does",
    )
    comparison: Comparison | None = Field(
        default=None, description="a comparison in time checked against the passages' dates; null: none"
    )
    alternatives: Alternatives | None = Field(
        default=None,
        description="a choice of attribute checked against the alternative not picked; null: none",
    )
    failure_steps: list[FailureStep] = Field(
        default_factory=list,
        description="how the failure type was decided: every rule that applies, in the table's "
        "order, with the type it decides; the first one decided",
    )
    decided_by: RuleName | None = Field(
        default=None, description="the rule that decided the failure type (null: not judged)"
    )
    grade: Grade | None = Field(
        default=None,
        description="how sure a failure is: confident (the answer is replaced by its repair, abstention "
        "or correction) or uncertain (the answer stays, its unsupported sentences marked); null: no "
        "failure",
    )
    language: str = Field(
        "en",
        description="the language the question and the answer read as (ISO 639-1; und: nothing to "
        "tell, such as a bare number)",
    )
    not_judged: str | None = Field(
        default=None,
        description="why the answer was not judged (the question or the answer is not English: the "
        "diagnosis reads English only); its failure is then NoFailure, since nothing was checked, and "
        "no repair follows. Null: it was judged",
    )
    unsupported_spans: list[UnsupportedSpan] = Field(
        default_factory=list,
        description="where the answer is unsupported, for an answer that fails: each claim whose own "
        "P(unsupported) reaches the verdict's threshold (without a verdict: each claim no passage "
        "entails), else its weakest claim, located in the answer (a sentence, or the sentence an "
        "atomic claim came from; a bare answer: the whole answer). Empty when the answer passes or "
        "was not judged",
    )
    conflict: EvidenceConflict | None = Field(
        default=None,
        description="the evidence holds incompatible answers to the question: one passage entails a "
        "claim of the answer and another contradicts it at diagnosis.conflict_threshold; which "
        "passages hold which side, and what each says. The answer is then not reported as supported "
        "(failure WR, step conflict), and the user reads both sides. Null: no such conflict",
    )


# --- the repair (docs/repair.md) ---------------------------------------------------------------


class Decision(BaseModel):
    """The policy's selection: every feasible arm's score, split into exploitation and exploration."""

    arm: str
    kind: PolicyKind
    scores: dict[str, float] = Field(description="feasible arm -> the score that was maximised")
    exploit: dict[str, float]
    explore: dict[str, float]
    seed: int = Field(description="the seed of this decision's random draws")
    masked: list[str] = Field(description="arms not weighed: not feasible, or disabled")


class Masked(BaseModel):
    """An action left out of the choice, and why."""

    name: str
    reason: str


class Cost(BaseModel):
    """The measured cost of the repair pass."""

    latency_s: float
    memory_bytes: int | None = Field(description="peak memory growth during the pass; null: not measured")
    memory_source: MemorySource
    nvml: str = Field(description='"available" or "unavailable: <why>"')
    device_used_before: int | None
    device_used_after: int | None
    device_peak: int | None
    torch_cuda_peak_bytes: int | None
    replayed_s: float = Field(description="of latency_s, generations served from the cache")
    waited_s: float = Field(
        0.0,
        description="of latency_s, the waits for the cores other requests' work held (an in-process "
        "generation, a retrieval's or a diagnosis' turn: the server's load; the router learns a "
        "plan's cost without it)",
    )


class Budgets(BaseModel):
    latency_s: float
    memory_bytes: float


class Reward(BaseModel):
    """The repair's reward (docs/policy.md)."""

    total: float = Field(description="quality * latency_factor * memory_factor")
    quality: float
    no_failure: bool
    kg_consistent: bool
    response_entailed: bool
    latency_factor: float
    memory_factor: float
    memory_measured: bool
    violated: list[str] = Field(description='"latency" and/or "memory": costs over their budget')
    variant: RewardVariant
    latency_s: float
    memory_bytes: float | None
    budgets: Budgets


HIDDEN = "null: the policy's internals are shown only to admin keys (server.show_policy_internals)"


class RepairTrace(BaseModel):
    """What one repair did."""

    action: str | None = Field(description=f"the action the policy chose; {HIDDEN}")
    failure: str = Field(description="the failure type that was repaired")
    decision: Decision | None = Field(description=f"the policy's selection; {HIDDEN}")
    masked: list[Masked]
    config: RAGConfig = Field(description="the patched configuration")
    answer: Answer = Field(description="the second pass")
    diagnosis: Diagnosis = Field(description="of the second pass")
    cost: Cost
    reward: Reward
    learned: bool = Field(description="the policy was updated (learn mode)")
    kept: str = Field(
        description='which answer the reply carries: "repaired" (the second pass\'s), "original" (the first; '
        'no_repair keeps it), "abstained" (the abstain action: the sources do not answer) or "conflict" '
        "(present_conflict: the answer reads as both sides of the evidence's conflict)"
    )
    success: bool = Field(
        description="the failure is gone after the repair (abstain and present_conflict: they were chosen)"
    )
    latency_budget_s: float = Field(description="what the action was allowed")
    over_budget: list[str] = Field(
        description='budgets the pass overran: "action_latency", "action_memory", "request"'
    )


class RepairSkip(BaseModel):
    """Why no repair ran for a failed answer, or why the one that started was abandoned."""

    reason: str
    masked: list[Masked]
    timed_out: bool = Field(description="the repair pass was abandoned: a generator call timed out")
    action: str | None = Field(description=f"with timed_out: the action that was chosen; {HIDDEN}")


class Route(BaseModel):
    """The first pass's plan (docs/policy.md, "The router"): what the router chose before any
    answer existed, with every offered plan's score, and what it then learned; or who fixed it."""

    plan: str | None = Field(
        description="The plan the first pass ran on (generator x retrieval); null: the rag section's "
        "configured pass (the router did not choose), or the router chose and the policy's internals "
        "are shown only to admin keys (server.show_policy_internals)."
    )
    chosen_by: Literal["router", "request", "off", "nothing_fits"] = Field(
        description="router: the router chose; request: the request's config set a plan key; off: "
        "router.enabled is false; nothing_fits: no enabled plan fits the request's time left."
    )
    kind: str = Field(description="The question's kind (claim, choice, yes_no, who, what, ...).")
    decision: Decision | None = Field(
        description="The router's selection; null when it did not choose, or for a key that is not an "
        "admin's (server.show_policy_internals)."
    )
    masked: list[Masked] = Field(description="Plans left out of the choice, and why.")
    expected_s: float | None = Field(description="What the chosen plan's pass was expected to take.")
    cost: Cost | None = Field(description="The first pass as measured (retrieval and generation).")
    reward: Reward | None = Field(
        description="Eq. 2 of the first answer's diagnosis at the pass's cost: what the router learned."
    )
    learned: bool = Field(description="The router was updated (learn mode).")


# --- /v1/answer: the response ------------------------------------------------------------------


class CitedSentence(BaseModel):
    text: str
    passages: list[int] = Field(description="1-based numbers in `evidence` of the passages supporting it")
    supported: bool | None = Field(description="null: the diagnosis did not judge this sentence")


class AnswerResponse(BaseModel):
    id: str = Field(
        "",
        description="The answer's id, for POST /v1/feedback (a chat completion's own id in its extension).",
    )
    query: str
    answer: str = Field(
        description="What the user reads: the generated answer with [n] citation markers on the "
        "sentences the diagnosis supports and, when it is still unsupported, what server.answer_policy "
        "says (docs/api.md)."
    )
    generated: str = Field("", description="The generator's text as it came (no markers, no note).")
    citations: list[CitedSentence] = Field(
        default_factory=list, description="Each sentence of the answer with the passages supporting it."
    )
    answer_policy: str | None = Field(
        None,
        description="marked when an uncertain failure left the answer in place, its unsupported "
        "sentences marked (a generator's abstention the sources may answer: followed by the note naming "
        "them); annotate or abstain when the final answer failed and the policy changed what "
        "is read; conflict when its evidence holds incompatible answers and it reads as both sides; "
        "gated in claim mode when the label was gated; not_judged when the diagnosis could not judge "
        "the answer (not English) and it is kept with the note saying so; withheld when such an answer "
        "is not shown (server.answer_policy abstain); else null.",
    )
    answer_note: str | None = Field(
        None,
        description="annotate: the sentence added saying the sources do not support the answer; "
        "marked: the one saying how sure the check is, or that the sources found may answer the question "
        "and what was found; not_judged: the one saying it was not checked.",
    )
    status: str | None = Field(
        None,
        description="One line on how the diagnosis judged the answer, as a chat client shows it above "
        "the reply: 'Consistent with the retrieved sources ...' says only that (the sources are read "
        "as given, and a wrong or planted document passes), 'Checked: not supported by the retrieved "
        "sources', 'Not checked against the retrieved sources ...' (not English); null: no diagnosis.",
    )
    abstained_by: Literal["repair", "answer_policy"] | None = Field(
        None,
        description="Who said that the sources do not answer: the repair policy's abstain action, or "
        "server.answer_policy (abstain) on a final answer still unsupported; null: no abstention.",
    )
    conflict_by: Literal["repair", "answer_policy"] | None = Field(
        None,
        description="Who presented both sides of a conflict in the evidence: the repair policy's "
        "present_conflict action, or server.answer_policy's reading of a conflict; null: not presented.",
    )
    evidence: list[Passage]
    config: RAGConfig
    timings: StageTimings
    model: str
    usage: TokenUsage
    index_generation: str
    condensed_from: str | None = Field(
        None,
        description="A follow-up as asked, when the conversation made it standalone: `query` is "
        "then the condensed question that was retrieved, answered and diagnosed.",
    )
    diagnosis: Diagnosis | None = Field(
        description="The diagnosis of this answer: e_q, e_r (passage-level scores), kappa with the "
        "matched KG triples, failure type, EGC features, evidence conflict, stage, seconds per step.",
    )
    first_diagnosis: Diagnosis | None = Field(
        description="When a repair ran: the diagnosis of the first answer."
    )
    route: Route | None = Field(
        None, description="The first pass's plan: who chose it, the router's scores, its cost and reward."
    )
    repair: RepairTrace | RepairSkip | None = Field(
        description="When the first answer failed: the action the policy chose (with every arm's "
        "score and the masked ones), the patched configuration, the second pass and its diagnosis, "
        "its measured cost, the reward, and which answer the reply carries; or why no repair ran.",
    )
    second_repair: RepairTrace | RepairSkip | None = Field(
        None,
        description="The one more repair policy.extra_repairs allows when the first repair's answer "
        "still failed (the actions not tried yet); null: none ran.",
    )
    seconds: float = Field(description="The whole request: first pass, diagnosis and repair.")
    generator_seconds: float = Field(
        description="Of `seconds`, the time in generator calls (first pass, query rewrites, repair "
        "pass), the wait for the in-process model included; the rest is ragmend's own work.",
    )


# --- /readyz -----------------------------------------------------------------------------------


class ReadyStatus(BaseModel):
    ready: bool
    models: dict[str, bool] = Field(description="model role -> loaded")
    index: str | None = Field(description="the open index generation; null: none open yet")
    error: str | None = Field(description="why loading failed; null: it did not")


# --- /admin ------------------------------------------------------------------------------------


class ScaledBudgets(BaseModel):
    """The per-action budgets times budget_scale: what a repair pass is allowed."""

    latency_s: float
    memory_bytes: float = Field(description="accelerator memory (NVML)")
    rss_memory_bytes: float = Field(description="host resident-set growth, without a GPU")


class PolicyBudgets(BaseModel):
    latency_budget_s: float
    memory_budget_bytes: int
    rss_memory_budget_bytes: int
    request_latency_budget_s: float
    budget_scale: float
    scaled: ScaledBudgets


class ArmView(BaseModel):
    enabled: bool
    pulls: int
    mean_reward: float | None = Field(description="null before the arm's first update")
    successes: int
    failures: int


class PolicyView(BaseModel):
    """The repair policy: the settings in force and every arm's statistics."""

    kind: PolicyKind
    alpha: float | None = Field(description="LinUCB's exploration weight; null for the other kinds")
    learn: bool
    mode: Literal["learn", "frozen"]
    repair: bool
    refresh_cooldown_s: float
    enabled_actions: list[str]
    budgets: PolicyBudgets
    arms: dict[str, ArmView]


class PolicyChange(PolicyView):
    """The policy after a change, and the settings the change set."""

    changed: list[str] = Field(description="the settings changed, e.g. policy.alpha")


class IndexRefresh(BaseModel):
    """The refreshed index: what changed and where the time went."""

    generation: str
    documents: int
    added: int
    updated: int
    unchanged: int
    removed: int
    chunks: int
    embedded_chunks: int
    seconds: float
    chunk_s: float
    embed_s: float
    write_s: float
    chunks_per_s: float


class CollectionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description="1-40 lower-case letters, digits or _, starting with a letter (not 'default').",
        pattern=r"^[a-z][a-z0-9_]{0,39}$",
        examples=["handbook"],
    )
    sources: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        default=[],
        max_length=100,
        description="Paths on the server its index refresh reads (directories, files, JSONL); empty: "
        "only documents sent over HTTP.",
    )
    policy: Literal["shared", "own"] = Field(
        default="shared",
        description="shared: its repairs teach the default policy; own: a policy of its own.",
    )


class CollectionView(BaseModel):
    name: str = Field(description="'default' for the default corpus.")
    model: str = Field(description="The model name that selects it in chat and /v1/answer.")
    sources: list[str]
    policy: Literal["shared", "own"]
    declared: bool = Field(description="Declared in the configuration (not deletable over HTTP).")
    documents: int
    generation: str | None = Field(description="Its index's current generation; null: no documents yet.")


class CollectionList(BaseModel):
    data: list[CollectionView]


class DocumentView(BaseModel):
    id: str
    title: str
    source: str = Field(description="The source path it was read from, or 'http' when sent over HTTP.")
    chunks: int


class DocumentList(BaseModel):
    collection: str
    generation: str | None
    data: list[DocumentView]


class ConfigView(BaseModel):
    config_file: str | None = Field(description="the file the settings came from; null: none")
    settings: dict[str, Any] = Field(description="the effective settings, secrets redacted")


# --- errors (every route) ----------------------------------------------------------------------


class ErrorBody(BaseModel):
    message: str = Field(description="What is wrong, naming the field where one is at fault.")
    type: ApiErrorType = Field(description="OpenAI's error type (docs/api.md, Errors).")
    param: str | None = Field(
        default=None, description="Only with code model_not_found: the request field at fault (or null)."
    )
    code: int | str = Field(
        description="The HTTP status, or OpenAI's code where one applies (model_not_found)."
    )
    error_class: str | None = Field(
        default=None,
        description="The ragmend error class (InputError, NotReady, Overloaded...), when the error is "
        "one; absent for errors of the HTTP layer (validation, auth, unknown path...).",
    )


class ErrorResponse(BaseModel):
    """The body of every error response, on every route (OpenAI's shape)."""

    error: ErrorBody


# --- /v1/feedback -------------------------------------------------------------------------------


class FeedbackRequest(BaseModel):
    """A user's vote on one answer: a score in [0, 1], or thumbs up / down (1 / 0)."""

    model_config = ConfigDict(extra="forbid")

    response_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The answer's id: `id` of a /v1/answer reply or of a chat completion (chatcmpl-...).",
    )
    message_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Or the chat client's id of the message that showed the answer (sent in "
        "server.message_id_header with the request): the latest answer shown under it.",
    )
    score: float | None = Field(None, ge=0.0, le=1.0, description="How good the answer was, 0 to 1.")
    rating: Literal["up", "down"] | None = Field(None, description="Thumbs up (1) or down (0).")
    comment: str | None = Field(None, max_length=4000, description="Kept with the vote; not learned from.")

    @model_validator(mode="after")
    def _one_vote(self) -> FeedbackRequest:
        if (self.score is None) == (self.rating is None):
            raise ValueError("give either score (0 to 1) or rating (up or down), not both and not neither")
        if (self.response_id is None) == (self.message_id is None):
            raise ValueError("name the answer by response_id or by message_id, one of the two")
        return self

    @property
    def value(self) -> float:
        if self.score is not None:
            return self.score
        return 1.0 if self.rating == "up" else 0.0


NotLearned = Literal["already_recorded", "request_options", "nothing_to_credit", "key_share", "not_learning"]


class FeedbackResponse(BaseModel):
    response_id: str
    score: float = Field(description="The vote as a score in [0, 1].")
    recorded: bool = Field(description="False: this very vote was already recorded, and nothing changed.")
    credited: str | None = Field(
        description="The repair action the vote was learned for (the one that decided the answer); "
        "null: the answer had no repair decision, or the key is not an admin's "
        "(server.show_policy_internals)."
    )
    credited_plan: str | None = Field(
        None,
        description="The router's plan the vote was learned for (the reply was its first pass's own "
        "answer); null: no routed answer to credit, or the key is not an admin's.",
    )
    reward: float | None = Field(description="The delayed reward learned: score x the repair's cost factors.")
    learned: bool = Field(description="The policy was updated; false: `not_learned` says why.")
    not_learned: NotLearned | None = Field(
        None,
        description="Why the vote, recorded, taught nothing: already_recorded (this very vote was), "
        "request_options (the answer's request set its own generation options: max_tokens, stop, "
        "temperature, seed, a prompt, instructions, retrieval), nothing_to_credit (no repair decision "
        "or routed pass made the answer), key_share (this key holds server.feedback_max_share of the "
        "latest learned votes), not_learning (policy.learn or router.learn is off, or the answer's "
        "context is of an earlier layout); null: learned.",
    )
