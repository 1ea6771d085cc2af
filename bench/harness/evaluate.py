"""The evaluation harness: every method over a task's items, through the engine the server uses.

For each method (bench/harness/methods.py) on one task (corpora/tasks.py), in one workspace (one corpus,
index, graph and generation cache shared by every method, so all of them see the same generator,
corpus and questions):

1. D2R methods warm-start their own policy state on the DEV split (Algorithm 2, `epochs` passes:
   train/warm_start.py); the frozen variant evaluates a copy of another method's warm state.
2. Every method answers the TEST items in a fixed order, one record per item appended to
   <out>/<task>/<method>.test.jsonl (fsynced): an interrupted run resumes after the last record
   (the policy state file holds every update up to it). D2R methods keep learning online during
   the test run, as the live server does (except the frozen variant).

Per item: the task's scores, latency from the start of retrieval to the final output (the request
clock: cached generations count at their recorded duration, ragmend/clock.py), memory growth of
the request (NVML, or host RSS growth labelled "rss" where no GPU is present: actions/meter.py),
relevance (cosine of query and response embeddings, the embeddings role; for FEVER's label-only
responses it says little, so the mean cosine of query and evidence passages is kept too),
faithfulness (the final
answer's response entailment e_r is "entail" under the NLI role; note that the D2R reward optimises
this very signal, so it favours D2R by construction: the task metrics are the independent ones),
the first and final failure types, and the repair (action, kept answer, success, reward).

The NLI model is part of every D2R result (the diagnosis decides what is repaired and what the
policy learns), so each run and each warm start names the NLI weights it ran with
(ragmend.models.nli.nli_identity): a method's records are never resumed under other weights, and a
warm start made under other weights is redone. `archive` moves a method's records, policy state,
warm start and runs aside (results/<task>/archive/<UTC time>/) to run it afresh.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragmend import clock
from ragmend.actions.meter import CostMeter
from ragmend.bench.harness.methods import METHODS_BY_NAME, Method
from ragmend.bench.harness.workspace import Workspace
from ragmend.corpora.readers import Split
from ragmend.corpora.tasks import EvalItem
from ragmend.diagnosis.types import Diagnosis
from ragmend.engine import Engine
from ragmend.engine.outcome import Outcome
from ragmend.engine.presentation import Reading, present
from ragmend.engine.repair import RepairSkip, RepairTrace
from ragmend.engine.services import EngineServices
from ragmend.errors import GeneratorError, InputError
from ragmend.fileio import archive_dir, atomic_write_json
from ragmend.kg.phrases import embed_with
from ragmend.models.nli import nli_identity
from ragmend.models.registry import ModelRegistry
from ragmend.policy.reward import abstention_quality, eq2_quality
from ragmend.settings import Settings
from ragmend.train.warm_start import warm_start

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    dev_items: int | None = None  # first N dev items for the warm start (None: all)
    test_items: int | None = None  # N items answered (None: all of the split after `offset`)
    epochs: int = 2
    seed: int = 0
    # The items answered: TEST to report; DEV to choose on, after the first `offset` (which the
    # warm start reads when offset >= dev_items), recorded apart (<method>.dev.jsonl).
    split: Split = "test"
    offset: int = 0


class Evaluation:
    def __init__(
        self,
        ws: Workspace,
        base: Settings,
        out_dir: Path,
        plan: RunPlan,
        registry: ModelRegistry | None = None,
        log: Log = print,
        on_item: Callable[[str, int, int], None] | None = None,
    ):
        self.ws = ws
        self.base = base
        self.out_dir = Path(out_dir) / ws.task.name
        self.plan = plan
        self.log = log
        self.on_item = on_item
        items = ws.prepare()
        self.dev = ws.task.sample(items, "dev")[: plan.dev_items]
        answered = ws.task.sample(items, plan.split)[plan.offset :]
        self.test = answered[: plan.test_items] if plan.test_items is not None else answered
        self.registry = registry or ModelRegistry(ws.settings(base))
        self.reading = Reading.of(ws.settings(base).server)  # how the server shows an answer
        self.nli = nli_identity(ws.settings(base).models)
        self.meter = CostMeter()
        self._embed: Callable[[list[str]], np.ndarray] | None = None

    # -- one method ------------------------------------------------------------------------------

    def state_path(self, method: Method) -> Path:
        return self.ws.root / "policies" / f"{method.name}.sqlite"

    def router_state_path(self, method: Method) -> Path:
        return self.ws.root / "policies" / f"{method.name}.router.sqlite"

    def warm_path(self, method: Method) -> Path:
        return self.ws.root / "policies" / f"{method.name}.warm.json"

    def records_path(self, method: Method) -> Path:
        return self.out_dir / f"{method.name}.{self.plan.split}.jsonl"

    @property
    def runs_path(self) -> Path:
        return self.out_dir / "runs.json"

    def runs(self) -> list[dict[str, Any]]:
        """Every invocation's work on a method: command, wall minutes, plan, NLI model."""
        return json.loads(self.runs_path.read_text()) if self.runs_path.exists() else []

    def log_run(self, method: Method, command: str, seconds: float) -> None:
        minutes = round(seconds / 60, 1)
        run = {"command": command, "method": method.name, "minutes": minutes, "plan": self.plan.__dict__}
        self.out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.runs_path, [*self.runs(), {**run, "nli": self.nli}])

    def records_nli(self, method: Method) -> str | None:
        """The NLI model of the method's last run (None: never run, or run before runs named it)."""
        return next((r.get("nli") for r in reversed(self.runs()) if r["method"] == method.name), None)

    def archive(self, method: Method) -> Path | None:
        """Move the method's records, policy state, own warm start and runs aside; None when it has
        none. Nothing is deleted: an earlier result stays readable next to the new one."""
        moving = [
            p
            for p in (self.records_path(method), self.warm_path(method), *self._state_files(method))
            if p.exists()
        ]
        runs = self.runs()
        mine = [r for r in runs if r["method"] == method.name]
        if not moving and not mine:
            return None
        dest = archive_dir(self.out_dir) / method.name
        dest.mkdir(exist_ok=True)
        atomic_write_json(dest / "runs.json", mine)
        for p in moving:
            shutil.move(p, dest / p.name)
        atomic_write_json(self.runs_path, [r for r in runs if r["method"] != method.name])
        return dest

    def engine(self, method: Method, learn: bool) -> Engine:
        policy: dict[str, Any] = {
            **(method.policy or {}),
            "repair": method.repairs,
            "learn": learn,
            "seed": self.plan.seed,
            "state_path": str(self.state_path(method)),
        }
        router: dict[str, Any] = {
            **(method.router or {}),
            "enabled": method.router is not None,
            "learn": learn,
            "state_path": str(self.router_state_path(method)),
        }
        s = self.ws.settings(self.base, policy=policy, router=router)
        engine = Engine(s, models=ModelRegistry.sharing(self.registry, s))
        engine.load()
        return engine

    def run(self, method: Method) -> list[dict[str, Any]]:
        """Warm start (when the method has one and it is not done yet), then the test items."""
        records = self.records(method, repair=True)
        todo = self.test[len(records) :]
        if not todo:
            return records
        if records and (made_with := self.records_nli(method) or "unnamed") != self.nli:
            raise InputError(
                f"{self.ws.task.name} {method.name}: its {len(records)} records were made with NLI "
                f"{made_with}, not {self.nli}; rerun with --restart to set them aside and start over"
            )
        if method.repairs and not records:
            self._prepare_state(method)
        engine = self.engine(method, learn=method.learn_on_test)
        try:
            self._warm_up(engine)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            with open(self.records_path(method), "a", encoding="utf-8") as f:
                for item in todo:
                    record = self._answer_retrying(engine, method, item)
                    f.write(json.dumps(record) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    records.append(record)
                    if self.on_item is not None:
                        self.on_item(method.name, len(records), len(self.test))
        finally:
            engine.close()
        return records

    def _warm_up(self, engine: Engine) -> None:
        """One unrecorded answer (a dev item) with no repair: lazy loads and first-call allocations
        (runtime arenas, caches) would otherwise land in the first recorded item's memory and time."""
        if self.dev:
            engine.answer(self.dev[0].query)

    def _prepare_state(self, method: Method) -> None:
        """A fresh state: warm-started on dev, or imported from the method it reuses."""
        self._clear_state(method)
        source = METHODS_BY_NAME[method.warm_from] if method.warm_from else method
        warm = self.warm_path(source)
        if not self._warm_start_fits(source):
            self._warm_start(source)
        engine = self.engine(method, learn=True)
        try:
            saved = json.loads(warm.read_text())
            engine.policy.import_state(saved["state"])
            if method.router is not None and "router_state" in saved:
                engine.router.policy.import_state(saved["router_state"])
        finally:
            engine.close()

    def _warm_start_fits(self, method: Method) -> bool:
        """The method's saved warm start is this run's: the same NLI weights, DEV items, epochs
        and judging (a warm start on other items is not reused)."""
        path = self.warm_path(method)
        if not path.exists():
            return False
        saved = json.loads(path.read_text())
        return (
            saved.get("nli") == self.nli
            and saved.get("dev_items") == len(self.dev)
            and len(saved.get("epochs", [])) == self.plan.epochs
            and saved.get("judged", False) == method.warm_judged
        )

    def _state_files(self, method: Method) -> list[Path]:
        files = []
        for state in (self.state_path(method), self.router_state_path(method)):
            files += sorted(state.parent.glob(state.name + "*"))  # the SQLite file and its WAL
        return files

    def _clear_state(self, method: Method) -> None:
        self.state_path(method).parent.mkdir(parents=True, exist_ok=True)
        for p in self._state_files(method):
            p.unlink()

    def _warm_start(self, method: Method) -> None:
        self._clear_state(method)
        self.log(f"{method.name}: warm start on {len(self.dev)} dev items x {self.plan.epochs} epochs")
        engine = self.engine(method, learn=True)
        try:
            done = 0

            def tick(epoch: int, report: object) -> None:
                nonlocal done
                done += 1
                if self.on_item is not None:
                    self.on_item(f"{method.name} (warm)", done, len(self.dev) * self.plan.epochs)

            judge = self._judge(method) if method.warm_judged else None
            reports = warm_start(
                engine,
                self.dev,
                self.plan.epochs,
                on_item=tick,
                judge=judge,
                explore_plans=method.router is not None,
                item_overrides=lambda item: {**method.rag, **self.ws.task.overrides(item)},
            )
            exported = engine.policy.export_state()
            routed = engine.router.policy.export_state() if method.router is not None else None
        finally:
            engine.close()
        atomic_write_json(
            self.warm_path(method),
            {
                "epochs": [r.as_json() for r in reports],
                "dev_items": len(self.dev),
                "nli": self.nli,
                "judged": method.warm_judged,
                "state": exported,
                **({"router_state": routed} if routed is not None else {}),
            },
        )

    def _judge(self, method: Method) -> Callable[[EvalItem, Outcome], float]:
        """The task's headline metric of the answer a user reads (the gated label where the
        method gates): the gold answers as the users' votes of a warm start on labelled rows."""
        task = self.ws.task

        def judge(item: EvalItem, outcome: Outcome) -> float:
            d = outcome.diagnosis
            label = d.final_label if d is not None and method.gate else None
            return float(task.score(item, self.scored_text(outcome), label)[task.primary])

        return judge

    # -- one item --------------------------------------------------------------------------------

    def _answer_retrying(self, engine: Engine, method: Method, item: EvalItem) -> dict[str, Any]:
        """A generator timeout or error is retried once (a long unattended run should not stop on
        one stalled call); a second failure stops the run, which resumes at this item."""
        try:
            return self.answer(engine, method, item)
        except GeneratorError as e:
            self.log(f"{method.name} {item.id}: {e}; retrying once")
            return self.answer(engine, method, item)

    def answer(self, engine: Engine, method: Method, item: EvalItem) -> dict[str, Any]:
        t0 = clock.now()
        with self.meter.measure() as m:
            overrides = {**method.rag, **self.ws.task.overrides(item)}
            if method.rewrite is not None:
                overrides["query"] = EngineServices(engine).rewrite_query(item.query, method.rewrite)
            outcome = engine.respond(item.query, overrides or None)
        latency = clock.now() - t0
        cost = m.cost
        assert cost is not None
        d = outcome.diagnosis
        final_label = d.final_label if d is not None and method.gate else None
        response = outcome.answer.response
        read_abstention = self.reads_abstention(outcome)
        passages = [p.text for p in outcome.answer.evidence]
        return {
            "id": item.id,
            "split": item.split,
            "kind": item.kind,
            "gold": item.gold,
            "response": response,
            "final_label": final_label,
            "scores": self.ws.task.score(item, self.scored_text(outcome), final_label),
            "abstained_read": read_abstention,
            "reply_quality": _reply_quality(d, read_abstention),
            "latency_s": round(latency, 4),
            "generator_s": round(outcome.generator_s, 4),
            "memory_bytes": cost.memory_bytes,
            "memory_source": cost.memory_source,
            "relevance": round(self.relevance(item.query, [response]), 4),
            "evidence_relevance": round(self.relevance(item.query, passages), 4),
            "answer_in_evidence": self.ws.task.answer_in(item, passages),
            "faithful": None if d is None else d.e_r.state == "entail",
            "first_pass_s": round(outcome.first_pass_s, 4),
            "model": outcome.answer.model,
            "plan": outcome.route.plan if outcome.route is not None else None,
            "question_kind": outcome.route.kind if outcome.route is not None else None,
            "plan_reward": _plan_reward(outcome),
            "prompt_tokens": outcome.answer.prompt_tokens,
            **_signals("", d),
            **_signals("first_", outcome.first_diagnosis or d),
            # The first answer's scores where a repair replaced it: what the repair turned right or
            # wrong (the same gate as the final answer's).
            "first_scores": self._first_scores(item, outcome, method),
            # The first answer as generated, whatever the user read in its place: whether the
            # check hid or replaced a right answer.
            "first_generated_scores": self._generated_scores(item, outcome, method),
            **_repair_fields(outcome),
        }

    def _first_scores(self, item: EvalItem, outcome: Outcome, method: Method) -> dict[str, float] | None:
        if outcome.first is None or outcome.first is outcome.answer:
            return None
        d = outcome.first_diagnosis
        label = d.final_label if d is not None and method.gate else None
        return self.ws.task.score(item, self.scored_text(outcome, first=True), label)

    def _generated_scores(self, item: EvalItem, outcome: Outcome, method: Method) -> dict[str, float]:
        first = outcome.first or outcome.answer
        d = outcome.first_diagnosis or outcome.diagnosis
        label = d.final_label if d is not None and method.gate else None
        return self.ws.task.score(item, first.response, label)

    def reads_abstention(self, outcome: Outcome, first: bool = False) -> bool:
        """The user reads that the sources do not answer: the abstain action's statement, or the
        answer policy's on a final answer still unsupported (as the server presents it); `first`:
        of the first answer, had it been sent."""
        result = (outcome.first or outcome.answer) if first else outcome.answer
        diagnosis = (outcome.first_diagnosis or outcome.diagnosis) if first else outcome.diagnosis
        decided = None if first else outcome.decided
        shown = present(
            result.response,
            diagnosis,
            [(p.id, p.title) for p in result.evidence],
            self.reading,
            query=result.query,
            decided=decided,
        )
        return decided == "abstained" or shown.policy_applied == "abstain"

    def scored_text(self, outcome: Outcome, first: bool = False) -> str:
        """What the task scores: the generated answer, or for a task scored on what the user
        reads (Task.reads) the empty string where they read an abstention."""
        result = (outcome.first or outcome.answer) if first else outcome.answer
        if self.ws.task.reads and self.reads_abstention(outcome, first):
            return ""
        return result.response

    def relevance(self, query: str, texts: list[str]) -> float:
        """Mean cosine of the query and each text (unit-length embeddings role vectors)."""
        texts = [t for t in texts if t.strip()]
        if not texts:
            return 0.0
        if self._embed is None:
            self._embed = embed_with(self.registry.embeddings)
        vecs = self._embed([query, *texts])
        return float((vecs[1:] @ vecs[0]).mean())

    def records(self, method: Method, repair: bool = False) -> list[dict[str, Any]]:
        """The test records written so far, in item order. A torn last line (a kill mid-write) is
        left out; with `repair` (the writer, before it appends) it is also cut from the file."""
        path = self.records_path(method)
        if not path.exists():
            return []
        records = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a torn last line (killed mid-write): that item runs again
        expected = [i.id for i in self.test[: len(records)]]
        if [r["id"] for r in records] != expected:
            raise ValueError(f"{path} does not follow this run's item order: delete it to start over")
        if repair and len(records) != len(path.read_text(encoding="utf-8").splitlines()):
            path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        return records


def _reply_quality(d: Diagnosis | None, abstention: bool) -> float | None:
    """Eq. 2's quality of what the user reads: the final answer's, or where they read that the
    sources do not answer, an abstention's (the policy's own rule: how likely they do not)."""
    if d is None:
        return None
    if abstention:
        return abstention_quality(d)
    return eq2_quality(d.failure, d.kappa, d.e_r.state)


def _plan_reward(outcome: Outcome) -> float | None:
    route = outcome.route
    return round(route.reward.total, 4) + 0.0 if route is not None and route.reward is not None else None


def _signals(prefix: str, d: Diagnosis | None) -> dict[str, Any]:
    """What the diagnosis said of an answer: its P(unsupported), its evidence's P(answerable),
    kappa, Eq. 2's quality part (the reward's, before the cost factors), the rule that decided (and
    the verdict's rules that found it unsupported) and the failure's grade."""
    if d is None:
        keys = ("p_unsupported", "p_answerable", "kappa", "quality", "decided_by", "unsupported_by", "grade")
        return {f"{prefix}{k}": None for k in keys}
    quality = eq2_quality(d.failure, d.kappa, d.e_r.state)
    return {
        f"{prefix}p_unsupported": round(d.verdict.p_unsupported, 4) if d.verdict is not None else None,
        # Whether its evidence answers the question, whatever the answer says (the router's
        # retrieval signal reads the first pass's).
        f"{prefix}p_answerable": d.e_q.support,
        f"{prefix}kappa": d.kappa,
        f"{prefix}quality": quality,
        # What decided, and how sure: what `ragmend study trust` counts the flags by.
        f"{prefix}decided_by": d.decided_by,
        f"{prefix}unsupported_by": list(d.verdict.unsupported_by) if d.verdict is not None else None,
        f"{prefix}grade": d.grade,
    }


def _repair_fields(outcome: Outcome) -> dict[str, Any]:
    first = outcome.first_diagnosis or outcome.diagnosis
    trace = outcome.repair
    out: dict[str, Any] = {
        "first_failure": first.failure if first is not None else None,
        "final_failure": outcome.diagnosis.failure if outcome.diagnosis is not None else None,
        "action": None,
        "skipped": None,
        "kept": None,
        "success": None,
        "reward": None,
    }
    if isinstance(trace, RepairTrace):
        out |= {
            "action": trace.action,
            "kept": trace.kept,
            "success": trace.success,
            "reward": round(trace.reward.total, 4) + 0.0,  # + 0.0: no "-0.0" from a closed gate
        }
    elif isinstance(trace, RepairSkip):
        out["skipped"] = trace.reason
    return out
