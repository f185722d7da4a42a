"""POST /v1/embeddings."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.embeddings.request import EmbeddingRequest
from rostra.api.embeddings.service import EmbeddingsService
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED, json_response
from rostra.http.request_body import parse_body
from rostra.serving.validation import check_embedding

router = APIRouter()


async def create_embeddings(request: Request) -> Response:
    body = await parse_body(request, EmbeddingRequest)
    result = await gated(request, body.model, lambda model: model.capable(EmbeddingsService, body.model,
                                                                    check_embedding).create(body))
    return Response(status_code=CLIENT_CLOSED) if result is None else json_response(result)


# A plain Starlette route, as the generation endpoints' (rostra/api/chat/routes.py says why).
router.add_route("/v1/embeddings", create_embeddings, methods=["POST"])
