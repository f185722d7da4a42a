"""POST /v1/rerank, /v2/rerank (and /rerank, as vLLM and llama.cpp serve it too), POST /v1/score (and /score)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.rerank.request import RerankRequest, ScoreRequest
from rostra.api.rerank.service import RerankService
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED, json_response
from rostra.http.request_body import parse_body
from rostra.serving.validation import check_rerank

router = APIRouter()


async def rerank(request: Request) -> Response:
    body = await parse_body(request, RerankRequest)
    result = await gated(request, body.model, lambda model: model.capable(RerankService, body.model, check_rerank).rerank(body))
    return Response(status_code=CLIENT_CLOSED) if result is None else json_response(result)


async def score(request: Request) -> Response:
    body = await parse_body(request, ScoreRequest)
    result = await gated(request, body.model, lambda model: model.capable(RerankService, body.model,
                                                                    check_rerank).score_texts(body))
    return Response(status_code=CLIENT_CLOSED) if result is None else json_response(result)


# Plain Starlette routes, as the generation endpoints' (rostra/api/chat/routes.py says why).
for _path in ("/v1/rerank", "/v2/rerank", "/rerank"):
    router.add_route(_path, rerank, methods=["POST"])
for _path in ("/v1/score", "/score"):
    router.add_route(_path, score, methods=["POST"])
