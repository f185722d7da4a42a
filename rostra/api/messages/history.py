"""A Messages request's prompt -> the chat messages and tools the shared pipeline templates.

Anthropic's content blocks map onto chat messages: `tool_use` blocks are an assistant turn's tool calls,
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


def chat_messages(request: MessagesRequestFields, sealer: ReasoningSealer, keep_attribution: bool = False) -> list[dict[str, Any]]:
    """The conversation as chat messages (system first)."""
    out: list[dict[str, Any]] = []
    system = system_text(request, keep_attribution)
    if system:
        out.append({"role": "system", "content": system})
    keep_thinking = _thinking_turns_kept(request)
    for index, message in enumerate(request.messages):
        if message.role == "system":
            continue
        if isinstance(message.content, str):
            out.append({"role": message.role, "content": message.content})
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


def _assistant(blocks: list[Any], index: int, sealer: ReasoningSealer, keep_thinking: bool) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
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
            calls.append({"id": block.id, "type": "function",
                          "function": {"name": block.name, "arguments": json.dumps(block.input, ensure_ascii=False)}})
        else:
            raise InvalidRequest(f"an assistant message cannot hold {block.type} blocks", param=f"{param}.type")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    return message


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


def _user(blocks: list[Any], index: int) -> list[dict[str, Any]]:
    """Tool results first, as tool messages (templates put them right after the calls); then the text and images."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        param = f"messages[{index}].content[{position}]"
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolResultBlock):
            results.append({"role": "tool", "tool_call_id": block.tool_use_id,
                            "content": _result_content(block, param)})
        elif isinstance(block, ImageBlock):
            parts.append(image_part(block, param))
        else:
            raise InvalidRequest(f"a user message cannot hold {block.type} blocks", param=f"{param}.type")
    return results + ([{"role": "user", "content": _joined(parts)}] if parts or not results else [])


def image_part(block: ImageBlock, param: str) -> dict[str, Any]:
    """An `image` block as the chat image part the pipeline loads: its base64 source as a data URL, or its URL."""
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
    return {"type": "image_url", "image_url": {"url": url}, "source_param": param}


def _joined(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text only: one string (as before images); with images, the parts in order."""
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _result_content(block: ToolResultBlock, param: str) -> str | list[dict[str, Any]]:
    """A tool result's text, or its parts where it holds images (Claude Code's Read of a PNG)."""
    if block.content is None or isinstance(block.content, str):
        parts = [{"type": "text", "text": block.content or ""}]
    else:
        parts = []
        for position, part in enumerate(block.content):
            if isinstance(part, ImageBlock):
                parts.append(image_part(part, f"{param}.content[{position}]"))
            else:
                parts.append({"type": "text",
                              "text": part.text if isinstance(part, TextBlock) else f"Tool {part.tool_name} loaded."})
    if block.is_error:
        if not parts or parts[0]["type"] != "text":
            parts.insert(0, {"type": "text", "text": ""})
        parts[0] = {"type": "text", "text": f"Error: {parts[0]['text']}"}
    return _joined(parts) if parts else ""


def chat_tools(request: MessagesRequestFields) -> list[dict[str, Any]]:
    """The tools the model is shown: all but the deferred ones a tool result has not loaded (tool search)."""
    loaded = {part.tool_name for message in request.messages if not isinstance(message.content, str)
              for block in message.content if isinstance(block, ToolResultBlock) and isinstance(block.content, list)
              for part in block.content if isinstance(part, ToolReferenceBlock)}
    names = [tool.name for tool in request.tools or []]
    unknown = sorted(loaded - set(names))
    if unknown:
        raise InvalidRequest(f"a tool_reference names {unknown[0]!r}, which is not among the tools", param="messages")
    return [_chat_tool(tool) for tool in request.tools or [] if not tool.defer_loading or tool.name in loaded]


def _chat_tool(tool: Tool) -> dict[str, Any]:
    description = tool.description or ""
    if tool.input_examples:
        examples = "\n".join(json.dumps(example, ensure_ascii=False) for example in tool.input_examples)
        description = f"{description}\n\nExamples of input:\n{examples}".strip()
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.input_schema}
    if description:
        function["description"] = description
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}
