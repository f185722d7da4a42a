"""A Responses model turn as the typed turn the shared pipeline prepares (rostra/turn.py): the conversation's items
as the turn's messages, the request's tools (and the MCP servers') as its functions, text.format as its
constraint; each piece that can fail names the request's own field (`input[id=...].content[1]`, `tools[2].parameters`,
`text.format.schema`, `max_output_tokens`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from rostra.api.responses.calls import CALL_OUTPUTS, ToolRoutes, chat_call, output_text
from rostra.api.responses.mcp.loop import expand_mcp
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.tools import CustomTool, Tool
from rostra.errors import InvalidRequest
from rostra.guided.constraints import Constraint, response_constraint, schema_constraint
from rostra.sampling import INT32_MAX, Sampling
from rostra.serving.chat_turn import EMPTY_PARAMETERS
from rostra.turn import (Budget, ContentPart, FunctionTool, ImagePart, OutputOptions, TemplateOptions, TextPart,
                         ToolCall, ToolChoice, ToolChoiceKind, Turn, TurnMessage)

LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs
# How a compaction item reads to the model: the summary of the conversation it replaces.
COMPACTED = "Summary of the conversation so far (earlier messages were compacted into it):\n\n{summary}"
# The request a compaction turn makes of the model, after the conversation it summarizes.
COMPACT = ("Summarize the conversation so far for yourself, to continue the task from this summary alone: the "
           "user's goal and constraints, what has been done and found (files, commands, results), decisions made, "
           "and what remains to do next. Write only the summary.")


def offer(tools: list[Tool]) -> tuple[tuple[FunctionTool, ...], ToolRoutes]:
    """The functions the model is offered for the request's tools, and what each stands for."""
    routes = ToolRoutes()
    taken = {route.name for tool in tools for route, _ in tool.offered() if route.namespace is None}
    offered = []
    for index, tool in enumerate(tools):
        for position, (route, function) in enumerate(tool.offered()):
            named = {**function, "name": routes.add(route, taken)}
            param = f"tools[{index}]" if route.namespace is None else f"tools[{index}].tools[{position}]"
            offered.append(offered_function(named, param))
    return tuple(offered), routes


def offered_function(function: dict[str, Any], param: str) -> FunctionTool:
    name = function["name"]
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidRequest("a function needs a name of 1 to 64 characters", param=f"{param}.name")
    return FunctionTool(name, function.get("parameters", EMPTY_PARAMETERS), function.get("strict") is True,
                        {"type": "function", "function": function}, f"{param}.parameters")


def input_paths(items: list[dict[str, Any]]) -> dict[str, str]:
    """The request's own input items (`normalize_input`'s, references resolved) by id: their path, `input[i]`."""
    return {item["id"]: f"input[{index}]" for index, item in enumerate(items) if isinstance(item.get("id"), str)}


def item_path(item: dict[str, Any], paths: Mapping[str, str]) -> str:
    """Where a 400 about `item` points: `input[i]` for the request's own items; an item of the stored conversation
    it continues (previous_response_id, conversation) is in no list of this request: named by its id."""
    return paths.get(item.get("id") or "", f"input[id={item.get('id')}]")


def items_to_messages(items: list[dict[str, Any]], routes: ToolRoutes | None = None,
                      paths: Mapping[str, str] = MappingProxyType({})) -> list[TurnMessage]:
    routes = routes or ToolRoutes()
    messages: list[TurnMessage] = []
    reasoning = ""  # a reasoning item belongs to the assistant turn that follows it
    for item in expand_mcp(items):
        kind, path = item["type"], item_path(item, paths)
        call = chat_call(item, routes)
        if kind == "reasoning":
            reasoning += reasoning_text(item)
        elif kind == "message":
            thought = reasoning if item["role"] == "assistant" else ""
            reasoning = "" if thought else reasoning
            messages.append(TurnMessage(item["role"], turn_content(item["content"], f"{path}.content", ""), path,
                                        reasoning=thought or None,
                                        phase=item.get("phase") if item["role"] == "assistant" else None))
        elif call is not None:
            last = messages[-1] if messages else None
            if last and last.role == "assistant" and last.tool_calls and not last.content:
                messages[-1] = replace(last, tool_calls=(*last.tool_calls, ToolCall(call, path)))  # parallel calls
            else:
                messages.append(TurnMessage("assistant", "", path, tool_calls=(ToolCall(call, path),),
                                            reasoning=reasoning or None))
                reasoning = ""
        elif kind == "compaction":  # what came before it, summarized (opened by reasoning_crypto.opened)
            messages.append(TurnMessage("user", COMPACTED.format(summary=item["summary_text"]), path))
        elif kind in CALL_OUTPUTS:
            # local_shell_call_output names its call by `id` (OpenAI's schema); the others by `call_id`
            output = item["output"]
            content = turn_content(output, f"{path}.output", "\n") if has_images(output) else output_text(output)
            messages.append(TurnMessage("tool", content, path, tool_call_id=item.get("call_id") or item["id"]))
    return messages


IMAGE_DETAILS = ("low", "high", "auto", "original")


def has_images(parts: Any) -> bool:
    return isinstance(parts, list) and any(isinstance(part, dict) and part.get("type") == "input_image"
                                           for part in parts)


def turn_content(parts: list[dict[str, Any]], path: str, joiner: str) -> str | tuple[ContentPart, ...]:
    """Content parts as the turn's content: the text joined, or, where there are images, text and image parts in
    order. Each part is named by its path: `path` (its list's: `input[i].content`, a call output's
    `input[i].output`) and its index."""
    if not has_images(parts):
        return joiner.join(part["text"] for part in parts if isinstance(part.get("text"), str))
    out: list[ContentPart] = []
    for position, part in enumerate(parts):
        param = f"{path}[{position}]"
        if part.get("type") != "input_image":
            out.append(TextPart(part.get("text") or "", param))
        elif part.get("file_id") and not part.get("image_url"):
            raise InvalidRequest("an input_image by file_id is read in user messages only: here send image_url (a "
                                 "data URL or an http(s) URL)", param=param)
        elif not isinstance(part.get("image_url"), str):
            raise InvalidRequest("an input_image needs image_url", param=param)
        elif part.get("detail") not in (None, *IMAGE_DETAILS):  # accepted: the engine sees its own resolution
            raise InvalidRequest(f"an input_image's detail must be one of {', '.join(IMAGE_DETAILS)}",
                                 param=f"{param}.detail")
        else:
            out.append(ImagePart(part["image_url"], param))
    return tuple(out)


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


def response_turn(request: CreateResponseRequest, tools: list[Tool], items: list[dict[str, Any]],
                  mcp_tools: list[dict[str, Any]] | None = None,
                  paths: Mapping[str, str] = MappingProxyType({})) -> Turn:
    """The turn of one model turn: the conversation so far, the request's tools and the MCP tools. `paths`: the
    request's own input items' paths (`input_paths`), which a 400 about one of them names."""
    offered, routes = offer(tools)
    offered += tuple(offered_function(tool["function"], "tools") for tool in mcp_tools or [])
    messages = items_to_messages(items, routes, paths)
    if request.instructions:
        messages.insert(0, TurnMessage("system", request.instructions, "instructions"))
    if not messages:
        raise InvalidRequest("invalid request: the conversation holds no message", param="input")
    freeform = forced_freeform(request, tools)
    logprobs = LOGPROBS in (request.include or [])
    session = request.prompt_cache_key or conversation_id(request.conversation)  # (Codex: its conversation's id)
    return Turn(
        model=request.model, messages=tuple(messages), sampling=_sampling(request), user=request.user, tools=offered,
        tool_choice=_tool_choice(request, routes, bool(offered), freeform is not None),
        parallel_tool_calls=request.parallel_tool_calls,
        # A forced freeform call's grammar governs the whole output: text.format has no text to apply to.
        constraint=response_constraint(None, freeform.grammar() or {}) if freeform else _format_constraint(request),
        budget=Budget(request.max_output_tokens, "max_output_tokens", prompt_param="input"),
        # text.verbosity: a hint for templates that read it (gpt-oss's does not)
        template=TemplateOptions({"verbosity": request.text.verbosity} if request.text and request.text.verbosity
                                 else {}),
        session_key=session or None, reasoning_effort=(request.reasoning.effort if request.reasoning else None) or None,
        logprobs=logprobs, top_logprobs=(request.top_logprobs or 0) if logprobs else None,
        output=OutputOptions(logprobs=logprobs))


def _tool_choice(request: CreateResponseRequest, routes: ToolRoutes, have_tools: bool, freeform: bool) -> ToolChoice:
    choice = request.tool_choice
    if freeform:  # the output is the input itself, under the tool's grammar (not JSON arguments)
        return ToolChoice("none", shown="'none'")
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom") and "name" in choice:
        name = routes.model_name(choice["name"], choice.get("namespace"))
        return ToolChoice("named", name, repr(choice), name_param="tool_choice.name")
    if isinstance(choice, dict) and choice.get("type") == "mcp":  # one of a server's tools, or any tool
        if choice.get("name"):
            return ToolChoice("named", choice["name"], repr(choice), name_param="tool_choice.name")
        return ToolChoice("required", shown=repr(choice))
    if choice is None or (choice in ("auto", "none") and not have_tools):
        return ToolChoice()  # no tools to choose from (Codex's compaction request: `tools: []`, "auto")
    if isinstance(choice, str) and choice in MODES:
        return ToolChoice(MODES[choice], shown=repr(choice))
    return ToolChoice("invalid", shown=repr(choice))


def _format_constraint(request: CreateResponseRequest) -> Constraint | None:
    """text.format: a JSON schema (flat, as Responses spells it), a JSON object, or text."""
    spec = request.text.format if request.text else None
    kind = spec.get("type") if spec else None
    if spec is None or kind in (None, "text"):
        return None
    if kind == "json_object":
        return Constraint(json_schema={"type": "object"})
    if kind != "json_schema":
        raise InvalidRequest(f"unknown response_format type {kind!r}", param="text.format.type")
    if not isinstance(spec.get("name", "output"), str):
        raise InvalidRequest("text.format must be an object with a name and a schema", param="text.format")
    return schema_constraint(spec.get("schema"), "text.format.schema", spec.get("strict") is True)


def _sampling(request: CreateResponseRequest) -> Sampling:
    """The sampling a Responses request asks for, in the turn's type (its names are the turn's)."""
    if request.max_output_tokens is not None and request.max_output_tokens > INT32_MAX:
        raise InvalidRequest(f"max_output_tokens: must be at most {INT32_MAX}", param="max_output_tokens")
    return Sampling(temperature=request.temperature, top_p=request.top_p, presence_penalty=request.presence_penalty,
                    frequency_penalty=request.frequency_penalty).checked()


MODES: dict[str, ToolChoiceKind] = {"auto": "auto", "none": "none", "required": "required"}


def next_start(conversation: list[dict[str, Any]], start: int) -> int | None:
    """Where the conversation starts once its oldest turn is dropped: at the next user message (a whole
    turn goes: never a tool output without its call), and never past the newest item."""
    index = start + 1
    while index < len(conversation) - 1 and not (conversation[index].get("type") == "message"
                                                 and conversation[index].get("role") == "user"):
        index += 1
    return index if index < len(conversation) else None
