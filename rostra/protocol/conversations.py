"""Conversations API request bodies. Unknown fields are refused, as OpenAI refuses them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class CreateConversationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: Any = None
    items: Any = None


class UpdateConversationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: Any


class CreateConversationItemsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: Any
