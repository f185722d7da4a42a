"""The Messages API's request bodies, in the shapes of the `anthropic` SDK's `*Param` types.

Strict like the OpenAI models (rostra/protocol/strict.py): an unknown field is a 400 naming it (or, with
`--unknown-params ignore`, logged and dropped). Claude Code sends fields beyond the public reference
(`thinking.display`, `context_management`, `defer_loading` on tools, `metadata.user_id` as a JSON string):
they are declared here, and each is honoured or refused by name, never silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from rostra.errors import InvalidRequest
from rostra.api.messages.errors import ThreadsUnsupported
from rostra.protocol.strict import RequestModel, StrictModel

MAX_STOP_SEQUENCES = 16  # rostra's limit for stop strings (the decoder holds back their prefixes)


class CacheControl(StrictModel):
    """Prompt-caching breakpoints: rostra's prefix cache needs none (every prefix is reused), so they change nothing."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextBlock(StrictModel):
    type: Literal["text"]
    text: str
    cache_control: CacheControl | None = None
    citations: list[dict[str, Any]] | None = None  # citations of earlier answers: their text is what counts


class ImageBlock(StrictModel):
    """`image` blocks are read (rostra/api/messages/history.py: base64 and url sources); `search_result` blocks
    are accepted by shape and refused with a 400."""

    type: Literal["image", "search_result"]
    source: dict[str, Any] | None = None
    cache_control: CacheControl | None = None


class DocumentBlock(StrictModel):
    """A `document` block: a PDF (base64 or url source), plain text (text source) or content blocks (content
    source), read as text before the turn is built (rostra/api/messages/documents.py)."""

    type: Literal["document"]
    source: dict[str, Any]
    title: str | None = None
    context: str | None = None
    citations: dict[str, Any] | None = None  # {"enabled": ...}: accepted; the answer carries no citations
    cache_control: CacheControl | None = None


class ToolReferenceBlock(StrictModel):
    """In a tool result (tool search): the named deferred tool is now loaded, as if it were not deferred."""

    type: Literal["tool_reference"]
    tool_name: str
    cache_control: CacheControl | None = None


class ToolUseBlock(StrictModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: CacheControl | None = None
    caller: dict[str, Any] | None = None  # programmatic tool calling's caller: who called (nothing to do here)


ToolResultContent = Annotated[Union[TextBlock, ImageBlock, ToolReferenceBlock], Field(discriminator="type")]


class ToolResultBlock(StrictModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[ToolResultContent] | None = None
    is_error: bool | None = None
    cache_control: CacheControl | None = None


class ThinkingBlock(StrictModel):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(StrictModel):
    type: Literal["redacted_thinking"]
    data: str


ContentBlock = Annotated[Union[TextBlock, ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock,
                               RedactedThinkingBlock], Field(discriminator="type")]


class InputMessage(StrictModel):
    # "system" is not Anthropic's, but clients built for OpenAI send it (vLLM broke on it): read as system text.
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class Tool(StrictModel):
    name: Annotated[str, Field(min_length=1, max_length=128)]
    input_schema: dict[str, Any]
    description: str | None = None
    type: Literal["custom"] | None = None
    cache_control: CacheControl | None = None
    # Tool search: a deferred tool stays out of the prompt until a tool_reference in a tool result loads it.
    defer_loading: bool | None = None
    strict: bool | None = None  # true: its calls' input must match the schema exactly (as for tool_choice any/tool)
    input_examples: list[dict[str, Any]] | None = None  # shown to the model after the description
    eager_input_streaming: bool | None = None  # input is streamed as generated either way
    allowed_callers: list[str] | None = None  # programmatic tool calling: the model is the only caller here


class ToolChoice(StrictModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class Thinking(StrictModel):
    # adaptive (the model decides how much) and between_tools (thinking between tool calls): thinking is on.
    type: Literal["enabled", "disabled", "adaptive", "between_tools"]
    budget_tokens: int | None = None
    # "omitted": thinking blocks come with an empty text and the signature only (Claude Code asks for this).
    display: Literal["summarized", "omitted"] | None = None


class JsonOutputFormat(StrictModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(StrictModel):
    # Effort is the model's to judge here: a local model has one way of answering, whatever the level.
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonOutputFormat | None = None  # structured outputs: the answer is JSON valid against the schema


class Metadata(StrictModel):
    user_id: str | None = None


class ContextEdit(StrictModel):
    type: str
    keep: Any = None
    trigger: Any = None
    clear_at_least: Any = None
    clear_tool_inputs: Any = None
    exclude_tools: Any = None


class ContextManagement(StrictModel):
    edits: list[ContextEdit] = []


class MessagesRequestFields(RequestModel):
    """What /v1/messages and /v1/messages/count_tokens share: the prompt."""

    model: str
    messages: list[InputMessage]
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    context_management: ContextManagement | None = None
    # Refused when set: a local server has no MCP connector, no code-execution container.
    mcp_servers: list[dict[str, Any]] | None = None
    container: str | dict[str, Any] | None = None
    output_config: OutputConfig | None = None
    output_format: JsonOutputFormat | None = None  # the structured-outputs beta's name for output_config.format
    # Harmless: one automatic cache breakpoint (every prefix is cached here anyway), one speed, identifiers.
    cache_control: CacheControl | None = None
    speed: Literal["standard", "fast"] | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    # Prompt-cache divergence reports: rostra reports none (`diagnostics` is null in every Message).
    diagnostics: dict[str, Any] | None = None
    # The message-threads beta: refused with the error the SDKs fall back on (the whole conversation, unthreaded).
    thread: dict[str, Any] | None = None

    def unknown_fields(self, prefix: str = "") -> list[str]:
        names = super().unknown_fields(prefix)
        for path, block in self._blocks():
            names += block.unknown_fields(f"{prefix}{path}")
        return names

    def drop_unknown_fields(self) -> None:
        super().drop_unknown_fields()
        for _, block in self._blocks():
            block.drop_unknown_fields()

    def _blocks(self) -> list[tuple[str, StrictModel]]:
        """The messages and their content blocks, with their paths: lists, which StrictModel does not walk."""
        found: list[tuple[str, StrictModel]] = []
        for number, message in enumerate(self.messages):
            found.append((f"messages[{number}].", message))
            for index, block in enumerate(message.content if isinstance(message.content, list) else ()):
                found.append((f"messages[{number}].content[{index}].", block))
                parts = block.content if isinstance(block, ToolResultBlock) else None
                for part_index, part in enumerate(parts if isinstance(parts, list) else ()):
                    found.append((f"messages[{number}].content[{index}].content[{part_index}].", part))
        for index, text in enumerate(self.system if isinstance(self.system, list) else ()):
            found.append((f"system[{index}].", text))
        return found

    def unsupported(self) -> InvalidRequest | None:
        if self.thread is not None:
            return ThreadsUnsupported()
        unanswered = unmatched_tool_result(self.messages)
        if unanswered is not None:
            return unanswered
        if self.mcp_servers:
            return InvalidRequest("mcp_servers is not supported: this server has no MCP connector",
                                  param="mcp_servers")
        if self.container is not None:
            return InvalidRequest("container is not supported: this server runs no code execution", param="container")
        for index, edit in enumerate(self.context_management.edits if self.context_management else []):
            if edit.type != "clear_thinking_20251015":
                return InvalidRequest(f"context_management edit {edit.type!r} is not supported "
                                      "(clear_thinking_20251015 is)", param=f"context_management.edits[{index}].type")
        if self.thinking and self.thinking.type == "enabled" and self.thinking.budget_tokens is None:
            return InvalidRequest("thinking.budget_tokens: Field required", param="thinking.budget_tokens")
        if self.thinking and self.thinking.budget_tokens is not None and self.thinking.budget_tokens < 1024:
            return InvalidRequest("thinking.budget_tokens: Input should be greater than or equal to 1024",
                                  param="thinking.budget_tokens")
        return None


def unmatched_tool_result(messages: list[InputMessage]) -> InvalidRequest | None:
    """A tool_result must answer a tool_use of the assistant message before it, as Anthropic requires (and words
    it): a result for a call never made would reach the model as an answer to nothing."""
    called: set[str] = set()
    for number, message in enumerate(messages):
        blocks = message.content if isinstance(message.content, list) else []
        if message.role == "assistant":
            called = {block.id for block in blocks if isinstance(block, ToolUseBlock)}
            continue
        for index, block in enumerate(blocks):
            if isinstance(block, ToolResultBlock) and block.tool_use_id not in called:
                return InvalidRequest(
                    f"messages.{number}.content.{index}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in "
                    "the previous message.", param=f"messages.{number}.content.{index}")
    return None


class MessagesRequest(MessagesRequestFields):
    max_tokens: Annotated[int, Field(ge=1)]
    stream: bool = False
    stop_sequences: Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_STOP_SEQUENCES)] | None = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: Annotated[float, Field(ge=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None
    metadata: Metadata | None = None
    service_tier: Literal["auto", "standard_only"] | None = None
    inference_geo: str | None = None  # where to run: here

    def unsupported(self) -> InvalidRequest | None:
        refusal = super().unsupported()
        if refusal is None and self.thinking and self.thinking.type == "enabled":
            if (self.thinking.budget_tokens or 0) >= self.max_tokens:
                return InvalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`",
                                      param="thinking.budget_tokens")
        return refusal


class CountTokensRequest(MessagesRequestFields):
    pass
