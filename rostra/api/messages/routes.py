"""POST /v1/messages, POST /v1/messages/count_tokens, and the HEAD / probe Claude Code sends.

Errors leave these routes in Anthropic's envelope (errors.py), whatever raised them. `anthropic-version`
and `anthropic-beta` headers and `?beta=true` (Claude Code's) are accepted: what the betas switch on is
either served as the request asks or refused field by field.
"""

from __future__ import annotations

import logging
from typing import Callable

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.messages.errors import error_body, error_response
from rostra.api.messages.models import CountTokensRequest, MessagesRequest
from rostra.api.messages.service import MessagesService
from rostra.api.messages.stream import ping
from rostra.errors import APIError, ServerError
from rostra.http.caller import tenant_of
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED, json_response, serve_generation
from rostra.http.request_body import parse_body
from rostra.models.bundle import ModelBundle
from rostra.serving.validation import check_generative

log = logging.getLogger("rostra.server")
router = APIRouter()


def register_envelope(envelopes: ErrorEnvelopes) -> None:
    """What refuses a request before these routes run (a missing key, a body too large, an unknown path under
    /v1/messages) answers in Anthropic's envelope too."""
    envelopes.register("/v1/messages", error_body)


def messages_of(request: Request, name: str) -> Callable[[ModelBundle], MessagesService]:
    """The model's Messages service as this request's caller drives it (documents by file_id are its own); a model
    without text generation has none (the 400 says what it serves)."""
    files, tenant = getattr(request.app.state, "batches", None), tenant_of(request)
    return lambda model: model.capable(MessagesService, name, check_generative).for_caller(files, tenant)


async def create_message(request: Request) -> Response:
    try:
        body = await parse_body(request, MessagesRequest)
        return await serve_generation(request, messages_of(request, body.model), body, responses_api=True,
                                      keep_alive=ping)
    except Exception as exc:
        return _error(request, exc)


async def count_tokens(request: Request) -> Response:
    try:
        body = await parse_body(request, CountTokensRequest)
        service = messages_of(request, body.model)
        count = await gated(request, body.model, lambda model: service(model).count_tokens(body))
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
