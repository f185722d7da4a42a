"""Chat Completions and (legacy) Completions."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.server.context import server_context
from rostra.server.generation_endpoint import serve_generation
from rostra.server.request_body import parse_body

router = APIRouter()


@router.post("/v1/chat/completions")
async def create_chat_completion(request: Request):
    body = await parse_body(request, ChatCompletionRequest)
    return await serve_generation(request, server_context(request).chat, body)


@router.post("/v1/completions")
async def create_completion(request: Request):
    body = await parse_body(request, CompletionRequest)
    return await serve_generation(request, server_context(request).completions, body)
