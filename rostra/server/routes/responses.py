"""The Responses API: create (plain, streamed, background), retrieve (or follow), cancel, delete, input items."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rostra.protocol.responses import CreateResponseRequest
from rostra.server.context import server_context
from rostra.server.generation_endpoint import serve_generation
from rostra.server.request_body import check_page, parse_body
from rostra.server.sse import EventStreamResponse

router = APIRouter()


@router.post("/v1/responses")
async def create_response(request: Request):
    body = await parse_body(request, CreateResponseRequest)
    return await serve_generation(request, server_context(request).responses, body, responses_api=True)


@router.get("/v1/responses/{response_id}")
async def retrieve_response(request: Request, response_id: str, stream: bool = False,
                            starting_after: int | None = None):
    responses = server_context(request).responses
    if stream:
        await responses.retrieve(response_id)  # 404 before the stream starts
        return EventStreamResponse(responses.follow(response_id, starting_after), responses_api=True)
    return await responses.retrieve(response_id)


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str):
    return await server_context(request).responses.cancel(response_id)


@router.delete("/v1/responses/{response_id}")
async def delete_response(request: Request, response_id: str):
    return await server_context(request).responses.delete(response_id)


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(request: Request, response_id: str, after: str | None = None, limit: int = 20,
                           order: str = "desc"):
    check_page(limit, order)
    return await server_context(request).responses.input_items(response_id, after, limit, order)
