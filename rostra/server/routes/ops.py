"""Probes and telemetry: /health, /version, /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from rostra import __version__
from rostra.http.context import server_context
from rostra.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from rostra.models.readiness import readiness

router = APIRouter()


@router.get("/health")
async def health(request: Request):
    """Public: a load balancer needs to know only that the server answers. The details (running
    generations, a gateway's upstream URLs and their last errors) are for holders of an API key."""
    if not request.scope.get("state", {}).get("authorized", True):
        return {"status": "ok"}
    models = server_context(request).models
    engines = [slot.bundle.engine for slot in models.slots if slot.bundle is not None]
    # running: generations holding engine capacity (a disconnected client's drop within ~1 s).
    running = sum(engine.running_requests() for engine in engines)
    if len(models.slots) == 1:  # a single-model server: its engine's facts (a gateway's upstreams), as always
        return {"status": "ok", "running": running, **(engines[0].health() if engines else {})}
    return {"status": "ok", "running": running,
            "models": {slot.spec.name: {"state": slot.state, **(slot.bundle.engine.health() if slot.bundle else {})}
                       for slot in models.slots}}


@router.get("/health/ready")
async def ready(request: Request):
    """Readiness (Kubernetes' readinessProbe, a load balancer): 200 when every model that must be up can take
    work, else 503 with the reasons (rostra/models/readiness.py). Public; the per-model details need a key."""
    state = await readiness(server_context(request).models)
    body: dict = {"status": "ready" if state.ready else "unavailable"}
    if request.scope.get("state", {}).get("authorized", True):
        body["reasons"] = state.reasons
        body["models"] = [vars(model) for model in state.models]
    return JSONResponse(body, status_code=200 if state.ready else 503)


@router.get("/metrics")
async def prometheus_metrics(request: Request):
    return Response(server_context(request).metrics.exposition(), media_type=METRICS_CONTENT_TYPE)


@router.get("/version")
async def version():
    return {"version": __version__}
