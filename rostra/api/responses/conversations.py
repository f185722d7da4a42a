"""The Conversations API: a conversation is a stored list of items that responses read and extend.

`POST /v1/responses` with `conversation` prepends the conversation's items to its input, and once the
response has ended (completed or incomplete) appends its input and output items to the conversation, so
the next response sees them (service.py). Items are stored as the API returns them
(ConversationItem: each with an id and a status).

A conversation is its creator's key's (rostra/store/tenancy.py): for another tenant every call naming it is a 404,
as for an id that does not exist.
"""

from __future__ import annotations

import time
from typing import Any

from rostra.errors import InvalidRequest, NotFound
from rostra.api.responses.items import normalize_input, with_status
from rostra.api.responses.models import CreateConversationBody, CreateConversationItemsBody, UpdateConversationBody
from rostra.api.responses.objects import new_id
from rostra.api.responses.wire import Conversation, Deleted, ItemPage, StoredItem
from rostra.store.base import ResponseStore, StoreError
from rostra.store.tenancy import EVERYONE, Tenant

MAX_ITEMS_PER_CALL = 20  # OpenAI's bound on items given at once


def check_metadata(metadata: Any, param: str = "metadata") -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or len(metadata) > 16 or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in metadata.items()):
        raise InvalidRequest("metadata must be at most 16 string pairs (keys up to 64, values up to 512 characters)",
                             param=param)
    return metadata


def check_items(raw: Any, param: str = "items") -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise InvalidRequest("items must be a list of input items", param=param)
    if len(raw) > MAX_ITEMS_PER_CALL:
        raise InvalidRequest(f"at most {MAX_ITEMS_PER_CALL} items may be added at a time", param=param)
    return with_status(normalize_input(raw, param=param)) if raw else []


class ConversationsService:
    def __init__(self, store: ResponseStore):
        self.store = store

    async def create(self, body: CreateConversationBody, tenant: Tenant = EVERYONE) -> Conversation:
        conversation = Conversation(id=new_id("conv"), created_at=int(time.time()),
                                    metadata=check_metadata(body.metadata))
        await self.store.create_conversation(conversation.wire(), check_items(body.items), tenant.key)
        return conversation

    async def retrieve(self, conversation_id: str, tenant: Tenant = EVERYONE) -> Conversation:
        """The conversation, or a 404 (also when it is another tenant's). Its tenant never changes, so the
        calls below check it once, then act."""
        conversation = await self.store.get_conversation(conversation_id, tenant)
        if conversation is None:
            raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="conversation_id")
        return Conversation.stored(conversation)

    async def list_all(self, after: str | None, limit: int, order: str, tenant: Tenant = EVERYONE) -> ItemPage:
        """`GET /v1/conversations`, an extension (OpenAI's API cannot list conversations): the
        playground's sidebar. Paged like every list, by creation time; only those `tenant` may see."""
        try:
            conversations, has_more = await self.store.list_conversations(after=after, limit=limit, order=order,
                                                                          tenant=tenant)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return ItemPage.of(conversations, has_more, empty_id="")

    async def update(self, conversation_id: str, body: UpdateConversationBody,
                     tenant: Tenant = EVERYONE) -> Conversation:
        stored = await self.retrieve(conversation_id, tenant)
        conversation = stored.model_copy(update={"metadata": check_metadata(body.metadata)})
        await self.store.update_conversation(conversation.wire())
        return conversation

    async def delete(self, conversation_id: str, tenant: Tenant = EVERYONE) -> Deleted:
        await self.retrieve(conversation_id, tenant)
        if not await self.store.delete_conversation(conversation_id):
            raise NotFound(f"Conversation with id '{conversation_id}' not found.", param="conversation_id")
        return Deleted(id=conversation_id, object="conversation.deleted")

    async def add_items(self, conversation_id: str, body: CreateConversationItemsBody,
                        tenant: Tenant = EVERYONE) -> ItemPage:
        await self.retrieve(conversation_id, tenant)
        items = check_items(body.items)
        await self.store.add_conversation_items(conversation_id, items)
        return ItemPage.of(items, has_more=False, empty_id="")

    async def list_items(self, conversation_id: str, after: str | None, limit: int, order: str,
                         tenant: Tenant = EVERYONE) -> ItemPage:
        await self.retrieve(conversation_id, tenant)
        try:
            items, has_more = await self.store.conversation_items(conversation_id, after=after, limit=limit,
                                                                  order=order)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return ItemPage.of(items, has_more, empty_id="")

    async def get_item(self, conversation_id: str, item_id: str, tenant: Tenant = EVERYONE) -> StoredItem:
        await self.retrieve(conversation_id, tenant)
        item = await self.store.get_conversation_item(conversation_id, item_id)
        if item is None:
            raise NotFound(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.",
                           param="item_id")
        return StoredItem.model_validate(item)

    async def delete_item(self, conversation_id: str, item_id: str, tenant: Tenant = EVERYONE) -> Conversation:
        conversation = await self.retrieve(conversation_id, tenant)
        if not await self.store.delete_conversation_item(conversation_id, item_id):
            raise NotFound(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.",
                           param="item_id")
        return conversation

