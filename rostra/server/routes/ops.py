"""Probes and telemetry: /health, /version, /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from rostra import __version__
from rostra.server.context import server_context
from rostra.server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

router = APIRouter()


@router.get("/health")
async def health(request: Request):
    """Public: a load balancer needs to know only that the server answers. The details (running
    generations, a gateway's upstream URLs and their last errors) are for holders of an API key."""
    if not request.scope.get("state", {}).get("authorized", True):
        return {"status": "ok"}
    engine = server_context(request).engine
    # running: generations holding engine capacity (a disconnected client's drop within ~1 s).
    return {"status": "ok", "running": engine.running_requests(), **engine.health()}


@router.get("/metrics")
async def prometheus_metrics(request: Request):
    return Response(server_context(request).metrics.exposition(), media_type=METRICS_CONTENT_TYPE)


@router.get("/version")
async def version():
    return {"version": __version__}
