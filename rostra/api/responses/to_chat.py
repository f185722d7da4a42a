"""A Responses turn as the Chat Completions request the shared pipeline prepares: the conversation's items as
chat messages, the request's tools as chat tools, text.format as response_format."""

from __future__ import annotations

import re

from typing import Any

from pydantic import ValidationError

from rostra.api.responses.calls import CALL_OUTPUTS, ToolRoutes, chat_call, output_text
from rostra.api.responses.mcp.loop import expand_mcp
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.tools import CustomTool, Tool
from rostra.errors import InvalidRequest
from rostra.protocol.chat import ChatCompletionRequest

LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs
# How a compaction item reads to the model: the summary of the conversation it replaces.
COMPACTED = "Summary of the conversation so far (earlier messages were compacted into it):\n\n{summary}"
# The request a compaction turn makes of the model, after the conversation it summarizes.
COMPACT = ("Summarize the conversation so far for yourself, to continue the task from this summary alone: the "
           "user's goal and constraints, what has been done and found (files, commands, results), decisions made, "
           "and what remains to do next. Write only the summary.")


def offer(tools: list[Tool]) -> tuple[list[dict[str, Any]], ToolRoutes]:
    """The functions the model is offered for the request's tools, and what each stands for."""
    routes = ToolRoutes()
    taken = {route.name for tool in tools for route, _ in tool.offered() if route.namespace is None}
    chat_tools = []
    for tool in tools:
        for route, function in tool.offered():
            chat_tools.append({"type": "function", "function": {**function, "name": routes.add(route, taken)}})
    return chat_tools, routes


def items_to_messages(items: list[dict[str, Any]], routes: ToolRoutes | None = None) -> list[dict[str, Any]]:
    routes = routes or ToolRoutes()
    messages: list[dict[str, Any]] = []
    reasoning = ""  # a reasoning item belongs to the assistant turn that follows it
    for item in expand_mcp(items):
        kind = item["type"]
        call = chat_call(item, routes)
        if kind == "reasoning":
            reasoning += reasoning_text(item)
        elif kind == "message":
            message = {"role": item["role"], "content": chat_content(item["content"], item, "")}
            if item["role"] == "assistant" and reasoning:
                message["reasoning_content"], reasoning = reasoning, ""
            messages.append(message)
        elif call is not None:
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant" and last.get("tool_calls") is not None and not last["content"]:
                last["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                message = {"role": "assistant", "content": "", "tool_calls": [call]}
                if reasoning:
                    message["reasoning_content"], reasoning = reasoning, ""
                messages.append(message)
        elif kind == "compaction":  # what came before it, summarized (opened by reasoning_crypto.opened)
            messages.append({"role": "user", "content": COMPACTED.format(summary=item["summary_text"])})
        elif kind in CALL_OUTPUTS:
            # local_shell_call_output names its call by `id` (OpenAI's schema); the others by `call_id`
            call_id = item.get("call_id") or item["id"]
            output = item["output"]
            content = chat_content(output, item, "\n") if has_images(output) else output_text(output)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return messages


def has_images(parts: Any) -> bool:
    return isinstance(parts, list) and any(isinstance(part, dict) and part.get("type") == "input_image"
                                           for part in parts)


def chat_content(parts: list[dict[str, Any]], item: dict[str, Any], joiner: str) -> str | list[dict[str, Any]]:
    """Content parts as chat content: the text joined, or, where there are images, text and image parts in order.
    An image's errors name it by its item's id (the item may come from an earlier response)."""
    if not has_images(parts):
        return joiner.join(part["text"] for part in parts if isinstance(part.get("text"), str))
    out: list[dict[str, Any]] = []
    for position, part in enumerate(parts):
        param = f"input[id={item.get('id')}].content[{position}]"
        if part.get("type") != "input_image":
            out.append({"type": "text", "text": part.get("text") or ""})
        elif part.get("file_id") and not part.get("image_url"):
            raise InvalidRequest("input_image by file_id is not supported: this server has no Files API; send "
                                 "image_url (a data URL or an http(s) URL)", param=param)
        elif not isinstance(part.get("image_url"), str):
            raise InvalidRequest("an input_image needs image_url", param=param)
        else:
            out.append({"type": "image_url", "image_url": {"url": part["image_url"]}, "source_param": param})
    return out


def reasoning_text(item: dict[str, Any]) -> str:
    """A reasoning item's thinking: its content's text, else its summary's (rostra's own items carry the thinking
    in one or the other, by whether a summary was asked for)."""
    parts = item.get("content") or item.get("summary") or []
    return "".join(part.get("text", "") for part in parts if isinstance(part, dict))


def forced_freeform(request: CreateResponseRequest, tools: list[Tool]) -> CustomTool | None:
    """The custom tool with a grammar that `tool_choice` forces, if any: the turn's whole output is then its
    input, constrained by that grammar (the builder makes it a custom_tool_call)."""
    choice = request.tool_choice
    if not (isinstance(choice, dict) and choice.get("type") == "custom"):
        return None
    tool = next((tool for tool in tools if isinstance(tool, CustomTool) and tool.name == choice.get("name")), None)
    return tool if tool is not None and tool.grammar() is not None else None


def conversation_id(conversation: str | dict[str, Any] | None) -> str | None:
    """A `conversation` field's id (it is an id, or {"id": ...})."""
    if isinstance(conversation, dict):
        value = conversation.get("id")
        return value if isinstance(value, str) else None
    return conversation


def chat_request(request: CreateResponseRequest, tools: list[Tool], items: list[dict[str, Any]],
                 mcp_tools: list[dict[str, Any]] | None = None) -> ChatCompletionRequest:
    """The chat request of one model turn: the conversation so far, the request's tools and the MCP tools."""
    chat_tools, routes = offer(tools)
    messages = items_to_messages(items, routes)
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "parallel_tool_calls": request.parallel_tool_calls}
    if chat_tools or mcp_tools:
        body["tools"] = chat_tools + (mcp_tools or [])
    choice = request.tool_choice
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom") and "name" in choice:
        name = routes.model_name(choice["name"], choice.get("namespace"))
        choice = {"type": "function", "function": {"name": name}}
    elif isinstance(choice, dict) and choice.get("type") == "mcp":  # one of a server's tools, or any tool
        choice = {"type": "function", "function": {"name": choice["name"]}} if choice.get("name") else "required"
    elif choice in ("auto", "none") and "tools" not in body:
        choice = None  # no tools to choose from (Codex's compaction request: `tools: []`, "auto")
    freeform = forced_freeform(request, tools)
    if freeform is not None:  # the output is the input itself, under the tool's grammar (not JSON arguments)
        choice = "none"
        body.update(freeform.grammar() or {})
    if choice is not None:
        body["tool_choice"] = choice
    if freeform is not None:
        pass  # the grammar governs the whole output: text.format has no text to apply to
    elif request.text and request.text.format and request.text.format.get("type") == "json_schema":
        spec = request.text.format
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": spec.get("name", "output"), "schema": spec.get("schema"), "strict": spec.get("strict")}}
    elif request.text and request.text.format:
        body["response_format"] = request.text.format
    if request.text and request.text.verbosity:  # a hint for templates that read it (gpt-oss's does not)
        body["chat_template_kwargs"] = {"verbosity": request.text.verbosity}
    for source, target in (("max_output_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                           ("top_p", "top_p"), ("user", "user")):
        if getattr(request, source) is not None:
            body[target] = getattr(request, source)
    if request.reasoning and request.reasoning.effort:
        body["reasoning_effort"] = request.reasoning.effort
    session = request.prompt_cache_key or conversation_id(request.conversation)  # (Codex: its conversation's id)
    if session:
        body["prompt_cache_key"] = session
    if LOGPROBS in (request.include or []):
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs or 0
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"][:1]) or "input"
        raise InvalidRequest(f"invalid request: {first['msg']}", param=responses_param(field)) from exc


def next_start(conversation: list[dict[str, Any]], start: int) -> int | None:
    """Where the conversation starts once its oldest turn is dropped: at the next user message (a whole
    turn goes: never a tool output without its call), and never past the newest item."""
    index = start + 1
    while index < len(conversation) - 1 and not (conversation[index].get("type") == "message"
                                                 and conversation[index].get("role") == "user"):
        index += 1
    return index if index < len(conversation) else None


# A chat request's parameters as a Responses request spells them (prefixes; the rest of the path is kept).
CHAT_TO_RESPONSES_PARAMS = (("max_completion_tokens", "max_output_tokens"), ("response_format.json_schema", "text.format"),
                            ("response_format", "text.format"), ("reasoning_effort", "reasoning.effort"),
                            ("tool_choice.function", "tool_choice"))
TOOL_FUNCTION = re.compile(r"^tools\[(\d+)\]\.function")


def responses_param(chat_param: str | None) -> str | None:
    """A chat request's parameter as this request spelled it: a 400 names what the client sent."""
    if chat_param is None:
        return None
    if chat_param == "messages" or chat_param.startswith("messages["):  # (the items' numbers differ)
        return "input"
    for chat_name, name in CHAT_TO_RESPONSES_PARAMS:
        if chat_param == chat_name or chat_param.startswith(chat_name + ".") or chat_param.startswith(chat_name + "["):
            return name + chat_param[len(chat_name):]
    return TOOL_FUNCTION.sub(r"tools[\1]", chat_param)  # Responses' function tools are flat
