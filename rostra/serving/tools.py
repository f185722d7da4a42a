"""Tool calling semantics of a Chat Completions request: which parser reads the output, which
constraint (if any) shapes it, and the emitter every call passes.

- tool_choice "none" (or no tools): no parser; markup the model writes stays text (and a call a
  reasoning parser such as gpt-oss's recognises is turned back into text by the emitter).
- "auto" (the default with tools): the server's tool parser (layered by default: the format's
  parser, then the lenient recognisers; see rostra.parsing.tools.layered).
- "required" / named function: constrained decoding makes the model write only valid calls
  (a JSON list of calls / the named function's arguments), read by the forced parsers. The
  schemas are made strict (no properties the tool does not list, unless it allows them), and so
  is the emitter, for engines that do not constrain.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Callable

from rostra.errors import InvalidRequest
from rostra.guided.bounds import check_schema_bounds, check_tool_count
from rostra.guided.constraints import Constraint, checked_schema, single_line, strict_schema, tool_call_schema
from rostra.parsing.tools.base import ToolParser, ToolSpec
from rostra.parsing.tools.emitter import CallEmitter
from rostra.parsing.tools.forced import NamedCallParser, RequiredCallsParser

EMPTY_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    make_emitter: Callable[[], CallEmitter]  # one per choice, last in its pipeline
    make_parser: Callable[[], ToolParser] | None = None  # one parser per choice
    constraint: Constraint | None = None


# Hosted (built-in) tools of the Responses API, and gpt-oss's own names for them.
BUILTIN_TOOL_TYPES = frozenset({"web_search", "web_search_preview", "web_search_preview_2025_03_11",
                                "web_search_2025_08_26", "code_interpreter", "browser", "python", "container"})


def tool_specs(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    check_tool_count(tools)
    specs = []
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
        parameters = function.get("parameters", EMPTY_PARAMETERS)
        # Counts are bounded below, once a choice makes the schemas a constraint.
        specs.append(ToolSpec(name, checked_schema(parameters, f"{param}.function.parameters", constrains=False),
                              strict=function.get("strict") is True))
    if len({spec.name for spec in specs}) != len(specs):
        raise InvalidRequest("function names must be unique", param="tools")
    return specs


NINE_ALPHANUMERICS = re.compile(r"[A-Za-z0-9]{9}")
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nine_character_id(call_id: str) -> str:
    """Mistral's templates accept only 9 letters and digits as call ids (and raise otherwise):
    an id of another server ("call_…", "functions.f:0") maps to one, the same wherever it occurs,
    so a call and its tool result still pair up."""
    if NINE_ALPHANUMERICS.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    return "".join(BASE62[(number // 62 ** i) % 62] for i in range(9))


def mistral_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Template messages with every tool-call id in the form Mistral's templates accept."""
    for message in messages:
        if message.get("tool_call_id"):
            message["tool_call_id"] = nine_character_id(str(message["tool_call_id"]))
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id"):
                call["id"] = nine_character_id(str(call["id"]))
    return messages


def plan_tools(tools: list[dict[str, Any]] | None, tool_choice: Any, parallel: bool | None,
               parser_class: Callable[..., ToolParser]) -> ToolPlan:
    specs = tool_specs(tools)
    choice = tool_choice if tool_choice is not None else ("auto" if specs else "none")
    max_calls = 1 if parallel is False else None

    def emitter(allow: bool = True, strict: bool = False) -> Callable[[], CallEmitter]:
        return lambda: CallEmitter(specs, allow_calls=allow, max_calls=max_calls, strict=strict)

    if choice == "none":
        return ToolPlan(emitter(allow=False))
    if not specs:
        raise InvalidRequest(f"tool_choice {choice!r} needs tools", param="tool_choice")
    if choice == "auto":
        return ToolPlan(emitter(), lambda: parser_class(specs, max_calls=max_calls))
    if choice == "required":
        for index, offered in enumerate(specs):
            check_schema_bounds(offered.parameters, f"tools[{index}].function.parameters")
        schema = tool_call_schema({spec.name: strict_schema(spec.parameters) for spec in specs}, parallel is not False)
        check_schema_bounds(schema, "tools")  # all the tools' schemas make one constraint: bounded as one
        return ToolPlan(emitter(strict=True), lambda: RequiredCallsParser(specs, max_calls=max_calls),
                        Constraint(json_schema=single_line(schema)))
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        spec = next((s for s in specs if s.name == name), None)
        if spec is None:
            raise InvalidRequest(f"tool_choice names {name!r}, which is not among the tools",
                                 param="tool_choice.function.name")
        check_schema_bounds(spec.parameters, f"tools[{specs.index(spec)}].function.parameters")
        return ToolPlan(emitter(strict=True), lambda: NamedCallParser(specs, spec.name),
                        Constraint(json_schema=single_line(strict_schema(spec.parameters))))
    raise InvalidRequest("tool_choice must be 'none', 'auto', 'required' or a function", param="tool_choice")
