"""A Messages request's prompt -> the turn's messages and tools (rostra/turn.py), each naming its own block.

Anthropic's content blocks map onto the turn's messages: `tool_use` blocks are an assistant turn's tool calls,
each `tool_result` block a tool message (before the text of the same user turn), `thinking` blocks the
turn's reasoning, which chat templates render from `reasoning_content`. A thinking block's signature is
its text sealed by this server (rostra/serving/reasoning_crypto.py): a block whose text was changed is
refused, and one sent back empty (`display: "omitted"`) gets its thinking back from the signature.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rostra.api.messages.models import (
    ImageBlock,
    InputMessage,
    MessagesRequestFields,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from rostra.errors import InvalidRequest
from rostra.serving.reasoning_crypto import ReasoningSealer
from rostra.turn import ContentPart, FunctionTool, ImagePart, TextPart, ToolCall, TurnMessage

# Claude Code starts its system prompt with this line, which differs from one request to the next
# (cc_version=2.1.330.572 ends in a fingerprint of the conversation; some set-ups add a `cch=` nonce).
# It tells the model nothing; left in, it would make every turn's prompt differ from its first token on,
# so no turn could reuse the prefix cache. It is dropped unless --keep-attribution-line.
ATTRIBUTION_LINE = re.compile(r"^x-anthropic-billing-header:[^\n]*(\n|$)")


def system_text(request: MessagesRequestFields, keep_attribution: bool) -> str:
    """The system prompt: the `system` field, then any `role: "system"` messages (OpenAI habits), in order."""
    blocks = [request.system] if isinstance(request.system, str) else [block.text for block in request.system or []]
    blocks += [_text_of(message, index) for index, message in enumerate(request.messages) if message.role == "system"]
    if not keep_attribution:
        blocks = [ATTRIBUTION_LINE.sub("", block, count=1) for block in blocks]
    return "\n".join(block for block in blocks if block)


def _text_of(message: InputMessage, index: int) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = []
    for position, block in enumerate(message.content):
        if not isinstance(block, TextBlock):
            raise InvalidRequest("a system message holds text blocks only", param=f"messages[{index}].content[{position}]")
        texts.append(block.text)
    return "\n".join(texts)


def turn_messages(request: MessagesRequestFields, sealer: ReasoningSealer,
                  keep_attribution: bool = False) -> list[TurnMessage]:
    """The conversation as the turn's messages (system first)."""
    out: list[TurnMessage] = []
    system = system_text(request, keep_attribution)
    if system:
        out.append(TurnMessage("system", system, "system"))
    keep_thinking = _thinking_turns_kept(request)
    for index, message in enumerate(request.messages):
        param = f"messages[{index}]"
        if message.role == "system":
            continue
        if isinstance(message.content, str):
            out.append(TurnMessage(message.role, message.content, param))
        elif message.role == "assistant":
            out.append(_assistant(message.content, index, sealer, index in keep_thinking))
        else:
            out += _user(message.content, index)
    if len(out) == (1 if system else 0):
        raise InvalidRequest("messages: at least one user or assistant message is required", param="messages")
    return out


def _thinking_turns_kept(request: MessagesRequestFields) -> set[int]:
    """The assistant turns whose thinking the prompt keeps: all, unless a clear_thinking edit keeps the last N."""
    assistant_turns = [i for i, m in enumerate(request.messages) if m.role == "assistant"]
    for edit in request.context_management.edits if request.context_management else []:
        keep = edit.keep if edit.keep is not None else {"type": "thinking_turns", "value": 1}
        if keep == "all":
            continue
        if not (isinstance(keep, dict) and keep.get("type") == "thinking_turns" and isinstance(keep.get("value"), int)
                and keep["value"] >= 1):
            raise InvalidRequest("keep must be 'all' or {\"type\": \"thinking_turns\", \"value\": N} with N >= 1",
                                 param="context_management.edits.keep")
        return set(assistant_turns[-keep["value"]:])
    return set(assistant_turns)


def _assistant(blocks: list[Any], index: int, sealer: ReasoningSealer, keep_thinking: bool) -> TurnMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for position, block in enumerate(blocks):
        param = f"messages[{index}].content[{position}]"
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            thought = thinking_text(block, sealer, param)
            if keep_thinking:
                reasoning.append(thought)
        elif isinstance(block, RedactedThinkingBlock):
            continue  # encrypted by another server: nothing this one can show the model
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(ToolCall({"id": block.id, "type": "function",
                                   "function": {"name": block.name, "arguments": arguments}}, param))
        else:
            raise InvalidRequest(f"an assistant message cannot hold {block.type} blocks", param=f"{param}.type")
    return TurnMessage("assistant", "".join(texts), f"messages[{index}]", tool_calls=tuple(calls),
                       reasoning="".join(reasoning) or None)


def thinking_text(block: ThinkingBlock, sealer: ReasoningSealer, param: str) -> str:
    """The thinking a signature seals; a 400 if this server did not sign it, or the text was changed."""
    try:
        sealed = sealer.open(block.signature, f"{param}.signature")
    except InvalidRequest:
        raise InvalidRequest("Invalid `signature` in `thinking` block: it was not made by this server (or its "
                             "--reasoning-key changed)", param=f"{param}.signature") from None
    if block.thinking and block.thinking != sealed:
        raise InvalidRequest("thinking blocks must be sent back unchanged: the text does not match its signature",
                             param=f"{param}.thinking")
    return sealed


def _user(blocks: list[Any], index: int) -> list[TurnMessage]:
    """Tool results first, as tool messages (templates put them right after the calls); then the text and images."""
    results: list[TurnMessage] = []
    parts: list[ContentPart] = []
    for position, block in enumerate(blocks):
        param = f"messages[{index}].content[{position}]"
        if isinstance(block, TextBlock):
            parts.append(TextPart(block.text, param))
        elif isinstance(block, ToolResultBlock):
            results.append(TurnMessage("tool", _result_content(block, param), param, tool_call_id=block.tool_use_id))
        elif isinstance(block, ImageBlock):
            parts.append(image_part(block, param))
        else:
            raise InvalidRequest(f"a user message cannot hold {block.type} blocks", param=f"{param}.type")
    return results + ([TurnMessage("user", tuple(parts), f"messages[{index}]")] if parts or not results else [])


def image_part(block: ImageBlock, param: str) -> ImagePart:
    """An `image` block as the turn's image part: its base64 source as a data URL, or its URL."""
    if block.type != "image":
        raise InvalidRequest(f"{block.type} content is not supported by this server", param=f"{param}.type")
    source = block.source or {}
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("data"), str) and isinstance(source.get("media_type"), str):
        url = f"data:{source['media_type']};base64,{source['data']}"
    elif kind == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise InvalidRequest("an image source must be {\"type\": \"base64\", \"media_type\", \"data\"} or "
                             "{\"type\": \"url\", \"url\"}", param=f"{param}.source")
    return ImagePart(url, param)


def _result_content(block: ToolResultBlock, param: str) -> tuple[ContentPart, ...] | str:
    """A tool result's text, and its images where it holds some (Claude Code's Read of a PNG)."""
    parts: list[ContentPart] = []
    if block.content is None or isinstance(block.content, str):
        parts.append(TextPart(block.content or "", param))
    else:
        for position, part in enumerate(block.content):
            part_param = f"{param}.content[{position}]"
            if isinstance(part, ImageBlock):
                parts.append(image_part(part, part_param))
            else:
                text = part.text if isinstance(part, TextBlock) else f"Tool {part.tool_name} loaded."
                parts.append(TextPart(text, part_param))
    if block.is_error:
        first = parts[0] if parts and isinstance(parts[0], TextPart) else None
        parts[:1 if first else 0] = [TextPart(f"Error: {first.text if first else ''}", param)]
    return tuple(parts) if parts else ""


def turn_tools(request: MessagesRequestFields) -> tuple[FunctionTool, ...]:
    """The tools the model is shown: all but the deferred ones a tool result has not loaded (tool search)."""
    loaded = {part.tool_name for message in request.messages if not isinstance(message.content, str)
              for block in message.content if isinstance(block, ToolResultBlock) and isinstance(block.content, list)
              for part in block.content if isinstance(part, ToolReferenceBlock)}
    names = [tool.name for tool in request.tools or []]
    unknown = sorted(loaded - set(names))
    if unknown:
        raise InvalidRequest(f"a tool_reference names {unknown[0]!r}, which is not among the tools", param="messages")
    return tuple(_turn_tool(tool, f"tools[{index}]") for index, tool in enumerate(request.tools or [])
                 if not tool.defer_loading or tool.name in loaded)


def _turn_tool(tool: Tool, param: str) -> FunctionTool:
    if len(tool.name) > 64:
        raise InvalidRequest("a function needs a name of 1 to 64 characters", param=f"{param}.name")
    description = tool.description or ""
    if tool.input_examples:
        examples = "\n".join(json.dumps(example, ensure_ascii=False) for example in tool.input_examples)
        description = f"{description}\n\nExamples of input:\n{examples}".strip()
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if description:
        function["description"] = description
    if tool.strict:
        function["strict"] = True
    return FunctionTool(tool.name, tool.input_schema, bool(tool.strict), {"type": "function", "function": function},
                        f"{param}.input_schema")
