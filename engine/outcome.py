"""What one request produces: the answer, its diagnosis and, for a failed answer, the repair."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmend.diagnosis.types import Diagnosis
from ragmend.engine.presentation import RepairDecision
from ragmend.engine.repair import Kept, RepairSkip, RepairTrace
from ragmend.engine.router import Route
from ragmend.models.generation import Purpose, TokenCount
from ragmend.rag.types import Answer

# A repair's `kept` label that says what it chose to say in place of an answer.
DECIDED_BY_KEPT: Mapping[Kept, RepairDecision] = {Kept.ABSTAINED: "abstained", Kept.CONFLICT: "conflict"}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    answer: Answer  # the answer the reply carries (the repaired one when it is better supported)
    diagnosis: Diagnosis | None  # its diagnosis; None when diagnosis.enabled is off
    first: Answer | None = None  # the first pass, when a repair ran
    first_diagnosis: Diagnosis | None = None
    repair: RepairTrace | RepairSkip | None = None  # None: no failure, or repair is off
    seconds: float = 0.0  # the whole request: first pass, diagnosis, repair
    # Of `seconds`, the first answer and its diagnosis: what a request needs before any repair
    # (the server's admission predicts it; server/admission.py).
    first_pass_s: float = 0.0
    # Of `seconds`, the time in generator calls (first pass, rewrites, repair pass), the wait for
    # the wait for the in-process model included: what is left is ragmend's own work.
    generator_s: float = 0.0
    # Of `generator_s`, the generator's work for this request (the in-process model held, the
    # wait for its lock excluded; a remote call's whole time): what admission counts as spent.
    generator_busy_s: float = 0.0
    # The same per generator role ("generator", "escalation"): (role, held_s, waiting_s), the
    # in-process model held and the wait for it, where the request called that role.
    generator_roles: tuple[tuple[str, float, float], ...] = ()
    # Every generator call of the request that answered (first pass, rewrites, repair pass), by
    # purpose: the request's usage, not only the returned answer's call.
    usage: Mapping[Purpose, TokenCount] = field(default_factory=dict)
    # A chat follow-up as the user asked it, when condensing it with the conversation changed it
    # (the answer's query is then the condensed, standalone question).
    condensed_from: str | None = None
    # The corpus that answered: "default", or a collection's name (engine/collections.py).
    collection: str = "default"
    # The one more repair policy.extra_repairs allows, when the first one's answer still failed.
    second_repair: RepairTrace | RepairSkip | None = None
    # The first pass's plan and who chose it (engine/router.py); None: built without a first pass.
    route: Route | None = None
    # False: the request shaped its own pass, so neither the policies, the cost models nor the
    # server's service times learned from it, and a vote on it teaches nothing.
    learn: bool = True

    @property
    def decided(self) -> RepairDecision | None:
        """What the last repair chose to say in place of an answer: "abstained" (its statement that
        the sources do not answer) or "conflict" (both sides of the evidence's conflict); None."""
        last = self.second_repair or self.repair
        return DECIDED_BY_KEPT.get(last.kept) if isinstance(last, RepairTrace) else None

    @property
    def abstained(self) -> bool:
        """The repair chose to abstain: the answer is its statement that the sources do not answer."""
        return self.decided == "abstained"

    def total_usage(self) -> TokenCount:
        """The whole request's tokens; without a tally (an Outcome built by hand), the returned
        answer's own call."""
        if not self.usage:
            return TokenCount(self.answer.prompt_tokens, self.answer.completion_tokens, 1)
        total = TokenCount()
        for tokens in self.usage.values():
            total = total.plus(tokens)
        return total
