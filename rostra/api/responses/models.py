"""The request bodies of the Responses and Conversations APIs (input items and tools are typed in items.py and
tools.py, where the service reads them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from rostra.errors import InvalidRequest
from rostra.protocol.strict import RequestModel, StrictModel, check_service_tier, refuse_if_set

# Fields of OpenAI's schema that ask for what this server does not have: refused when set.
_REFUSED = {
    "prompt": "this server has no stored prompt templates",
    "context_management": "this server does not compact context",
    "moderation": "this server runs no moderation",
    "access_programs": "this server has no access programs",
}


class TextOptions(StrictModel):
    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningOptions(BaseModel):
    # Lenient: reasoning settings vary by model family (effort, summary, mode, generate_summary).
    model_config = ConfigDict(extra="allow")
    effort: str | None = None
    summary: str | None = None


class ResponseStreamOptions(StrictModel):
    include_obfuscation: bool = True  # rostra pads nothing: no obfuscation field is sent


class CreateResponseRequest(RequestModel):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None  # an id, or {"id": ...}
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    text: TextOptions | None = None
    reasoning: ReasoningOptions | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    # Open Responses' (not in OpenAI's request schema): applied as in Chat Completions, and echoed.
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    metadata: dict[str, str] | None = None
    store: bool = True
    stream: bool = False
    stream_options: ResponseStreamOptions | None = None
    background: bool = False
    # Values naming built-in tools rostra does not have include nothing, as OpenAI's do without those tools.
    include: list[str] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    # Harmless: identifiers and cache hints.
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None  # MCP calls rostra runs in one response
    # vLLM's: the response also carries input_messages / output_messages (response_messages.py)
    enable_response_messages: StrictBool = False
    service_tier: str | None = None
    # Sent by today's clients, changing nothing here: Codex's own ids for its logs (client_metadata), and the
    # request-level image options of the openai SDK (this server's models read no images).
    client_metadata: dict[str, str] | None = None
    image: dict[str, Any] | None = None
    # Refused when set (see _REFUSED).
    prompt: dict[str, Any] | None = None
    context_management: list[dict[str, Any]] | None = None
    moderation: dict[str, Any] | None = None
    access_programs: Any = None

    def unsupported(self) -> InvalidRequest | None:
        # text.verbosity (low, medium, high) is a hint the chat template receives (to_chat.py): not refused.
        return refuse_if_set(self, _REFUSED) or check_service_tier(self.service_tier)


# -- Conversations: unknown fields are refused, as OpenAI refuses them -----------------------------------------
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
