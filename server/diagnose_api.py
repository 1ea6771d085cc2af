"""The check endpoints: POST /v1/diagnose (one answer) and /v1/diagnose/batch (many), for answers
ragmend did not write (engine/checking.py; protocol models: server/diagnose_schemas.py).

Authenticated like the answer endpoints (a /v1 path), admitted and cancelled like them (one
admission for a batch: its deadline covers every item), each item told as an AnswerChecked event.
Every limit is checked before any work, and a breach names the field.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from ragmend.engine import Engine
from ragmend.engine.checking import Checked, CheckRequest, GivenPassage, check_answer
from ragmend.errors import InputError, NotReady
from ragmend.server.deadline import until_disconnected
from ragmend.server.diagnose_schemas import (
    DiagnoseBatchRequest,
    DiagnoseBatchResponse,
    DiagnoseRequest,
    DiagnoseResponse,
)
from ragmend.server.diagnose_schemas import GivenPassage as GivenPassageModel
from ragmend.server.mapping import checked_response
from ragmend.server.schemas import ErrorResponse
from ragmend.server.serving import AnswerServing, serving_of
from ragmend.settings import ServerSettings

router = APIRouter(tags=["Diagnose"])
ServingDep = Annotated[AnswerServing, Depends(serving_of)]
KIND = "diagnose"  # admission's estimates of a check are its own, apart from answers'
ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": ErrorResponse, "description": "A field breaks a limit or is empty: the message names it."},
    404: {"model": ErrorResponse, "description": "No corpus of that `model` name."},
    408: {"model": ErrorResponse, "description": "The body did not arrive within server.body_timeout_s."},
    413: {"model": ErrorResponse, "description": "The body is over server.max_body_bytes."},
    503: {"model": ErrorResponse, "description": "Busy or loading: retry after Retry-After."},
    504: {"model": ErrorResponse, "description": "The check ran past its deadline."},
}


@router.post(
    "/v1/diagnose",
    response_model=DiagnoseResponse,
    summary="Check an answer: the diagnosis of a given (question, answer, passages)",
    responses=ERRORS,
)
async def diagnose(body: DiagnoseRequest, request: Request, serving: ServingDep) -> DiagnoseResponse:
    token = serving.token(request)
    engine = await ready_engine(serving, request, body.model, "model")
    check = check_request(body, engine.settings.server, "")

    def run() -> Checked:
        return check_answer(engine, check, serving.events)

    checked = await until_disconnected(request, serving.admission.run(run, token=token, kind=KIND))
    return checked_response(checked, f"check-{uuid.uuid4().hex}", _model_name(serving, body.model))


@router.post(
    "/v1/diagnose/batch",
    response_model=DiagnoseBatchResponse,
    summary="Check many answers in one call (one admission, in order)",
    responses=ERRORS,
)
async def diagnose_batch(
    body: DiagnoseBatchRequest, request: Request, serving: ServingDep
) -> DiagnoseBatchResponse:
    token = serving.token(request)
    limits = serving.models.collections.default.settings.server  # not a corpus: read by every key
    if len(body.items) > limits.check_max_batch:
        raise InputError(
            f"items: {len(body.items)} answers, more than server.check_max_batch = {limits.check_max_batch}"
        )
    engines, checks = [], []
    for i, item in enumerate(body.items):  # every item checked before any work
        engine = await ready_engine(serving, request, item.model, f"items[{i}].model")
        engines.append(engine)
        checks.append(check_request(item, engine.settings.server, f"items[{i}]."))

    def run() -> tuple[list[Checked], float]:
        started = time.perf_counter()
        done = [check_answer(e, c, serving.events) for e, c in zip(engines, checks, strict=True)]
        return done, time.perf_counter() - started

    done, seconds = await until_disconnected(request, serving.admission.run(run, token=token, kind=KIND))
    data = [
        checked_response(c, f"check-{uuid.uuid4().hex}", _model_name(serving, item.model))
        for c, item in zip(done, body.items, strict=True)
    ]
    return DiagnoseBatchResponse(data=data, seconds=seconds)


async def ready_engine(
    serving: AnswerServing, request: Request, model: str | None, field: str | None
) -> Engine:
    """The engine of `model` the request's key may read, loaded (a check never loads a model on a
    request's thread)."""
    engine = await serving.engine_for(request, model, field)
    if not engine.ready:
        raise NotReady("ragmend is still loading its models and index")
    return engine


def check_request(body: DiagnoseRequest, limits: ServerSettings, where: str) -> CheckRequest:
    """The engine's check of one request item, every limit checked (InputError naming the field)."""
    if not body.answer.strip():
        raise InputError(f"{where}answer: empty; send the answer to check")
    question = (body.question or "").strip()
    for name, text in (("answer", body.answer), ("question", question)):
        if len(text) > limits.check_max_answer_chars:
            raise InputError(
                f"{where}{name}: {len(text)} characters, more than server.check_max_answer_chars = "
                f"{limits.check_max_answer_chars}"
            )
    if body.passages is None and not question:
        raise InputError(f"{where}question: needed to retrieve passages; or send passages")
    passages = None if body.passages is None else _given(body.passages, limits, where)
    return CheckRequest(body.answer, question, passages, body.mode)


def _given(
    passages: Sequence[GivenPassageModel], limits: ServerSettings, where: str
) -> tuple[GivenPassage, ...]:
    if not passages:
        raise InputError(f"{where}passages: empty; send passages, or leave it out to retrieve them")
    if len(passages) > limits.check_max_passages:
        raise InputError(
            f"{where}passages: {len(passages)} passages, more than server.check_max_passages = "
            f"{limits.check_max_passages}"
        )
    for i, p in enumerate(passages):
        if not p.text.strip():
            raise InputError(f"{where}passages[{i}].text: empty")
        if len(p.text) > limits.check_max_passage_chars:
            raise InputError(
                f"{where}passages[{i}].text: {len(p.text)} characters, more than "
                f"server.check_max_passage_chars = {limits.check_max_passage_chars}"
            )
    ids = [p.id for p in passages if p.id]
    if len(set(ids)) < len(ids):
        raise InputError(f"{where}passages: two passages have the same id")
    return tuple(GivenPassage(p.text, p.id, p.title, p.trust) for p in passages)


def _model_name(serving: AnswerServing, model: str | None) -> str:
    return model or serving.models.served
