"""POST /v1/messages, POST /v1/messages/count_tokens, and the HEAD / probe Claude Code sends.

Errors leave these routes in Anthropic's envelope (errors.py), whatever raised them. `anthropic-version`
and `anthropic-beta` headers and `?beta=true` (Claude Code's) are accepted: what the betas switch on is
either served as the request asks or refused field by field.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.messages.errors import error_response
from rostra.api.messages.models import CountTokensRequest, MessagesRequest
from rostra.errors import APIError, ServerError
from rostra.server.gate import gated
from rostra.server.generation_endpoint import CLIENT_CLOSED, json_response, serve_generation
from rostra.server.request_body import parse_body

log = logging.getLogger("rostra.server")
router = APIRouter()


async def create_message(request: Request) -> Response:
    try:
        body = await parse_body(request, MessagesRequest)
        return await serve_generation(request, lambda model: model.messages, body, responses_api=True)
    except Exception as exc:
        return _error(request, exc)


async def count_tokens(request: Request) -> Response:
    try:
        body = await parse_body(request, CountTokensRequest)
        count = await gated(request, body.model, lambda model: model.messages.count_tokens(body))
        return Response(status_code=CLIENT_CLOSED) if count is None else json_response({"input_tokens": count})
    except Exception as exc:
        return _error(request, exc)


def _error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, APIError):
        log.exception("unhandled error")
        exc = ServerError(f"internal error: {type(exc).__name__}")
    request.scope.setdefault("state", {})["error"] = exc  # the access log's param and code (not in the envelope)
    return error_response(exc, request.scope.get("state", {}).get("request_id"))


async def probe(_: Request) -> Response:
    """Claude Code checks that its base URL answers before its first request."""
    return Response(status_code=200)


# Plain Starlette routes, as for Chat Completions: they read and validate their bodies themselves.
router.add_route("/v1/messages", create_message, methods=["POST"])
router.add_route("/v1/messages/count_tokens", count_tokens, methods=["POST"])
router.add_route("/", probe, methods=["HEAD"])
