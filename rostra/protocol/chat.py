"""Chat Completions request model."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rostra.errors import InvalidRequest
from rostra.protocol.common import INT32_MAX, MAX_TOP_LOGPROBS, SamplingFields
from rostra.protocol.strict import check_service_tier, check_verbosity, refuse_if_set

# Fields of OpenAI's schema that ask for what a local text model does not have: refused when set.
_REFUSED = {
    "audio": "this model has no audio output",
    "prediction": "predicted outputs are not supported with this model",
    "web_search_options": "this server has no web search",
    "moderation": "this server runs no moderation",
    "functions": "use tools (functions is deprecated)",
    "function_call": "use tool_choice (function_call is deprecated)",
}


# Variables rostra passes to the chat template itself: a request sets them through their own fields.
RESERVED_TEMPLATE_KWARGS = frozenset({"messages", "tools", "add_generation_prompt", "continue_final_message"})


class ImageURL(BaseModel):
    url: str  # a data: URL or an http(s) URL (fetched by rostra: rostra/images/fetch.py)
    # Accepted, and any other value a 400 (as OpenAI answers); the engine sees the image at its own resolution.
    # "original" is the Responses API's newer level, taken here too.
    detail: Literal["auto", "low", "high", "original"] | None = None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None
    image_url: ImageURL | None = None  # type "image_url"; a bare URL string is taken as {"url": ...}

    @field_validator("image_url", mode="before")
    @classmethod
    def _bare_url(cls, value: Any) -> Any:
        return {"url": value} if isinstance(value, str) else value


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    # Reasoning of earlier assistant turns; both names are in use.
    reasoning_content: str | None = None
    reasoning: str | None = None
    # Responses' label of an assistant message, accepted here too (an extension: clients that carry one history
    # across both APIs keep it): "commentary" or "final_answer", the channel gpt-oss reads the message on.
    phase: Literal["commentary", "final_answer"] | None = None


class ChatCompletionRequest(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1, le=INT32_MAX)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=MAX_TOP_LOGPROBS)] | None = None
    add_generation_prompt: bool = True
    add_special_tokens: bool = False  # vLLM: the tokenizer's BOS etc. on top of what the template writes
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    # False: the thinking is generated but left out of the response.
    include_reasoning: bool = True
    # vLLM extension: documents for retrieval-augmented templates (passed as `documents=`).
    documents: list[dict[str, Any]] | None = None
    # tabbyAPI's: its name for chat_template_kwargs (merged into them), and text the answer starts with.
    template_vars: dict[str, Any] | None = None
    # vLLM's: this request's own chat template (served with --trust-request-chat-template).
    chat_template: Annotated[str, Field(min_length=1, max_length=256 * 1024)] | None = None
    response_prefix: Annotated[str, Field(max_length=65536)] | None = None
    # vLLM's: the content as one string or as its list of parts (auto: as the template reads it); None: the server's.
    chat_template_content_format: Literal["auto", "string", "openai"] | None = None
    # Harmless OpenAI fields: identifiers, storage and cache hints that change nothing in the output.
    metadata: dict[str, str] | None = None
    store: bool | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    prompt_cache_options: dict[str, Any] | None = None
    service_tier: str | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    modalities: list[Literal["text", "audio"]] | None = None
    # Refused when set (see _REFUSED).
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None

    @model_validator(mode="after")
    def _fold_template_vars(self) -> "ChatCompletionRequest":
        """tabby's template_vars are chat_template_kwargs: one set of variables (a clash is a 400)."""
        for key, value in (self.template_vars or {}).items():
            kwargs = self.chat_template_kwargs if self.chat_template_kwargs is not None else {}
            if key in kwargs and kwargs[key] != value:
                raise InvalidRequest(f"template_vars and chat_template_kwargs set {key!r} differently",
                                     param=f"template_vars.{key}")
            self.chat_template_kwargs = {**kwargs, key: value}
        return self

    def unsupported(self) -> InvalidRequest | None:
        if self.response_prefix is not None and not self.add_generation_prompt:
            return InvalidRequest("response_prefix follows the generation prompt: it needs add_generation_prompt",
                                  param="response_prefix")
        for key in RESERVED_TEMPLATE_KWARGS.intersection(self.chat_template_kwargs or {}):
            return InvalidRequest(f"chat_template_kwargs must not set {key!r}: it is a request field of its own",
                                  param=f"chat_template_kwargs.{key}")
        if self.min_tokens and self.max_completion_tokens is not None and self.min_tokens > self.max_completion_tokens:
            return InvalidRequest("min_tokens must not exceed max_completion_tokens", param="min_tokens")
        if self.modalities is not None and "audio" in self.modalities:
            return InvalidRequest("modalities: this model generates text only", param="modalities")
        return (super().unsupported() or refuse_if_set(self, _REFUSED) or check_service_tier(self.service_tier)
                or check_verbosity(self.verbosity, "verbosity"))

    def thinking_enabled(self) -> bool:
        """Templates take enable_thinking (Qwen3) or thinking (others); both default to on."""
        kwargs = self.chat_template_kwargs or {}
        return kwargs.get("enable_thinking", kwargs.get("thinking", True)) is not False
