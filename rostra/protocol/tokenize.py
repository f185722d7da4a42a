"""/tokenize and /detokenize (vLLM's request and response shapes)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    add_special_tokens: bool = True
    add_generation_prompt: bool = True


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    tokens: list[int]


class TokenizeResponse(BaseModel):
    model_config = ConfigDict(frozen=True)
    count: int
    max_model_len: int
    tokens: list[int]


class DetokenizeResponse(BaseModel):
    model_config = ConfigDict(frozen=True)
    prompt: str
