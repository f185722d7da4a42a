"""What the Responses API answers beside POST /v1/responses itself: OpenAI's input-token count
(POST /v1/responses/input_tokens, which LiteLLM probes on every request), the compaction of a conversation
(POST /v1/responses/compact, compacted.py) and the WebSocket transport on /v1/responses (OpenAI's WebSocket mode,
which Codex prefers when a provider allows it)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, WebSocket
from starlette.responses import JSONResponse, Response

from rostra.api.responses.compacted import Compactor
from rostra.api.responses.compaction import CompactRequest
from rostra.api.responses.models import CreateResponseRequest
from rostra.http.caller import tenant_of
from rostra.api.responses.services import responses_of
from rostra.api.responses.ws_connection import ResponsesSocket
from rostra.http.gate import gated
from rostra.http.generation_endpoint import CLIENT_CLOSED, serve_generation
from rostra.http.request_body import parse_body

log = logging.getLogger("rostra.responses")
router = APIRouter()


@router.post("/v1/responses/input_tokens")
async def count_input_tokens(request: Request) -> Response:
    body = await parse_body(request, CreateResponseRequest)
    responses, tenant = responses_of(request), tenant_of(request)
    # Through the gate, as every piece of engine work: admission, the model's lease, the deadline, the disconnect.
    tokens = await gated(request, body.model, lambda _: responses.count_input_tokens(body, tenant))
    if tokens is None:
        return Response(status_code=CLIENT_CLOSED)
    return JSONResponse({"object": "response.input_tokens", "input_tokens": tokens})


@router.post("/v1/responses/compact")
async def compact_conversation(request: Request) -> Response:
    body = await parse_body(request, CompactRequest)
    turn = body.as_turn()  # a 400 before admission: nothing to compact
    compactor = Compactor(responses_of(request), tenant_of(request))
    return await serve_generation(request, lambda model: compactor, turn, responses_api=True)


@router.websocket("/v1/responses")
async def responses_websocket(websocket: WebSocket) -> None:
    """OpenAI's WebSocket mode (the SDKs' `client.responses.connect()`): ws_connection.py. The API key was checked
    at the upgrade (a bad one is refused there, as an HTTP request is), and it is this connection's tenant."""
    await websocket.accept()
    log.info("WebSocket connection on /v1/responses opened")
    try:
        await ResponsesSocket(websocket, responses_of(websocket), tenant_of(websocket)).serve()
    finally:
        log.info("WebSocket connection on /v1/responses closed")
