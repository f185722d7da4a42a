"""A Chat Completions request -> the typed turn the pipeline prepares (rostra/turn.py).

Paths are Chat's own: `messages[i].content[j]`, `tools[i].function.parameters`, `tool_choice.function.name`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rostra.errors import InvalidRequest
from rostra.guided.bounds import check_tool_count
from rostra.guided.constraints import response_constraint
from rostra.protocol.chat import ChatCompletionRequest, ChatMessage, ContentPart
from rostra.turn import (
    Budget,
    ContentPart as TurnPart,
    FunctionTool,
    ImagePart,
    OutputOptions,
    TemplateOptions,
    TextPart,
    ToolCall,
    ToolChoice,
    ToolChoiceKind,
    Turn,
    TurnMessage,
    UnreadablePart,
)

TEXT_PART_TYPES = {"text", "input_text", "output_text"}
EMPTY_PARAMETERS = {"type": "object", "properties": {}}
MODES: dict[str, ToolChoiceKind] = {"none": "none", "auto": "auto", "required": "required"}
# Hosted (built-in) tools of the Responses API, and gpt-oss's own names for them.
BUILTIN_TOOL_TYPES = frozenset({"web_search", "web_search_preview", "web_search_preview_2025_03_11",
                                "web_search_2025_08_26", "code_interpreter", "browser", "python", "container"})


def response_role(request: ChatCompletionRequest, configured: str = "assistant") -> str:
    """vLLM's rule: a new turn is the configured role's; a continued message (no generation prompt) keeps the
    last message's role."""
    continued = not request.add_generation_prompt and request.messages
    return request.messages[-1].role if continued else configured


def chat_turn(request: ChatCompletionRequest, role: str = "assistant") -> Turn:
    asked = request.max_completion_tokens or request.max_tokens
    return Turn(
        model=request.model, sampling=request.sampling(),
        messages=tuple(chat_message(message, f"messages[{index}]") for index, message in enumerate(request.messages)),
        tools=chat_tools(request.tools), tool_choice=chat_tool_choice(request.tool_choice),
        parallel_tool_calls=request.parallel_tool_calls,
        constraint=response_constraint(request.response_format, request.guided()),
        budget=Budget(asked, "max_completion_tokens" if request.max_completion_tokens else "max_tokens"),
        template=TemplateOptions(request.chat_template_kwargs or {}, request.add_generation_prompt,
                                 request.continue_final_message, request.chat_template, request.documents,
                                 request.response_prefix, request.add_special_tokens,
                                 request.chat_template_content_format),
        session_key=request.prompt_cache_key, reasoning_effort=request.reasoning_effort,
        include_reasoning=request.include_reasoning, logprobs=request.logprobs, top_logprobs=request.top_logprobs,
        output=replace(OutputOptions.of(request), role=response_role(request, role)), request_id=request.request_id)


def chat_message(message: ChatMessage, param: str) -> TurnMessage:
    content = message.content
    parts = content if content is None or isinstance(content, str) else tuple(
        chat_part(part, f"{param}.content[{index}]") for index, part in enumerate(content))
    calls = tuple(ToolCall(call, f"{param}.tool_calls[{number}]") for number, call in enumerate(message.tool_calls or ()))
    return TurnMessage(message.role, parts, param, message.name, calls, message.tool_call_id,
                       message.reasoning_content or message.reasoning,
                       message.phase if message.role == "assistant" else None)


def chat_part(part: ContentPart, param: str) -> TurnPart:
    if part.type in TEXT_PART_TYPES and part.text is not None:
        return TextPart(part.text, param)
    if part.type == "image_url" and part.image_url is not None:
        return ImagePart(part.image_url.url, param)
    return UnreadablePart(part.type, param)


def chat_tools(tools: list[dict[str, Any]] | None) -> tuple[FunctionTool, ...]:
    check_tool_count(tools)
    out = []
    for index, tool in enumerate(tools or []):
        param = f"tools[{index}]"
        if tool.get("type") in BUILTIN_TOOL_TYPES:  # as vLLM refuses them: the Responses API runs them
            raise InvalidRequest(f"{tool['type']} is a built-in tool: Chat Completions takes function tools only; "
                                 "use the Responses API, which runs built-in tools on the server's tool servers",
                                 param=f"{param}.type", code="builtin_tool_not_supported")
        if tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise InvalidRequest("only tools of type 'function' are supported", param=f"{param}.type")
        function = tool["function"]
        name = function.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise InvalidRequest("a function needs a name of 1 to 64 characters", param=f"{param}.function.name")
        out.append(FunctionTool(name, function.get("parameters", EMPTY_PARAMETERS), function.get("strict") is True,
                                tool, f"{param}.function.parameters"))
    return tuple(out)


def chat_tool_choice(choice: str | dict[str, Any] | None) -> ToolChoice:
    if choice is None:
        return ToolChoice()
    if isinstance(choice, str) and choice in MODES:
        return ToolChoice(MODES[choice], shown=repr(choice))
    if isinstance(choice, dict) and choice.get("type") == "function":
        return ToolChoice("named", (choice.get("function") or {}).get("name"), repr(choice))
    return ToolChoice("invalid", shown=repr(choice))


def with_image_urls(messages: list[ChatMessage], urls: dict[tuple[int, int], str]) -> list[ChatMessage]:
    """The messages with the image parts at `urls`' places (message, part) pointing at those URLs."""
    out = [message.model_copy(deep=True) for message in messages]
    for (message_index, part_index), url in urls.items():
        content = out[message_index].content
        assert isinstance(content, list)
        image_url = content[part_index].image_url
        assert image_url is not None
        image_url.url = url
    return out
