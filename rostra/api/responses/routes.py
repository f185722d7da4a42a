"""The Responses API (create: plain, streamed, background; retrieve or follow; cancel; delete; input items) and
the Conversations API whose items responses read and extend. Each call acts as the tenant of its API key (set by
the key middleware): another key's responses and conversations are 404s (rostra/store/tenancy.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.responses.models import (
    CreateConversationBody,
    CreateConversationItemsBody,
    CreateResponseRequest,
    UpdateConversationBody,
)
from rostra.api.responses.render import keepalive
from rostra.api.responses.services import conversations_of, responses_of
from rostra.api.responses.wire import WireModel
from rostra.http.caller import tenant_of
from rostra.http.generation_endpoint import json_response, serve_generation
from rostra.http.request_body import check_page, parse_body
from rostra.http.sse import EventStreamResponse

router = APIRouter()


def answer(resource: WireModel) -> Response:
    """A typed object as the JSON the client reads: the one place these routes make a dict."""
    return json_response(resource.wire())


@router.post("/v1/responses")
async def create_response(request: Request) -> Response:
    body = await parse_body(request, CreateResponseRequest)
    responses = responses_of(request).for_tenant(tenant_of(request))
    return await serve_generation(request, lambda model: responses, body, responses_api=True, keep_alive=keepalive)


@router.get("/v1/responses/{response_id}", response_model=None)
async def retrieve_response(request: Request, response_id: str, stream: bool = False,
                            starting_after: int | None = None) -> Response:
    responses, tenant = responses_of(request), tenant_of(request)
    if stream:
        await responses.retrieve(response_id, tenant)  # 404 before the stream starts
        return EventStreamResponse(responses.follow(response_id, starting_after, tenant), responses_api=True,
                                   keep_alive=keepalive)
    return answer(await responses.retrieve(response_id, tenant))


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str) -> Response:
    return answer(await responses_of(request).cancel(response_id, tenant_of(request)))


@router.delete("/v1/responses/{response_id}")
async def delete_response(request: Request, response_id: str) -> Response:
    return answer(await responses_of(request).delete(response_id, tenant_of(request)))


@router.get("/v1/responses/{response_id}/input_items")
async def list_input_items(request: Request, response_id: str, after: str | None = None, limit: int = 20,
                           order: str = "desc") -> Response:
    check_page(limit, order)
    return answer(await responses_of(request).input_items(response_id, after, limit, order,
                                                 tenant_of(request)))


# -- Conversations ------------------------------------------------------------------------------------------------
@router.post("/v1/conversations")
async def create_conversation(request: Request) -> Response:
    body = await parse_body(request, CreateConversationBody)
    return answer(await conversations_of(request).create(body, tenant_of(request)))


@router.get("/v1/conversations")
async def list_conversations(request: Request, after: str | None = None, limit: int = 20,
                             order: str = "desc") -> Response:
    """An extension: OpenAI's Conversations API has no listing (the playground's sidebar needs one)."""
    check_page(limit, order)
    return answer(await conversations_of(request).list_all(after, limit, order, tenant_of(request)))


@router.get("/v1/conversations/{conversation_id}")
async def retrieve_conversation(request: Request, conversation_id: str) -> Response:
    return answer(await conversations_of(request).retrieve(conversation_id, tenant_of(request)))


@router.post("/v1/conversations/{conversation_id}")
async def update_conversation(request: Request, conversation_id: str) -> Response:
    body = await parse_body(request, UpdateConversationBody)
    return answer(await conversations_of(request).update(conversation_id, body, tenant_of(request)))


@router.delete("/v1/conversations/{conversation_id}")
async def delete_conversation(request: Request, conversation_id: str) -> Response:
    return answer(await conversations_of(request).delete(conversation_id, tenant_of(request)))


@router.post("/v1/conversations/{conversation_id}/items")
async def create_items(request: Request, conversation_id: str) -> Response:
    body = await parse_body(request, CreateConversationItemsBody)
    return answer(await conversations_of(request).add_items(conversation_id, body, tenant_of(request)))


@router.get("/v1/conversations/{conversation_id}/items")
async def list_items(request: Request, conversation_id: str, after: str | None = None, limit: int = 20,
                     order: str = "desc") -> Response:
    check_page(limit, order)
    return answer(await conversations_of(request).list_items(conversation_id, after, limit, order,
                                                                    tenant_of(request)))


@router.get("/v1/conversations/{conversation_id}/items/{item_id}")
async def retrieve_item(request: Request, conversation_id: str, item_id: str) -> Response:
    return answer(await conversations_of(request).get_item(conversation_id, item_id, tenant_of(request)))


@router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
async def delete_item(request: Request, conversation_id: str, item_id: str) -> Response:
    return answer(await conversations_of(request).delete_item(conversation_id, item_id, tenant_of(request)))
