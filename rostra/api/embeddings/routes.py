"""POST /v1/embeddings."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.embeddings.request import EmbeddingRequest
from rostra.server.context import server_context
from rostra.server.generation_endpoint import json_response
from rostra.server.request_body import parse_body

router = APIRouter()


async def create_embeddings(request: Request) -> Response:
    body = await parse_body(request, EmbeddingRequest)
    async with await server_context(request).models.acquire(body.model) as model:  # held while it embeds
        return json_response(await model.embeddings.create(body))


# A plain Starlette route, as the generation endpoints' (rostra/server/routes/completions.py says why).
router.add_route("/v1/embeddings", create_embeddings, methods=["POST"])
