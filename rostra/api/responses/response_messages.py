"""vLLM's `enable_response_messages`: a response that also carries the conversation as the model saw it.

vLLM answers it with its own prompt formats (harmony messages for gpt-oss; otherwise the raw prompt and output
as text and token ids). rostra renders every model through a chat template (gpt-oss too, through harmony), so it
answers with what that template received: `input_messages`, the chat messages of the response's first model turn
(instructions, the stored conversation it continues, its input), and `output_messages`, those of everything its
model turns wrote (answers, reasoning as `reasoning_content`, tool calls, and the results of the MCP calls rostra
ran), in Chat Completions' message shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from rostra.api.responses.calls import ToolRoutes
from rostra.api.responses.to_chat import items_to_messages
from rostra.turn import ImagePart, TextPart, Turn, TurnMessage


class ResponseMessages(NamedTuple):
    input_messages: list[dict[str, Any]]  # the first model turn's prompt, as Chat messages
    output_messages: list[dict[str, Any]]  # the response's output, as Chat messages


def response_messages(first_turn: Any, output: list[dict[str, Any]], routes: ToolRoutes) -> ResponseMessages:
    """The two fields: `first_turn` is the first model turn's job request (a Turn; a relayed turn's too)."""
    read = first_turn.messages if isinstance(first_turn, Turn) else ()
    return ResponseMessages(chat_messages(read), chat_messages(items_to_messages(output, routes)))


def chat_messages(messages: Sequence[TurnMessage]) -> list[dict[str, Any]]:
    return [chat_message(message) for message in messages]


def chat_message(message: TurnMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": _content(message.content)}
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [dict(call.fields) for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    return out


def _content(content: str | tuple[Any, ...] | None) -> str | list[dict[str, Any]] | None:
    """Text as it is; parts as Chat's (an image by its URL: a data URL stays whole)."""
    if content is None or isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": part.url}})
        else:
            parts.append({"type": part.type})
    return parts
