"""The vector stores API's request bodies (OpenAI's CreateVectorStoreRequest, ...): unknown fields refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rostra.store.vector_objects import ExpiresAfter

_STRICT = ConfigDict(extra="forbid")
AttributeValue = str | bool | int | float


class CreateStoreBody(BaseModel):
    model_config = _STRICT

    name: str | None = None
    description: str | None = None
    file_ids: list[str] | None = Field(default=None, max_length=500)
    expires_after: ExpiresAfter | None = None
    chunking_strategy: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None


class UpdateStoreBody(BaseModel):
    model_config = _STRICT

    name: str | None = None
    expires_after: ExpiresAfter | None = None
    metadata: dict[str, str] | None = None


class CreateFileBody(BaseModel):
    model_config = _STRICT

    file_id: str
    chunking_strategy: dict[str, Any] | None = None
    attributes: dict[str, AttributeValue] | None = None


class UpdateFileBody(BaseModel):
    model_config = _STRICT

    attributes: dict[str, AttributeValue] | None


class CreateBatchBody(BaseModel):
    model_config = _STRICT

    file_ids: list[str] | None = Field(default=None, max_length=2000)
    files: list[CreateFileBody] | None = Field(default=None, max_length=2000)
    chunking_strategy: dict[str, Any] | None = None
    attributes: dict[str, AttributeValue] | None = None


class SearchBody(BaseModel):
    model_config = _STRICT

    query: str | list[str]
    rewrite_query: bool = False
    max_num_results: int = 10
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] | None = None
