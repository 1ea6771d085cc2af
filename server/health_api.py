"""Health, readiness and the Prometheus scrape: GET /healthz, /readyz, /metrics."""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.responses import Response

from ragmend.server.mapping import ready_status
from ragmend.server.schemas import ReadyStatus

router = APIRouter()


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadyStatus,
    summary="Models loaded and index open",
    responses={503: {"model": ReadyStatus, "description": "Not ready yet (loading, or loading failed)."}},
)
async def readyz(request: Request) -> JSONResponse:
    status = ready_status(request.app.state.engine.status())
    return JSONResponse(status.model_dump(mode="json"), status_code=200 if status.ready else 503)


@router.get("/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse)
async def metrics_endpoint(request: Request) -> Response:
    metrics = request.app.state.metrics
    # Off the loop: the scrape reads the policy under its lock, which an update holds for an fsync.
    body = await to_thread.run_sync(metrics.exposition)
    return Response(body, media_type=metrics.content_type)
