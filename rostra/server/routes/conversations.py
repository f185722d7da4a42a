"""The Conversations API: conversations and their items."""

from __future__ import annotations

from fastapi import APIRouter, Request

from rostra.protocol.conversations import CreateConversationBody, CreateConversationItemsBody, UpdateConversationBody
from rostra.server.context import server_context
from rostra.server.request_body import check_page, parse_body

router = APIRouter()


@router.post("/v1/conversations")
async def create_conversation(request: Request):
    body = await parse_body(request, CreateConversationBody)
    return await server_context(request).conversations.create(body)


@router.get("/v1/conversations")
async def list_conversations(request: Request, after: str | None = None, limit: int = 20, order: str = "desc"):
    """An extension: OpenAI's Conversations API has no listing (the playground's sidebar needs one)."""
    check_page(limit, order)
    return await server_context(request).conversations.list_all(after, limit, order)


@router.get("/v1/conversations/{conversation_id}")
async def retrieve_conversation(request: Request, conversation_id: str):
    return await server_context(request).conversations.retrieve(conversation_id)


@router.post("/v1/conversations/{conversation_id}")
async def update_conversation(request: Request, conversation_id: str):
    body = await parse_body(request, UpdateConversationBody)
    return await server_context(request).conversations.update(conversation_id, body)


@router.delete("/v1/conversations/{conversation_id}")
async def delete_conversation(request: Request, conversation_id: str):
    return await server_context(request).conversations.delete(conversation_id)


@router.post("/v1/conversations/{conversation_id}/items")
async def create_items(request: Request, conversation_id: str):
    body = await parse_body(request, CreateConversationItemsBody)
    return await server_context(request).conversations.add_items(conversation_id, body)


@router.get("/v1/conversations/{conversation_id}/items")
async def list_items(request: Request, conversation_id: str, after: str | None = None, limit: int = 20,
                     order: str = "desc"):
    check_page(limit, order)
    return await server_context(request).conversations.list_items(conversation_id, after, limit, order)


@router.get("/v1/conversations/{conversation_id}/items/{item_id}")
async def retrieve_item(request: Request, conversation_id: str, item_id: str):
    return await server_context(request).conversations.get_item(conversation_id, item_id)


@router.delete("/v1/conversations/{conversation_id}/items/{item_id}")
async def delete_item(request: Request, conversation_id: str, item_id: str):
    return await server_context(request).conversations.delete_item(conversation_id, item_id)
