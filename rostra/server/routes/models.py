"""The Models API: GET /v1/models and GET /v1/models/{id}."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rostra.errors import NotFound
from rostra.server.context import ServerContext, server_context

router = APIRouter()


def model_card(context: ServerContext, name: str) -> dict:
    info = context.engine.model_info(name)
    # generation_defaults (extension): what a request that leaves these fields out gets.
    return {"id": name, "object": "model", "created": context.started, "owned_by": info.owned_by,
            "max_model_len": info.context_length, "generation_defaults": dict(context.generation_defaults.values)}


@router.get("/v1/models")
async def list_models(request: Request):
    context = server_context(request)
    return {"object": "list", "data": [model_card(context, name) for name in context.served_names()]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str):
    context = server_context(request)
    if model_id not in context.served_names():
        raise NotFound(f"The model '{model_id}' does not exist", param="model", code="model_not_found")
    return model_card(context, model_id)
