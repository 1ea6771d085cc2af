"""`ragmend bench router`: the router replayed on recorded first passes, to choose its settings
on DEV without answering anything again.

Input: the evaluation records of fixed-plan rows (`ragmend eval --suite paper --split dev
--methods naive,plan_...`: results/<task>/<row>.dev.jsonl), every plan having answered every
item once. The items of the tasks are interleaved (one of each in turn, each task in its records'
order). The first `warm` items are the warm start: every plan learns its recorded reward (and,
with `judged`, the gold judgement as a vote), as `ragmend train` does with its full information;
the rest are online: the router chooses, learns the chosen plan's recorded reward, and is scored
on the chosen plan's recorded answer. The reward is the router's (engine/router.py plan_reward:
the verdict's graded quality, or Eq. 2's coarse one for comparison, at the pass's latency against
the request's budget).

Per setting: each task's headline metric and mean seconds over the online items, and the plan mix;
beside them, each plan fixed over the same items.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ragmend.budgets import Budgets
from ragmend.corpora.tasks import Task
from ragmend.diagnosis.question_form import question_form
from ragmend.engine.plans import PLANS_BY_NAME
from ragmend.engine.router import plan_budgets
from ragmend.errors import InputError
from ragmend.policy import MemoryStore, Policy
from ragmend.policy.plan_context import KindLayout, PlanContextBuilder
from ragmend.policy.reward import reward_from_signals
from ragmend.settings import PolicySettings

# The evaluation row that fixes each plan (bench/harness/methods.py).
ROW = {name: "naive" if name == "default_dense" else f"plan_{name}" for name in PLANS_BY_NAME}


@dataclass(frozen=True)
class Item:
    task: str
    id: str
    query: str
    records: Mapping[str, Mapping[str, Any]]  # plan -> its recorded first pass


@dataclass(frozen=True, kw_only=True)
class Setting:
    alpha: float = 0.25
    quality: str = "graded"  # graded (the router's) | eq2 (Algorithm 1's coarse quality part)
    judged: bool = True
    context_dim: int = 0
    budget_scale: float = 1.0
    ridge_lambda: float = 1.0  # every plan's ridge prior
    online: bool = True  # false: frozen after the warm start (the plans it chooses teach it nothing)
    kinds: str = "pooled"  # pooled: the context as shipped; fine: one feature per question kind
    evidence: bool = False  # the shared retrieval's P(answerable) in the context (router.read_evidence)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def load_items(
    results: Path, tasks: Sequence[Task], plans: Sequence[str], queries: Mapping[str, str], order: int = 0
) -> list[Item]:
    """Every item each plan's row answered, the tasks interleaved; `order` > 0: each task's items
    shuffled with that seed first (another split of warm-start and online items)."""
    streams: list[list[Item]] = []
    for task in tasks:
        per_plan: dict[str, dict[str, Any]] = {}
        for plan in plans:
            path = results / task.name / f"{ROW[plan]}.dev.jsonl"
            if not path.exists():
                raise InputError(f"{path} is missing: run the row {ROW[plan]} on DEV first")
            per_plan[plan] = {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}
        first = per_plan[plans[0]]
        ids = [i for i in first if all(i in per_plan[p] for p in plans)]
        if order:
            ids = [ids[k] for k in np.random.default_rng([order, len(streams)]).permutation(len(ids))]
        streams.append([Item(task.name, i, queries[i], {p: per_plan[p][i] for p in plans}) for i in ids])
    out: list[Item] = []
    for row in range(max(len(s) for s in streams)):
        out += [s[row] for s in streams if row < len(s)]
    return out


def replay(
    items: Sequence[Item],
    setting: Setting,
    warm: int,
    primary: Mapping[str, str],
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> dict[str, Any]:
    plans = list(items[0].records)
    cfg = PolicySettings.model_validate(
        {
            "kind": "linucb",
            "alpha": setting.alpha,
            "enabled_actions": plans,
            "budget_scale": setting.budget_scale,
            "ridge_lambda": setting.ridge_lambda,
        }
    )
    kinds = cast(KindLayout, setting.kinds)  # the builder refuses any other
    builder = PlanContextBuilder(setting.context_dim, kinds=kinds, evidence=setting.evidence)
    builder = builder.with_budgets(cfg)
    policy: Policy[Any] = Policy(cfg, MemoryStore(), plans, builder=builder)
    budgets = plan_budgets(cfg, "unavailable")
    online: dict[str, list[tuple[float, float, str]]] = {}
    for n, item in enumerate(items):
        claim = item.records[plans[0]].get("question_kind") == "claim" or item.task == "fever"
        emb = embed([item.query])[0] if embed is not None and setting.context_dim else None
        form = question_form(item.query, claim=claim)
        budget = cfg.request_latency_budget_s
        x = builder.build(emb, form, False, budget, p_answerable=_answerable(item, plans[0]))

        if n < warm:
            for plan in plans:
                _learn(policy, x, item, plan, setting, budgets, primary[item.task], vote=setting.judged)
            continue
        chosen = policy.select(x, plans).arm
        if setting.online:
            right, seconds = _learn(policy, x, item, chosen, setting, budgets, primary[item.task], vote=False)
        else:
            right, seconds = _scored(item.records[chosen], primary[item.task])
        for group in _groups(item):
            online.setdefault(group, []).append((right, seconds, chosen))
    return {
        task: {
            "n": len(rows),
            primary[task.partition("/")[0]]: round(100 * float(np.mean([r for r, _, _ in rows])), 2),
            "latency_s": round(float(np.mean([s for _, s, _ in rows])), 3),
            "plans": dict(Counter(p for _, _, p in rows).most_common()),
        }
        for task, rows in online.items()
    }


def _groups(item: Item) -> tuple[str, ...]:
    """What an online item is counted in: its task, and in a task of several streams (the mixed
    one's ids are `<stream>:<id>`) its stream too."""
    stream, sep, _ = item.id.partition(":")
    return (item.task, f"{item.task}/{stream}") if sep else (item.task,)


def _answerable(item: Item, plan: str) -> float | None:
    """The first pass's P(answerable), recorded by any plan of the item's shared retrieval (a
    fixed plan's row repairs nothing: its final reading is its first)."""
    r = item.records[plan]
    p = r.get("first_p_answerable", r.get("p_answerable"))
    return None if p is None else float(p)


def _learn(
    policy: Policy[Any],
    x: np.ndarray,
    item: Item,
    plan: str,
    setting: Setting,
    budgets: Budgets,
    metric: str,
    vote: bool,
) -> tuple[float, float]:
    """The plan's recorded reward learned (and with `vote`, its gold judgement as a vote);
    returns its recorded (metric, seconds)."""
    r = item.records[plan]
    p = r.get("first_p_unsupported")
    quality = (1.0 - p) if setting.quality == "graded" and p is not None else float(r["first_quality"])
    reward = reward_from_signals(
        failure=r["first_failure"] or "NoFailure",
        kappa=r.get("first_kappa") or "no_triplet",
        e_r="neutral",
        latency_s=float(r["latency_s"]),
        memory_bytes=None,
        budgets=budgets,
        quality=min(1.0, max(0.0, quality)),
    )
    policy.update(plan, x, reward)
    right, seconds = _scored(r, metric)
    if vote:
        policy.update(plan, x, right * reward.latency_factor)
    return right, seconds


def _scored(record: Mapping[str, Any], metric: str) -> tuple[float, float]:
    """A recorded first pass's (metric, seconds)."""
    return float(record["scores"][metric]), float(record["latency_s"])


def fixed_plans(items: Sequence[Item], warm: int, primary: Mapping[str, str]) -> dict[str, Any]:
    """Each plan fixed, over the same online items ("<task> <plan>", in replay's shape)."""
    out: dict[str, Any] = {}
    groups = dict.fromkeys(g for i in items for g in _groups(i))
    for group in groups:
        rows = [i for i in items[warm:] if group in _groups(i)]
        key = primary[group.partition("/")[0]]
        for plan in rows[0].records:
            metric = [i.records[plan]["scores"][key] for i in rows]
            out[f"{group} {plan}"] = {
                "n": len(rows),
                key: round(100 * float(np.mean(metric)), 2),
                "latency_s": round(float(np.mean([i.records[plan]["latency_s"] for i in rows])), 3),
                "plans": {plan: len(rows)},
            }
    return out


def averaged(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The mean of several replays' figures per task (the plan mixes summed)."""
    out: dict[str, Any] = {}
    for task in runs[0]:
        rows = [r[task] for r in runs]
        keys = [k for k in rows[0] if k not in ("n", "plans")]
        mix: Counter[str] = Counter()
        for r in rows:
            mix.update(r["plans"])
        out[task] = {
            "n": rows[0]["n"],
            "orders": len(rows),
            **{k: round(float(np.mean([r[k] for r in rows])), 3) for k in keys},
            "plans": dict(mix.most_common()),
        }
    return out


def grid(options: Mapping[str, Sequence[Any]]) -> list[Setting]:
    """Every combination of the given options (Setting's fields), the rest at their defaults."""
    unknown = set(options) - set(Setting.__dataclass_fields__)
    if unknown:
        raise InputError(
            f"unknown replay option(s) {sorted(unknown)}; options: {sorted(Setting.__dataclass_fields__)}"
        )
    keys = list(options)
    return [Setting(**dict(zip(keys, combo, strict=True))) for combo in itertools.product(*options.values())]
