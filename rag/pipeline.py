"""answer(query, config): retrieve -> (rerank) -> generate, timed per stage; `read` alone is the
retrieval and the evidence block, which a caller may take first and hand to `answer`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragmend.errors import InputError
from ragmend.models.generation import Purpose
from ragmend.models.registry import ModelRegistry
from ragmend.rag.evidence import Embedder, Splitter, best_sentence, compact_context, focused_context, numbered
from ragmend.rag.prompts import answer_messages, answer_prompt
from ragmend.rag.retrieval import SnapshotRetriever, rerank
from ragmend.rag.store import IndexBackend, Snapshot
from ragmend.rag.types import Answer, Passage, RAGConfig, StageTimings
from ragmend.settings import CONTEXT_TOKENS, Settings
from ragmend.text import validate_query

# Passages a second retrieval hop adds (the rest of the k stay the first hop's best).
HOP_PASSAGES = 2


@dataclass(frozen=True, kw_only=True)
class Retrieved:
    """One pass's retrieval before any generation: the passages its prompt reads (what the
    diagnosis judges against), their evidence block, and for which retrieval (RAGConfig.retrieval)."""

    query: str
    retrieval: tuple[Any, ...]
    passages: tuple[Passage, ...]
    context: str
    timings: StageTimings
    index_generation: str


class IndexHandle:
    """The live snapshot. Swapping replaces one reference: readers keep the snapshot they took."""

    def __init__(self, store: IndexBackend, embed_model: object):
        self.store = store
        self._embed_model = embed_model
        self._lock = threading.Lock()
        self._retriever: SnapshotRetriever | None = None

    def open(self) -> SnapshotRetriever:
        """Load the current generation (raises IndexMissing when there is none)."""
        with self._lock:
            snapshot = self.store.load()
            self._retriever = SnapshotRetriever(snapshot, self._embed_model)
            return self._retriever

    def reload_if_changed(self) -> bool:
        """Pick up a generation another process (`ragmend ingest`) made current. One small read."""
        current = self.store.current_generation()
        r = self._retriever
        if r is not None and current is None:
            # Every generation is gone (a collection another replica deleted): nothing is left
            # to serve; the handle is closed and the caller finds the store empty.
            with self._lock:
                self._retriever = None
            return False
        if r is None or current is None or current == r.snapshot.generation:
            return False
        with self._lock:
            r = self._retriever
            if r is not None and current == r.snapshot.generation:
                return False  # another request reloaded it meanwhile
            self._retriever = SnapshotRetriever(self.store.load(), self._embed_model)
        return True

    @property
    def retriever(self) -> SnapshotRetriever:
        r = self._retriever
        return r if r is not None else self.open()

    @property
    def snapshot(self) -> Snapshot:
        return self.retriever.snapshot

    @property
    def is_open(self) -> bool:
        return self._retriever is not None


def format_context(passages: list[Passage], max_chars: int) -> tuple[str, list[Passage]]:
    """Number the passages into a context block; drop those past the budget (the first is truncated)."""
    parts: list[str] = []
    used: list[Passage] = []
    total = 0
    for i, p in enumerate(passages, start=1):
        block = numbered(i, p.title, p.text)
        if total + len(block) > max_chars:
            if used:
                break
            block = block[:max_chars]
        parts.append(block)
        used.append(p)
        total += len(block) + 2
    return "\n\n".join(parts), used


class Pipeline:
    """`split`: the sentence splitter the compact prompt reads passages with (the diagnosis's, so
    both cut a passage alike); `embed`: unit-length embeddings to score sentences with. Without
    either, the prompt holds the passages whole."""

    def __init__(
        self,
        settings: Settings,
        models: ModelRegistry,
        index: IndexHandle,
        split: Splitter | None = None,
        embed: Embedder | None = None,
    ):
        self.settings = settings
        self.models = models
        self.index = index
        self._split = split
        self._embed = embed

    def default_config(self) -> RAGConfig:
        return RAGConfig.from_settings(self.settings.rag)

    def retrieve(
        self, query: str, config: RAGConfig, retriever: SnapshotRetriever | None = None
    ) -> tuple[list[Passage], StageTimings]:
        retriever = retriever or self.index.retriever
        search = config.query or query
        t0 = time.perf_counter()
        passages = retriever.retrieve(search, config.mode, config.k)
        t1 = time.perf_counter()
        if config.rerank:
            passages = rerank(self.models.reranker, search, passages, config.rerank_top_n)
        t2 = time.perf_counter()
        timings = StageTimings(retrieve_s=t1 - t0, rerank_s=t2 - t1 if config.rerank else 0.0)
        if config.hops == 2 and passages and self._split is not None:
            passages, hop_s = self._second_hop(search, passages, config, retriever)
            timings = timings.model_copy(update={"retrieve_s": timings.retrieve_s + hop_s})
        return passages, timings

    def _second_hop(
        self, search: str, passages: list[Passage], config: RAGConfig, retriever: SnapshotRetriever
    ) -> tuple[list[Passage], float]:
        """A multi-hop question's second passage is about something the first hop's passages
        name (the bridge), not about the question's own words: retrieve again with the best
        sentence of the first hop beside the question, and keep that sentence's passage first,
        then the new documents, then the rest of the first hop, k in all."""
        assert self._split is not None
        t0 = time.perf_counter()
        rank, bridge = best_sentence(search, passages, self._split, self.models.reranker.score)
        seen = {p.doc_id for p in passages}
        found = retriever.retrieve(f"{search} {bridge}", config.mode, config.k + len(seen))
        more = [p for p in found if p.doc_id not in seen][:HOP_PASSAGES]
        rest = [p for i, p in enumerate(passages) if i != rank]
        return [passages[rank], *more, *rest][: max(config.k, 1 + len(more))], time.perf_counter() - t0

    def context(self, question: str, passages: list[Passage], config: RAGConfig) -> tuple[str, list[Passage]]:
        """The prompt's evidence block and the passages it stands for (what the diagnosis
        judges against, whole): the sentences closest to the question within the config's token
        budget, or the passages whole up to max_context_chars."""
        context, used = format_context(passages, self.settings.rag.max_context_chars)
        if not used:
            return "(no passages found)", used
        if config.evidence == "focus" and self._split is not None:
            budget = config.context_tokens or CONTEXT_TOKENS
            context = focused_context(
                question, used, budget_tokens=budget, split=self._split, score=self.models.reranker.score
            )
        elif config.context_tokens and self._split is not None and self._embed is not None:
            context = compact_context(
                question, used, budget_tokens=config.context_tokens, split=self._split, embed=self._embed
            )
        return context, used

    def read(self, query: str, config: RAGConfig) -> Retrieved:
        """The retrieval of a pass of `config`, on one index snapshot, and its evidence block."""
        query = validate_query(query, self.settings.rag.max_query_chars)
        retriever = self.index.retriever  # one snapshot for the whole request
        # The retrieval's encoders (query embedding, reranker) take their turn on the cores with
        # the generations, as the diagnosis does (ModelRegistry.turn_on_the_cores).
        with self.models.turn_on_the_cores("retrieval"):
            passages, timings = self.retrieve(query, config, retriever)
            context, used = self.context(query, passages, config)
        return Retrieved(
            query=query,
            retrieval=config.retrieval(),
            passages=tuple(used),
            context=context,
            timings=timings,
            index_generation=retriever.snapshot.generation,
        )

    def answer(
        self,
        query: str,
        config: RAGConfig | None = None,
        purpose: Purpose = "answer",
        on_text: Callable[[str], None] | None = None,
        retrieved: Retrieved | None = None,
    ) -> Answer:
        """One pass: retrieve, generate. `purpose`: what its generator call is counted as (the
        first pass's answer, or a repair pass's); `on_text`: each piece of the answer as the
        generator makes it (a streamed request); `retrieved`: this pass's retrieval read already
        (`read`), used where it is the same query's and the same retrieval's, else read again."""
        query = validate_query(query, self.settings.rag.max_query_chars)
        config = config or self.default_config()
        template = answer_prompt(config.prompt)
        if retrieved is None or retrieved.query != query or retrieved.retrieval != config.retrieval():
            retrieved = self.read(query, config)
        generator = self.models.generator
        if config.generator == "escalation":
            escalation = self.models.escalation
            if escalation is None:
                raise InputError("config.generator: escalation needs models.escalation configured")
            generator = escalation
        out = generator.chat(
            answer_messages(
                template,
                config.instructions,
                focus=config.evidence == "focus",
                context=retrieved.context,
                question=query,
            ),
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            stop=list(config.stop) if config.stop else None,
            seed=config.seed,
            purpose=purpose,
            on_text=on_text,
        )
        return Answer(
            query=query,
            response=out.text,
            evidence=retrieved.passages,
            config=config,
            timings=retrieved.timings.model_copy(
                update={"generate_s": out.seconds, "first_token_s": out.first_token_s}
            ),
            model=out.model,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            index_generation=retrieved.index_generation,
            finish_reason=out.finish_reason,
            token_logprobs=out.token_logprobs,
        )
