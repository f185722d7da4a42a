"""POST /v1/decisions."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.decisions.request import DecisionRequest
from rostra.api.decisions.service import DecisionsService
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED, json_response
from rostra.errors import InvalidRequest
from rostra.http.request_body import parse_body
from rostra.serving.validation import check_generative

router = APIRouter()
# A discriminated union (questions, content parts) names the member it tried by its type in pydantic's error
# location (`questions[0].predicate.instructions`): the client's path has no such step.
_MEMBER_TAG = re.compile(r"(?<=\])\.(?:predicate|choice|score|input_text|input_image|input_json|output_text|refusal)"
                         r"(?=[.\[:]|$)")


async def create_decision(request: Request) -> Response:
    try:
        body = await parse_body(request, DecisionRequest)
    except InvalidRequest as exc:
        if exc.param:
            exc.param = _MEMBER_TAG.sub("", exc.param)
            exc.message = _MEMBER_TAG.sub("", exc.message)
        raise
    result = await gated(request, body.model, lambda model: model.capable(DecisionsService, body.model,
                                                                    check_generative).create(body))
    return Response(status_code=CLIENT_CLOSED) if result is None else json_response(result)


# A plain Starlette route, as the generation endpoints' (rostra/api/chat/routes.py says why).
router.add_route("/v1/decisions", create_decision, methods=["POST"])
