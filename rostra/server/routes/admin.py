"""Under /admin, opened only by the admin keys (--admin-key, distinct from the API keys): store maintenance,
and loading and unloading models."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from rostra.errors import InvalidRequest
from rostra.http.context import server_context
from rostra.http.request_body import parse_body
from rostra.models.manager import ModelSlot

router = APIRouter()
MAX_DAYS = 100_000  # some 270 years: any real age fits, and the cutoff stays a valid timestamp


@router.delete("/admin/responses")
async def purge_responses(request: Request, older_than_days: float):
    """Drop finished responses older than N days."""
    if not 0 <= older_than_days <= MAX_DAYS:  # also refuses nan and inf, which no date can be
        raise InvalidRequest(f"older_than_days must be a number from 0 to {MAX_DAYS}", param="older_than_days")
    deleted = await server_context(request).store.delete_finished_before(int(time.time() - older_than_days * 86400))
    return {"object": "purge", "deleted": deleted}


class ModelAction(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str


class ModelStatus(BaseModel):
    """What loading or unloading a model left it as."""

    model_config = ConfigDict(frozen=True)
    object: Literal["model.status"] = "model.status"
    id: str
    state: str
    requests: int
    load_seconds: float | None
    load_error: str | None


def model_status(slot: ModelSlot) -> ModelStatus:
    return ModelStatus(id=slot.spec.name, state=slot.state, requests=slot.leases, load_seconds=slot.load_seconds,
                       load_error=slot.error)


async def load_model(request: Request):
    """POST /admin/models/load {"model": NAME}: load it now (a failure is a 503 saying why)."""
    body = await parse_body(request, ModelAction)
    return model_status(await server_context(request).models.load(body.model))


async def unload_model(request: Request):
    """POST /admin/models/unload {"model": NAME}: unload it now (409 while requests use it)."""
    body = await parse_body(request, ModelAction)
    return model_status(await server_context(request).models.unload(body.model))


router.add_api_route("/admin/models/load", load_model, methods=["POST"])
router.add_api_route("/admin/models/unload", unload_model, methods=["POST"])
