"""A Responses turn as the Chat Completions request the shared pipeline prepares: the conversation's items as
chat messages, the request's tools as chat tools, text.format as response_format."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from rostra.api.responses.mcp.loop import expand_mcp
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.tools import Tool
from rostra.errors import InvalidRequest
from rostra.protocol.chat import ChatCompletionRequest

LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs


def items_to_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    reasoning = ""  # a reasoning item belongs to the assistant turn that follows it
    for item in expand_mcp(items):
        kind = item["type"]
        if kind == "reasoning":
            reasoning += "".join(part.get("text", "") for part in item.get("content") or [])
        elif kind == "message":
            text = "".join(part["text"] for part in item["content"])
            message = {"role": item["role"], "content": text}
            if item["role"] == "assistant" and reasoning:
                message["reasoning_content"], reasoning = reasoning, ""
            messages.append(message)
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant" and last.get("tool_calls") is not None and not last["content"]:
                last["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                message = {"role": "assistant", "content": "", "tool_calls": [call]}
                if reasoning:
                    message["reasoning_content"], reasoning = reasoning, ""
                messages.append(message)
        elif kind == "function_call_output":
            output = item["output"]
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": output if isinstance(output, str) else json.dumps(output)})
    return messages


def chat_request(request: CreateResponseRequest, tools: list[Tool], items: list[dict[str, Any]],
                 mcp_tools: list[dict[str, Any]] | None = None) -> ChatCompletionRequest:
    """The chat request of one model turn: the conversation so far, the request's tools and the MCP tools."""
    messages = items_to_messages(items)
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "parallel_tool_calls": request.parallel_tool_calls}
    chat_tools = [chat_tool for tool in tools for chat_tool in tool.chat_tools()]
    if chat_tools or mcp_tools:
        body["tools"] = chat_tools + (mcp_tools or [])
    if request.tool_choice is not None:
        choice = request.tool_choice
        if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
            choice = {"type": "function", "function": {"name": choice["name"]}}
        elif isinstance(choice, dict) and choice.get("type") == "mcp":  # one of a server's tools, or any tool
            choice = {"type": "function", "function": {"name": choice["name"]}} if choice.get("name") else "required"
        body["tool_choice"] = choice
    if request.text and request.text.format and request.text.format.get("type") == "json_schema":
        spec = request.text.format
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": spec.get("name", "output"), "schema": spec.get("schema"), "strict": spec.get("strict")}}
    elif request.text and request.text.format:
        body["response_format"] = request.text.format
    for source, target in (("max_output_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                           ("top_p", "top_p"), ("user", "user")):
        if getattr(request, source) is not None:
            body[target] = getattr(request, source)
    if request.reasoning and request.reasoning.effort:
        body["reasoning_effort"] = request.reasoning.effort
    if LOGPROBS in (request.include or []):
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs or 0
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise InvalidRequest(f"invalid request: {first['msg']}", param="input") from exc


def next_start(conversation: list[dict[str, Any]], start: int) -> int | None:
    """Where the conversation starts once its oldest turn is dropped: at the next user message (a whole
    turn goes: never a tool output without its call), and never past the newest item."""
    index = start + 1
    while index < len(conversation) - 1 and not (conversation[index].get("type") == "message"
                                                 and conversation[index].get("role") == "user"):
        index += 1
    return index if index < len(conversation) else None
