"""POST /v1/feedback: a user's vote on an answer, learned as a delayed reward (policy/feedback.py).

Every answer the API sends (/v1/answer, chat completions, streamed or not) is remembered under its
response id before it is sent; a vote names that id. Authenticated like the answer endpoints (a
/v1 path: server/auth.py's user scope).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Depends, Request

from ragmend.engine.collections import Collections
from ragmend.engine.outcome import Outcome
from ragmend.errors import StoreUnavailable
from ragmend.policy.feedback import FeedbackLedger, open_ledger
from ragmend.server.schemas import ErrorResponse, FeedbackRequest, FeedbackResponse

log = logging.getLogger("ragmend.feedback")


class Feedback:
    """The process's ledger of answers that may be voted on."""

    def __init__(self, collections: Collections):
        self.collections = collections
        self._ledger: FeedbackLedger | None = None

    @property
    def ledger(self) -> FeedbackLedger:
        if self._ledger is None:
            self._ledger = open_ledger(self.collections.default.settings)
        return self._ledger

    def remember(self, response_id: str, outcome: Outcome, message_id: str | None = None) -> None:
        """Keep what a vote on this answer would credit (under the client's message id too, when
        it sent one). A store that cannot be written costs the answer nothing: its vote will be
        refused as unknown, and the log says why."""
        engine = self.collections.get(outcome.collection)
        try:
            self.ledger.remember(replace(engine.served(response_id, outcome), message_id=message_id))
        except (StoreUnavailable, OSError) as e:
            log.warning("feedback: answer %s not remembered (%s)", response_id, e)

    def vote(self, body: FeedbackRequest) -> FeedbackResponse:
        ttl_s = self.collections.default.settings.policy.feedback_ttl_s
        response_id = body.response_id or self.ledger.response_for(body.message_id or "")
        vote = self.ledger.vote(response_id, body.value, body.comment, ttl_s)
        learned = vote.new and self.collections.get(vote.served.namespace).credit(vote)
        return FeedbackResponse(
            response_id=response_id,
            score=vote.score,
            recorded=vote.new,
            credited=vote.served.arm,
            credited_plan=vote.served.plan,
            reward=vote.reward,
            learned=learned,
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
        404: {"model": ErrorResponse, "description": "No answer with this id is known."},
        409: {"model": ErrorResponse, "description": "The answer already has another vote."},
        410: {"model": ErrorResponse, "description": "The answer is past policy.feedback_ttl_s."},
    },
)
async def post_feedback(
    body: FeedbackRequest, feedback: Annotated[Feedback, Depends(feedback_of)]
) -> FeedbackResponse:
    return await to_thread.run_sync(feedback.vote, body)
