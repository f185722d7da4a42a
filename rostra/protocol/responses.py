"""Responses API request model."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rostra.protocol.common import drop_nulls


class TextOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    format: dict[str, Any] | None = None


class ReasoningOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    effort: str | None = None
    summary: str | None = None


class CreateResponseRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    _nulls_are_defaults = model_validator(mode="before")(drop_nulls)

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    text: TextOptions | None = None
    reasoning: ReasoningOptions | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    metadata: dict[str, str] | None = None
    store: bool = True
    stream: bool = False
    background: bool = False
    include: list[str] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None  # MCP calls rostra runs in one response
