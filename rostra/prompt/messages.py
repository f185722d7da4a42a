"""Chat messages as the wire gives them -> the dicts chat templates expect."""

from __future__ import annotations

import json
from typing import Any

from rostra.errors import InvalidRequest
from rostra.protocol.chat import ChatMessage

_TEXT_PART_TYPES = {"text", "input_text", "output_text"}


def message_text(message: ChatMessage, index: int) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part_index, part in enumerate(content):
        if part.type not in _TEXT_PART_TYPES or part.text is None:
            raise InvalidRequest(f"content part type {part.type!r} is not supported by this model (text only)",
                                 param=f"messages[{index}].content[{part_index}]")
        texts.append(part.text)
    return "\n".join(texts)


def template_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Most templates know system/user/assistant/tool only: developer -> system, function -> tool."""
    rendered = []
    for index, message in enumerate(messages):
        role = {"developer": "system", "function": "tool"}.get(message.role, message.role)
        item: dict[str, Any] = {"role": role, "content": message_text(message, index)}
        if message.name:
            item["name"] = message.name
        if message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        if message.tool_calls:
            item["tool_calls"] = [_template_tool_call(call, f"messages[{index}].tool_calls[{number}]")
                                  for number, call in enumerate(message.tool_calls)]
        reasoning = message.reasoning_content or message.reasoning
        if reasoning:
            item["reasoning_content"] = reasoning
        rendered.append(item)
    return rendered


def _template_tool_call(call: dict[str, Any], param: str) -> dict[str, Any]:
    """Templates index arguments as a mapping (`arguments | tojson`, `arguments.items()`)."""
    function = call.get("function") or {}
    if not isinstance(function, dict):
        raise InvalidRequest("a tool call's function must be an object with a name and arguments",
                             param=f"{param}.function")
    function = dict(function)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):  # not JSON (or nested past the parser): kept as text
            pass
    return {**call, "function": function}
