"""Completions (legacy) request model."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rostra.protocol.common import INT32_MAX, MAX_N, SamplingFields

MAX_LEGACY_LOGPROBS = 5


class CompletionRequest(SamplingFields):
    # A string, a list of strings, a list of token ids, or a list of token-id lists.
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: Annotated[int, Field(ge=0, le=MAX_LEGACY_LOGPROBS)] | None = None
    suffix: str | None = None
    add_special_tokens: bool = True  # vLLM: the tokenizer's BOS etc. around the prompt text
    best_of: Annotated[int, Field(ge=1, le=MAX_N)] | None = None
    # Unset: the server's default length, else OpenAI's 16 (serving/completions.py). 0 only with echo: the
    # prompt back (scored with logprobs), nothing generated.
    max_tokens: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
