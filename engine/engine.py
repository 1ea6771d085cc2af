"""Engine: one object the server and the CLI talk to."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ragmend import cancel, clock
from ragmend.actions.catalogue import ACTION_NAMES
from ragmend.actions.meter import Cost, CostMeter
from ragmend.diagnosis.answerability import open_answerability
from ragmend.diagnosis.diagnoser import Diagnoser, EvidenceReading
from ragmend.diagnosis.hypotheses import split_sentences
from ragmend.diagnosis.options import options_from_settings
from ragmend.diagnosis.types import Diagnosis, Mode
from ragmend.diagnosis.verdict import open_verdict
from ragmend.engine.corpus import DEFAULT_NAMESPACE, Corpus
from ragmend.engine.events import emit_answer
from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import Kept, Repairer, RepairTrace, check_policy_actions
from ragmend.engine.router import Route, Router, check_plans
from ragmend.engine.services import EngineServices, refers_back
from ragmend.engine.tunables import ENGINE_LIVE_KEYS, changed_keys, with_keys
from ragmend.errors import Cancelled, ConfigError, InputError, NotReady
from ragmend.instrumentation import NO_EVENTS, Events
from ragmend.kg.phrases import Memoized, embed_with
from ragmend.models.generator import Generator, GeneratorTally
from ragmend.models.registry import ModelRegistry
from ragmend.policy import Policy, PolicyStore
from ragmend.policy.facade import make_store
from ragmend.rag.pipeline import Pipeline, Retrieved
from ragmend.rag.types import Answer, RAGConfig, Turn
from ragmend.settings import Settings, settings_with
from ragmend.text import validate_query

log = logging.getLogger("ragmend.engine")
# The plan a pass of the rag section's defaults resembles most, and what such a pass takes before
# any is measured: the prior of a plan the router has not measured yet.
DEFAULT_PLAN = "default_hybrid"
BASE_PASS_S = 2.0
# Told of every applied change of the tunable settings: (the new settings, the live keys).
TunablesListener = Callable[[Settings, Collection[str]], None]


@contextlib.contextmanager
def _tally(generator: Generator | None) -> Iterator[GeneratorTally]:
    """The generator's tally of this thread's calls, or an empty one where there is none."""
    if generator is None:
        yield GeneratorTally()
        return
    with generator.tally() as tally:
        yield tally


def open_policy(
    settings: Settings, store: PolicyStore | None = None, namespace: str = DEFAULT_NAMESPACE
) -> Policy:
    """The configured repair policy over every action of the catalogue (the CLI's policy commands
    and the engine open it the same way); `namespace`: a collection's own policy in PostgreSQL."""
    return Policy.from_settings(settings, ACTION_NAMES, store or make_store(settings, namespace))


class Engine:
    def __init__(
        self,
        settings: Settings,
        models: ModelRegistry | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        policy: Policy | None = None,
        router: Router | None = None,
    ):
        """One corpus's engine. A collection's (engine/collections.py) has its `namespace` in the
        shared stores, shares the default engine's `models` and, unless it has its own, `policy`
        and `router`."""
        self.settings = settings
        self.models = models or ModelRegistry(settings)
        self.namespace = namespace
        self._ready = threading.Event()
        self.corpus = Corpus(settings, self.models, namespace, self._ready)
        self._pipeline: Pipeline | None = None
        self._diagnoser: Diagnoser | None = None
        self._repairer: Repairer | None = None
        self._policy: Policy | None = policy
        self._owns_policy = policy is None  # a shared one is closed by its owner
        self._router: Router | None = router
        self._owns_router = router is None
        # The first pass's cost, which the router learns from: its own seconds, its waits for the
        # cores other requests' work held apart (under load they are the load, alike for every
        # plan; learned as a plan's cost they would steer the router by how busy the server is).
        self._meter = CostMeter(waited=self.models.cores_waited_s)
        self._tunables_listeners: list[TunablesListener] = []
        # Guards building the policy and replacing the settings (apply_tunables), so a change can
        # never land between a policy's construction from the old settings and its publication.
        self._settings_lock = threading.RLock()
        self._embed_fn: Callable[[list[str]], np.ndarray] | None = None
        self._repairer_lock = threading.Lock()
        check_policy_actions(settings.policy)
        check_plans(settings.router.plans)
        self._load_error: str | None = None

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            # The compact prompt cuts passages with the diagnosis's sentence splitter, so a
            # sentence the prompt shows is a sentence the diagnosis reads.
            self._pipeline = Pipeline(
                self.settings, self.models, self.corpus.index, split=split_sentences, embed=self._embed
            )
        return self._pipeline

    @property
    def diagnoser(self) -> Diagnoser:
        if self._diagnoser is None:
            self._diagnoser = Diagnoser(
                self.models.nli,
                self._embed,
                options_from_settings(self.settings),
                # Answerability (e_q under a verdict, the rerank construction); the pipeline
                # loads the reranker anyway, and the diagnosis reuses its scores where it ran.
                reranker=self.models.reranker,
                align_kg=self.corpus.kg.signal if self.corpus.kg is not None else None,
                stored_vectors=self.corpus.stored_vectors,
                titled=self.corpus.titled,
            )
        return self._diagnoser

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings for diagnosis (EGC) and the policy context."""
        if self._embed_fn is None:
            self._embed_fn = Memoized(embed_with(self.models.embeddings))
        return self._embed_fn(texts)

    @property
    def roles(self) -> tuple[str, ...]:
        """The model roles serving a request needs."""
        roles = ["embeddings", "reranker", "generator"]
        if self.models.has_escalation:
            roles.append("escalation")
        if self.settings.diagnosis.enabled:
            roles.append("nli")
        if self.corpus.kg is not None and self.settings.kg.extractor == "spacy":
            roles.append("spacy")
        return tuple(roles)

    def load(self, build_index: bool = True, roles: Sequence[str] | None = None) -> None:
        """Load the models and open the index (building it from the sources if there is none)."""
        try:
            if self.settings.diagnosis.enabled:
                # A verdict or answerability file that cannot be read fails the start, not the
                # first request (ConfigError: exit 2, /readyz says why).
                open_verdict(self.settings.diagnosis.verdict)
                open_answerability(self.settings.diagnosis.answerability)
            for role in self.roles if roles is None else roles:
                self.models.get(role)
            self.corpus.open(build_index)
            self._ready.set()
        except Exception as e:
            self._load_error = f"{type(e).__name__}: {e}"
            raise

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def load_error(self) -> str | None:
        return self._load_error

    def status(self) -> dict[str, Any]:
        """What the open readiness probe shows: a failed load by its kind only, since its text can
        name a database's host and user (the log has it whole)."""
        kind = None if self._load_error is None else self._load_error.split(":", 1)[0]
        return {
            "ready": self.ready,
            "models": {role: self.models.is_loaded(role) for role in self.roles},
            "index": self.corpus.generation,
            "error": None if kind is None else f"{kind} (the server's log has the detail)",
        }

    # -- work ---------------------------------------------------------------------------------

    def config(self, overrides: dict[str, Any] | None = None) -> RAGConfig:
        base = RAGConfig.from_settings(self.settings.rag)
        return base.patch(**overrides) if overrides else base

    def answer(
        self,
        query: str,
        overrides: dict[str, Any] | None = None,
        on_text: Callable[[str], None] | None = None,
        retrieved: Retrieved | None = None,
    ) -> Answer:
        """One pass; `retrieved`: its retrieval read already (Pipeline.read), else read here."""
        if not self.ready:
            raise NotReady("ragmend is still loading its models and index")
        self.corpus.for_request()
        return self.pipeline.answer(query, self.config(overrides), on_text=on_text, retrieved=retrieved)

    def diagnose(self, answer: Answer, reading: EvidenceReading | None = None) -> Diagnosis:
        """`reading`: the answer's evidence read before it existed (the router's), not read again."""
        mode: Mode = "claim" if answer.config.prompt == "claim" else "qa"
        with self.models.turn_on_the_cores("diagnosis"):
            return self.diagnoser.diagnose(
                answer.query,
                answer.evidence,
                answer.response,
                mode=mode,
                reranked=answer.config.rerank,
                token_logprobs=answer.token_logprobs,
                reading=reading,
            )

    def _read_shared_evidence(
        self, query: str, overrides: Mapping[str, Any] | None
    ) -> tuple[Retrieved | None, EvidenceReading | None]:
        """The retrieval every plan the router may offer shares, and its evidence read, where the
        router reads evidence before choosing (Router.shared_retrieval); (None, None) otherwise."""
        shared = self.router.shared_retrieval(overrides)
        if shared is None or not self.settings.diagnosis.enabled:
            return None, None
        self.corpus.for_request()
        config = self.config(shared)
        retrieved = self.pipeline.read(query, config)
        with self.models.turn_on_the_cores("diagnosis"):
            reading = self.diagnoser.read_evidence(query, retrieved.passages, reranked=config.rerank)
        return retrieved, reading

    @property
    def policy(self) -> Policy:
        """The repair policy over its stored state (built on first use; needs no model)."""
        with self._settings_lock:
            if self._policy is None:
                self._policy = open_policy(self.settings, namespace=self.namespace)
            return self._policy

    @property
    def router(self) -> Router:
        """The first-pass router over its stored state (built on first use)."""
        with self._settings_lock:
            if self._router is None:
                self._router = Router(
                    self.settings, self._embed, namespace=self.namespace, missing=self._missing_parts()
                )
            return self._router

    def _missing_parts(self) -> frozenset[str]:
        """The parts of the deployment an action or a plan may need that are not configured."""
        return frozenset() if self.settings.models.escalation else frozenset({"escalation"})

    @property
    def repairer(self) -> Repairer:
        with self._repairer_lock:
            if self._repairer is None:
                self._repairer = Repairer(
                    self.policy,
                    EngineServices(self),
                    answer=functools.partial(self.pipeline.answer, purpose="repair"),
                    diagnose=self.diagnose,
                    embed=self._embed,
                    meter=CostMeter(waited=self.models.cores_waited_s),
                    refresh_cooldown_s=self.settings.policy.refresh_cooldown_s,
                    missing=self._missing_parts(),
                )
            return self._repairer

    def respond(
        self,
        query: str,
        overrides: dict[str, Any] | None = None,
        history: Sequence[Turn] = (),
        on_text: Callable[[str], None] | None = None,
        events: Events = NO_EVENTS,
        learn: bool = True,
    ) -> Outcome:
        """One request: answer, diagnose, and when it failed, one budgeted repair (engine/repair.py).
        With a conversation's earlier turns in `history`, a follow-up is first made standalone
        (one short generator call, none for a first turn): the condensed question is what is
        retrieved, answered and diagnosed. `on_text` receives the first pass's answer as it is
        generated (a streamed request; a repair pass is not streamed). Once answered, what the
        request did is told to `events` (engine/events.py). `learn`: false serves the request as
        usual but updates neither the router nor the repair policy, nor their cost models (the
        server's choice for a request that shaped its own pass)."""
        if not self.ready:  # before the generator is touched: that would load it on this thread
            raise NotReady("ragmend is still loading its models and index")
        asked = validate_query(query, self.settings.rag.max_query_chars)
        escalation = self.models.escalation
        with self.models.generator.tally() as generated, _tally(escalation) as escalated:
            try:
                follow_up = any(turn.role == "user" for turn in history)
                if follow_up and refers_back(asked):
                    query = EngineServices(self).condense_query(asked, history)
                outcome = self._respond(query, overrides, on_text=on_text, follow_up=follow_up, learn=learn)
            except Cancelled as e:
                e.generator_s = generated.busy_s  # the generator's work for an answer nobody receives
                raise
        usage = dict(generated.usage)
        for purpose, tokens in escalated.usage.items():  # the stronger generator's calls count too
            usage[purpose] = usage[purpose].plus(tokens) if purpose in usage else tokens
        outcome = dataclasses.replace(
            outcome,
            generator_s=generated.seconds + escalated.seconds,
            generator_busy_s=generated.busy_s + escalated.busy_s,
            generator_roles=tuple(
                (role, t.busy_s, max(0.0, t.seconds - t.busy_s))
                for role, t in (("generator", generated), ("escalation", escalated))
                if t.calls
            ),
            usage=usage,
            condensed_from=asked if query != asked else None,
            collection=self.namespace,
            learn=learn,
        )
        emit_answer(events, outcome, self.settings.policy.request_latency_budget_s)
        return outcome

    def _respond(
        self,
        query: str,
        overrides: dict[str, Any] | None,
        on_text: Callable[[str], None] | None = None,
        follow_up: bool = False,
        learn: bool = True,
    ) -> Outcome:
        started = clock.now()
        request = cancel.current()  # checked between the stages (ragmend/cancel.py)
        request.check("retrieval")
        with self._meter.measure() as metered:
            retrieved, reading = self._read_shared_evidence(query, overrides)
            route = self._route(query, overrides, follow_up, reading)
            answer = self.answer(query, route.overrides(overrides), on_text, retrieved=retrieved)
        assert metered.cost is not None
        cost = metered.cost
        if not self.settings.diagnosis.enabled:
            seconds = clock.now() - started
            route = self._learned_route(route, None, cost, learn)
            return Outcome(answer=answer, diagnosis=None, seconds=seconds, first_pass_s=seconds, route=route)
        request.check("diagnosis")
        diagnosis = self.diagnose(answer, reading)
        first_pass_s = clock.now() - started
        route = self._learned_route(route, diagnosis, cost, learn)
        if not diagnosis.failed or not self.settings.policy.repair:
            return Outcome(
                answer=answer,
                diagnosis=diagnosis,
                seconds=first_pass_s,
                first_pass_s=first_pass_s,
                route=route,
            )
        request.check("repair")
        final, final_diagnosis, trace = self.repairer.repair(answer, diagnosis, started, learn=learn)
        second = None
        if (
            self.settings.policy.extra_repairs
            and isinstance(trace, RepairTrace)
            and trace.kept is not Kept.ABSTAINED
            and trace.action != "no_repair"  # it decided that repairing will not help
            and final_diagnosis.failed
        ):
            # One more, never a loop: the actions not tried yet, from the better answer so far,
            # within what the request's budgets and deadline leave.
            request.check("repair")
            final, final_diagnosis, second = self.repairer.repair(
                final, final_diagnosis, started, exclude={trace.action}, learn=learn
            )
        return Outcome(
            answer=final,
            diagnosis=final_diagnosis,
            first=answer,
            first_diagnosis=diagnosis,
            repair=trace,
            seconds=clock.now() - started,
            first_pass_s=first_pass_s,
            second_repair=second,
            route=route,
        )

    def _learned_route(self, route: Route, diagnosis: Diagnosis | None, cost: Cost, learn: bool) -> Route:
        """The first pass's route with its cost and, where the router chose and may learn from
        this request, what it learned."""
        if route.routed and learn:
            return self.router.learn(route, diagnosis, cost)
        return dataclasses.replace(route, cost=cost) if route.routed else route

    def explore_plans(self, query: str, overrides: dict[str, Any] | None = None) -> list[Outcome]:
        """Every enabled plan's first pass of `query`, each diagnosed and learned by the router
        as if it had chosen it (the warm start's full information: train/warm_start.py); no
        repair. Plans that need a part the deployment lacks are left out."""
        if not self.ready:
            raise NotReady("ragmend is still loading its models and index")
        router = self.router
        outcomes = []
        retrieved, reading = self._read_shared_evidence(query, overrides)
        p_answerable = reading.p_answerable if reading is not None else None
        for plan in router.policy.config.enabled_actions:
            if router.plan(plan).requires in router.missing:
                continue
            budget = self.settings.policy.request_latency_budget_s
            route = router.forced(query, overrides, plan, budget, p_answerable=p_answerable)
            with self._meter.measure() as metered:
                answer = self.answer(query, route.overrides(overrides), retrieved=retrieved)
            assert metered.cost is not None
            diagnosis = self.diagnose(answer, reading) if self.settings.diagnosis.enabled else None
            route = router.learn(route, diagnosis, metered.cost)
            outcomes.append(
                Outcome(answer=answer, diagnosis=diagnosis, seconds=metered.cost.latency_s, route=route)
            )
        return outcomes

    def _route(
        self,
        query: str,
        overrides: dict[str, Any] | None,
        follow_up: bool,
        reading: EvidenceReading | None,
    ) -> Route:
        """The first pass's plan (engine/router.py), within what the request's deadline and
        budget leave, knowing what `reading` says of the shared retrieval's evidence."""
        router = self.router
        time_left = min(cancel.current().remaining(), self.settings.policy.request_latency_budget_s)
        base = router.costs.expected_named(DEFAULT_PLAN)[0] or BASE_PASS_S
        return router.choose(
            query,
            overrides,
            follow_up=follow_up,
            time_left_s=time_left,
            base_pass_s=base,
            p_answerable=reading.p_answerable if reading is not None else None,
        )

    def apply_tunables(self, new: Settings, live: Collection[str] = ()) -> list[str]:
        """Apply the tunable part of `new` to the running engine; returns the keys applied.

        Tunable (engine.tunables.ENGINE_LIVE_KEYS): the policy's kind, alpha, learn, enabled
        actions and budgets, repair on/off and the refresh cool-down. `live`: more dotted keys the
        caller applies itself (the server's keys): copied into the engine's settings, which are the
        process's current ones. Any other change is NOT applied: a warning names it ("needs a
        restart") and the running value stays. All or nothing: an invalid change (an unknown
        action) raises ConfigError and changes nothing. Requests in flight keep the settings object
        they read; the policy changes under its lock.
        """
        with self._settings_lock:
            old = self.settings
            changed = changed_keys(old, new)
            applied = [k for k in changed if k in ENGINE_LIVE_KEYS or k in live]
            restart = [k for k in changed if k not in applied]
            if restart:
                log.warning(
                    "configuration change(s) not applied, they need a restart: %s", ", ".join(restart)
                )
            if not applied:
                return []
            merged = with_keys(old, new, applied)
            check_policy_actions(merged.policy)
            check_plans(merged.router.plans)
            policy_keys = [
                k.removeprefix("policy.")
                for k in applied
                if k in ENGINE_LIVE_KEYS and k.startswith("policy.")
            ]
            if self._policy is not None and policy_keys:
                try:
                    self._policy.configure(**{k: getattr(merged.policy, k) for k in policy_keys})
                except InputError as e:
                    raise ConfigError(str(e)) from None
            if self._repairer is not None:
                self._repairer.cooldown.seconds = merged.policy.refresh_cooldown_s
            if self._router is not None and self._owns_router:
                self._router.configure(merged)
            self.settings = merged  # one reference swap: readers see the old object or the new
            for listener in self._tunables_listeners:
                listener(merged, live)
        log.info("configuration applied: %s", ", ".join(applied))
        return applied

    def on_tunables(self, listener: TunablesListener) -> Callable[[], None]:
        """Call `listener` after each applied change (the collections follow the default engine);
        returns what stops it."""
        self._tunables_listeners.append(listener)
        return lambda: self._tunables_listeners.remove(listener)

    def change_policy(self, changes: Mapping[str, Any]) -> list[str]:
        """Apply `changes` (policy keys, e.g. {"alpha": 1.0}) to the current settings; returns the
        keys applied. Validated like the configuration (ConfigError naming policy.<key>); the
        read-modify-apply holds the settings lock, so two concurrent changes never undo each other."""
        with self._settings_lock:
            return self.apply_tunables(settings_with(self.settings, policy=dict(changes)))

    def close(self) -> None:
        """Release what holds files and connections: the policy's state store (unless it is the
        default engine's, which a collection shares), the graph's, the index's."""
        if self._policy is not None and self._owns_policy:
            self._policy.close()
        if self._router is not None and self._owns_router:
            self._router.close()
        self.corpus.close()
