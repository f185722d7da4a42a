"""(Legacy) Completions' route: the body parsed and served by the model's CompletionService."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.completions.service import CompletionService
from rostra.http.generation_endpoint import serve_generation
from rostra.http.request_body import parse_body
from rostra.protocol.completions import CompletionRequest
from rostra.serving.validation import check_generative

router = APIRouter()


async def create_completion(request: Request) -> Response:
    body = await parse_body(request, CompletionRequest)
    return await serve_generation(request, lambda model: model.capable(CompletionService, body.model, check_generative),
                                  body)


# A plain Starlette route, as Chat's (rostra/api/chat/routes.py): the hottest path skips FastAPI's dependency solving.
router.add_route("/v1/completions", create_completion, methods=["POST"])
