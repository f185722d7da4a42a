"""Tool calling semantics of a Chat Completions request: which parser reads the output, and
which constraint (if any) shapes it.

- tool_choice "none" (or no tools): no parser; markup the model writes stays text.
- "auto" (the default with tools): the server's tool parser (--tool-call-parser, else the one
  the chat template speaks, else the lenient `json` parser).
- "required" / named function: constrained decoding makes the model write only valid calls
  (a JSON list of calls / the named function's arguments), read by the forced parsers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rostra.errors import InvalidRequest
from rostra.guided.constraints import Constraint, checked_schema, tool_call_schema
from rostra.parsing.tools.base import ToolParser, ToolSpec
from rostra.parsing.tools.forced import NamedCallParser, RequiredCallsParser

EMPTY_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    make_parser: Callable[[], ToolParser] | None = None  # one parser per choice
    constraint: Constraint | None = None


def tool_specs(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    specs = []
    for index, tool in enumerate(tools or []):
        param = f"tools[{index}]"
        if tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise InvalidRequest("only tools of type 'function' are supported", param=f"{param}.type")
        function = tool["function"]
        name = function.get("name")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise InvalidRequest("a function needs a name of 1 to 64 characters", param=f"{param}.function.name")
        parameters = function.get("parameters", EMPTY_PARAMETERS)
        specs.append(ToolSpec(name, checked_schema(parameters, f"{param}.function.parameters")))
    if len({spec.name for spec in specs}) != len(specs):
        raise InvalidRequest("function names must be unique", param="tools")
    return specs


def plan_tools(tools: list[dict[str, Any]] | None, tool_choice: Any, parallel: bool | None,
               parser_class: type[ToolParser]) -> ToolPlan:
    specs = tool_specs(tools)
    choice = tool_choice if tool_choice is not None else ("auto" if specs else "none")
    max_calls = 1 if parallel is False else None
    if choice == "none":
        return ToolPlan()
    if not specs:
        raise InvalidRequest(f"tool_choice {choice!r} needs tools", param="tool_choice")
    if choice == "auto":
        return ToolPlan(make_parser=lambda: parser_class(specs, max_calls=max_calls))
    if choice == "required":
        schema = tool_call_schema({spec.name: spec.parameters for spec in specs}, parallel is not False)
        return ToolPlan(lambda: RequiredCallsParser(specs, max_calls=max_calls), Constraint(json_schema=schema))
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        spec = next((s for s in specs if s.name == name), None)
        if spec is None:
            raise InvalidRequest(f"tool_choice names {name!r}, which is not among the tools",
                                 param="tool_choice.function.name")
        return ToolPlan(lambda: NamedCallParser(specs, spec.name), Constraint(json_schema=spec.parameters))
    raise InvalidRequest("tool_choice must be 'none', 'auto', 'required' or a function", param="tool_choice")
