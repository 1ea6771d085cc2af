"""POST /v1/feedback: a user's vote on an answer, learned as a delayed reward (policy/feedback.py).

Every answer the API sends (/v1/answer, chat completions, streamed or not) is remembered under its
response id before it is sent, with who received it; a vote names that id. Authenticated like the
answer endpoints (a /v1 path: server/auth.py's user scope), and guarded, since the learned state
is every user's: a vote counts only from the key that received the answer (on a keyless server,
only from its own machine; else a 403), each key votes at most server.feedback_votes_per_min
(a 429 with Retry-After past it), and a vote past its key's share of the latest learned votes
(server.feedback_max_share) is recorded, not learned, and the reply says so.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Depends, Request

from ragmend.engine.collections import Collections
from ragmend.engine.outcome import Outcome
from ragmend.engine.votes import credit
from ragmend.engine.votes import served as served_by
from ragmend.errors import Forbidden, RateLimited, StoreUnavailable
from ragmend.policy.feedback import FeedbackLedger, ShareCap, open_ledger
from ragmend.server.auth import Caller, caller_of
from ragmend.server.schemas import ErrorResponse, FeedbackRequest, FeedbackResponse

log = logging.getLogger("ragmend.feedback")


class VoteRate:
    """Each voter's token bucket: `burst` votes at once, refilled at `per_min` (both read at each
    vote, so a reload changes them). Per process: each replica counts its own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # voter -> (votes left, when)
        self._lock = threading.Lock()

    def take(self, voter: str, per_min: float, burst: int) -> None:
        """Spend one of `voter`'s votes, or RateLimited with the seconds until the next one."""
        now = self._clock()
        with self._lock:
            left, at = self._buckets.get(voter, (float(burst), now))
            left = min(float(burst), left + (now - at) * per_min / 60.0)
            if left < 1.0:
                self._buckets[voter] = (left, now)
                wait = max(1, math.ceil((1.0 - left) * 60.0 / per_min))
                raise RateLimited(
                    f"too many votes from this key: at most {burst} at once and {per_min:g} a minute "
                    f"(server.feedback_burst, server.feedback_votes_per_min); retry in {wait} s",
                    retry_after_s=wait,
                )
            self._buckets[voter] = (left - 1.0, now)


class Feedback:
    """The process's ledger of answers that may be voted on, and who may vote how often."""

    def __init__(self, collections: Collections):
        self.collections = collections
        self._ledger: FeedbackLedger | None = None
        self.rate = VoteRate()

    @property
    def ledger(self) -> FeedbackLedger:
        if self._ledger is None:
            self._ledger = open_ledger(self.collections.default.settings)
        return self._ledger

    def remember(
        self, response_id: str, outcome: Outcome, message_id: str | None = None, receiver: str | None = None
    ) -> None:
        """Keep what a vote on this answer would credit, and who received it (under the client's
        message id too, when it sent one no earlier answer holds). A store that cannot be written
        costs the answer nothing: its vote will be refused as unknown, and the log says why."""
        engine = self.collections.get(outcome.collection)
        try:
            served = replace(
                served_by(response_id, outcome, engine.namespace), message_id=message_id, receiver=receiver
            )
            self.ledger.remember(served)
        except (StoreUnavailable, OSError) as e:
            log.warning("feedback: answer %s not remembered (%s)", response_id, e)

    def vote(self, body: FeedbackRequest, caller: Caller) -> FeedbackResponse:
        settings = self.collections.default.settings
        server = settings.server
        if not caller.may_vote:
            raise Forbidden("this server has no keys: it takes votes only from its own machine (loopback)")
        self.rate.take(caller.identity, server.feedback_votes_per_min, server.feedback_burst)
        response_id = body.response_id or self.ledger.response_for(body.message_id or "")
        cap = ShareCap(server.feedback_share_window, server.feedback_max_share)
        ttl_s = settings.policy.feedback_ttl_s
        vote = self.ledger.vote(response_id, body.value, body.comment, ttl_s, voter=caller.identity, cap=cap)
        engine = self.collections.get(vote.served.namespace)
        learned = vote.withheld is None and credit(vote, engine.policy, engine.router)
        internals = caller.owner or server.show_policy_internals
        return FeedbackResponse(
            response_id=response_id,
            score=vote.score,
            recorded=vote.new,
            credited=vote.served.arm if internals else None,
            credited_plan=vote.served.plan if internals else None,
            reward=vote.reward,
            learned=learned,
            not_learned=vote.withheld or (None if learned else "not_learning"),
        )

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()


def feedback_of(request: Request) -> Feedback:
    """FastAPI dependency: the app's Feedback (set by create_app)."""
    feedback: Feedback = request.app.state.feedback
    return feedback


router = APIRouter(prefix="/v1", tags=["Feedback"])


@router.post(
    "/feedback",
    response_model=FeedbackResponse,
    summary="Vote on an answer (score 0-1 or thumbs up/down): a delayed reward for its repair",
    responses={
        400: {"model": ErrorResponse, "description": "Not a vote: the message names the field."},
        403: {
            "model": ErrorResponse,
            "description": "Another key received the answer (or, keyless, the vote is not from the "
            "server's own machine).",
        },
        404: {"model": ErrorResponse, "description": "No answer with this id is known."},
        409: {"model": ErrorResponse, "description": "The answer already has another vote."},
        410: {"model": ErrorResponse, "description": "The answer is past policy.feedback_ttl_s."},
        429: {
            "model": ErrorResponse,
            "description": "Past the key's votes a minute (server.feedback_votes_per_min); Retry-After.",
        },
    },
)
async def post_feedback(
    body: FeedbackRequest, request: Request, feedback: Annotated[Feedback, Depends(feedback_of)]
) -> FeedbackResponse:
    caller = caller_of(request, feedback.collections.default.settings.server)
    return await to_thread.run_sync(feedback.vote, body, caller)
