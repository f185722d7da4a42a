"""The response object, typed: what POST /v1/responses answers, what its lifecycle events carry and what the store
keeps (openapi.json's `Response`).

One is made per request (service.py `base_response`) and the ResponseBuilder (render.py) keeps it up to date as
the events are made: its status, its output items, its usage. It is JSON only where it leaves: the route's answer,
a lifecycle event's snapshot and the store's row (`wire()`); a stored one is read back with `stored()`.
The output items and echoed tools are still the JSON objects the events carry (each item kind's own shape).
"""

from __future__ import annotations

from typing import Any, Literal

from rostra.api.responses.wire import (ConversationReference, IncompleteDetails, ReasoningEcho, ResponseError,
                                       ResponseUsage, WireModel)

ResponseStatus = Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]


class ResponseObject(WireModel):
    """Mutable while its response runs (the builder's); whatever leaves is a copy (`wire()`). Unknown keys of a
    stored row are kept, so an object stored by another version reads back as it was stored."""

    # rostra's fields, absent from the object unless they say something.
    absent_unless_set = ("ignored_tools", "truncated_items", "input_messages", "output_messages")

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: ResponseStatus
    completed_at: int | None = None
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | list[dict[str, Any]] | None = None
    model: str
    output: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    parallel_tool_calls: bool
    metadata: dict[str, str]
    tool_choice: str | dict[str, Any]
    temperature: float
    top_p: float
    presence_penalty: float
    frequency_penalty: float
    top_logprobs: int
    # One tier here: "auto" is served by it, and a response names the tier that served it.
    service_tier: str = "default"
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    previous_response_id: str | None = None
    reasoning: ReasoningEcho
    store: bool
    background: bool
    truncation: str
    conversation: ConversationReference | None = None
    text: dict[str, Any]
    usage: ResponseUsage | None = None  # set when it finishes
    # Null unless given, as OpenAI's own response objects carry it (its API reference's examples) and Open
    # Responses' schema requires it; OpenAI's OpenAPI file types it a string only (tests/spec.py reads it as
    # OpenAI sends it).
    user: str | None = None
    # rostra's: the tools not offered to the model, and why (tools.py ignored_tools)
    ignored_tools: list[dict[str, Any]] | None = None
    # rostra's: the oldest conversation items `truncation: "auto"` dropped to fit the context
    truncated_items: int | None = None
    # vLLM's (enable_response_messages): the first turn's prompt and the output as Chat messages
    input_messages: list[dict[str, Any]] | None = None
    output_messages: list[dict[str, Any]] | None = None

    @classmethod
    def stored(cls, row: dict[str, Any]) -> ResponseObject:
        """A response as the store returned it."""
        return cls.model_validate(row)
