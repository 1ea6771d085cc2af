"""D2R-RAG's Algorithm 2 (Appendix B; docs/references.md) as a warm start: the live repair
loop over a data set.

For each epoch and each item: answer with the default configuration P, diagnose; on a failure,
build x, select an action, patch P, run once more, diagnose, compute the reward and update the
policy. That is exactly what Engine.respond does for a live request with learning on, so the warm
start runs the engine's own loop (the same masking, budgets, metering and persistence the server
uses) instead of a copy of it, and the state it writes is the one `ragmend serve` loads.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmend.corpora.tasks import EvalItem
from ragmend.engine import Engine
from ragmend.engine.outcome import Outcome
from ragmend.engine.repair import RepairSkip, RepairTrace
from ragmend.engine.votes import credit, served
from ragmend.errors import RagmendError
from ragmend.policy.feedback import Vote


@dataclass(kw_only=True)
class EpochReport:
    epoch: int
    items: int = 0
    failed: int = 0  # first answers the diagnosis failed
    repaired: int = 0  # failed answers a repair ran for (the others: no action fitted)
    successes: int = 0  # repairs after which the diagnosis found no failure
    right: int = 0  # final answers the gold answer judged right (labelled data only)
    credited: int = 0  # repair decisions that learned the gold answer's judgement too
    errors: int = 0  # items that raised (a generator error...): counted, skipped
    plans_tried: int = 0  # first passes of every plan the router learned from (explore_plans)
    reward_sum: float = 0.0
    seconds: float = 0.0
    actions: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.repaired if self.repaired else None

    def as_json(self) -> dict[str, Any]:
        mean = self.mean_reward
        return {
            "epoch": self.epoch,
            "items": self.items,
            "failed": self.failed,
            "repaired": self.repaired,
            "successes": self.successes,
            "right": self.right,
            "credited": self.credited,
            "errors": self.errors,
            "plans_tried": self.plans_tried,
            "mean_reward": round(mean, 4) if mean is not None else None,
            "seconds": round(self.seconds, 1),
            "actions": dict(self.actions.most_common()),
            "failures": dict(self.failures.most_common()),
        }


class TooManyErrors(RagmendError):
    """Too many items of an epoch raised: the run stops (exit code 1)."""


def warm_start(
    engine: Engine,
    items: Sequence[EvalItem],
    epochs: int,
    on_item: Callable[[int, EpochReport], None] | None = None,
    max_error_share: float = 0.1,
    overrides: dict[str, Any] | None = None,
    judge: Callable[[EvalItem, Outcome], float] | None = None,
    explore_plans: bool = False,
    item_overrides: Callable[[EvalItem], dict[str, Any]] | None = None,
) -> list[EpochReport]:
    """Run `epochs` passes of the repair loop over `items`; the engine's policy learns and
    persists every update. `on_item(epoch, report)` after each item (a progress bar);
    `overrides`: every request's (a claim prompt); `judge`: a score in [0, 1] of the final answer
    against the item's gold answer, learned by the arm that decided it like a user's vote
    (Engine.credit), beside the diagnosis's reward. `explore_plans`: before each item's request,
    every enabled first-pass plan answers it once and the router learns each one's diagnosis
    (and, with `judge`, its gold judgement), so every plan learns from every item (full
    information; a bandit alone would see only the plan it chose). `item_overrides`: more
    overrides per item (a claim among questions is checked with the claim prompt).

    An item that raises is counted and skipped: a long run survives a flaky generator. More than
    `max_error_share` of an epoch's items failing (at least 5) stops the run: something is wrong.
    """
    if epochs < 1:
        raise ValueError("epochs must be at least 1")
    if not engine.settings.policy.learn or not engine.settings.policy.repair:
        raise ValueError("the warm start needs policy.learn and policy.repair on")
    reports = []
    for epoch in range(1, epochs + 1):
        report = EpochReport(epoch=epoch)
        t0 = time.monotonic()
        for item in items:
            report.items += 1
            asked = {**(overrides or {}), **(item_overrides(item) if item_overrides else {})} or None
            try:
                if explore_plans:
                    report.plans_tried += _tried(engine, item, asked, judge)
                outcome = engine.respond(item.query, asked)
            except RagmendError as e:
                report.errors += 1
                if report.errors >= max(5, max_error_share * len(items)):
                    raise TooManyErrors(
                        f"epoch {epoch}: {report.errors} of {report.items} items failed; last: {e}"
                    ) from e
                continue
            first = outcome.first_diagnosis or outcome.diagnosis
            if first is not None and first.failed:
                report.failed += 1
                report.failures[first.failure] += 1
            trace = outcome.repair
            if isinstance(trace, RepairTrace):
                report.repaired += 1
                report.successes += int(trace.success)
                report.reward_sum += trace.reward.total
                report.actions[trace.action] += 1
            elif isinstance(trace, RepairSkip):
                report.actions["(skipped)"] += 1
            if judge is not None:
                score = judge(item, outcome)
                report.right += int(score >= 1.0)
                vote = Vote(served(item.id, outcome, engine.namespace), score, new=True)
                report.credited += int(credit(vote, engine.policy, engine.router))
            if on_item is not None:
                on_item(epoch, report)
        report.seconds = time.monotonic() - t0
        reports.append(report)
    return reports


def _tried(
    engine: Engine,
    item: EvalItem,
    overrides: dict[str, Any] | None,
    judge: Callable[[EvalItem, Outcome], float] | None,
) -> int:
    """Every plan on `item`, learned by the router; with `judge`, each plan's answer judged
    against the gold answer and learned like a user's vote on it."""
    tried = engine.explore_plans(item.query, overrides)
    for outcome in tried:
        route = outcome.route
        if judge is None or route is None or route.plan is None or route.reward is None:
            continue
        factor = max(0.0, route.reward.latency_factor * route.reward.memory_factor)
        engine.router.credit(route.plan, route.context, judge(item, outcome) * factor)
    return len(tried)
