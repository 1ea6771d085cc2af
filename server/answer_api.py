"""The native answer endpoint: POST /v1/answer (its protocol models: server/schemas.py)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from ragmend.server.mapping import answer_response, conversation
from ragmend.server.schemas import AnswerRequest, AnswerResponse
from ragmend.server.serving import AnswerServing, serving_of

router = APIRouter()


@router.post("/v1/answer", response_model=AnswerResponse, summary="Answer a question from the corpus")
async def answer(
    body: AnswerRequest, request: Request, serving: Annotated[AnswerServing, Depends(serving_of)]
) -> AnswerResponse:
    token = serving.token(request)
    history, instructions = conversation([(m.role, m.content) for m in body.history or ()])
    overrides = body.config
    if instructions:
        overrides = {**(overrides or {}), "instructions": instructions}
    engine = await serving.engine_for(request, body.model)
    response_id = f"answer-{uuid.uuid4().hex}"
    reply = serving.reply_ids(request, engine, response_id)
    outcome = await serving.answer(
        request, token, engine=engine, asked=(body.query, overrides, history), reply=reply
    )
    reading = serving.reading(engine)
    return answer_response(outcome, reading, response_id=response_id, internals=reply.internals)
