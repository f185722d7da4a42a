"""Tool calling semantics of a turn (rostra/turn.py): which parser reads the output, which
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
from typing import Any, Callable, Sequence

from rostra.errors import InvalidRequest
from rostra.guided.bounds import check_schema_bounds, check_tool_count
from rostra.guided.constraints import Constraint, checked_schema, single_line, strict_schema, tool_call_schema
from rostra.parsing.tools.base import ToolParser, ToolSpec
from rostra.parsing.tools.emitter import CallEmitter
from rostra.parsing.tools.forced import NamedCallParser, RequiredCallsParser
from rostra.turn import FunctionTool, ToolChoice

EMPTY_PARAMETERS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    make_emitter: Callable[[], CallEmitter]  # one per choice, last in its pipeline
    make_parser: Callable[[], ToolParser] | None = None  # one parser per choice
    constraint: Constraint | None = None
    # A forced choice's tools with the schema of each one's arguments: what a model that writes the call's name
    # outside the constrained part (gpt-oss: in its harmony header) may call (serving/harmony_answer.py).
    forced: tuple[tuple[str, dict[str, Any]], ...] = ()


def tool_specs(tools: Sequence[FunctionTool]) -> list[ToolSpec]:
    """The tools as parsers read them, each schema checked (a 400 names it as its client wrote it)."""
    check_tool_count(list(tools))
    # Counts are bounded below, once a choice makes the schemas a constraint.
    specs = [ToolSpec(tool.name, checked_schema(tool.parameters, tool.parameters_param, constrains=False),
                      strict=tool.strict) for tool in tools]
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


def plan_tools(tools: Sequence[FunctionTool], tool_choice: ToolChoice, parallel: bool | None,
               parser_class: Callable[..., ToolParser]) -> ToolPlan:
    specs = tool_specs(tools)
    kind = tool_choice.kind if tool_choice.kind != "default" else ("auto" if specs else "none")
    max_calls = 1 if parallel is False else None

    def emitter(allow: bool = True, strict: bool = False) -> Callable[[], CallEmitter]:
        return lambda: CallEmitter(specs, allow_calls=allow, max_calls=max_calls, strict=strict)

    if kind == "none":
        return ToolPlan(emitter(allow=False))
    if not specs:
        raise InvalidRequest(f"tool_choice {tool_choice.shown} needs tools", param=tool_choice.param)
    if kind == "auto":
        return ToolPlan(emitter(), lambda: parser_class(specs, max_calls=max_calls))
    if kind == "required":
        for offered, tool in zip(specs, tools):
            check_schema_bounds(offered.parameters, tool.parameters_param)
        schema = tool_call_schema({spec.name: strict_schema(spec.parameters) for spec in specs}, parallel is not False)
        check_schema_bounds(schema, "tools")  # all the tools' schemas make one constraint: bounded as one
        return ToolPlan(emitter(strict=True), lambda: RequiredCallsParser(specs, max_calls=max_calls),
                        Constraint(json_schema=single_line(schema)),
                        tuple((spec.name, single_line(strict_schema(spec.parameters))) for spec in specs))
    if kind == "named":
        name = tool_choice.name
        index = next((i for i, spec in enumerate(specs) if spec.name == name), None)
        if index is None:
            raise InvalidRequest(f"tool_choice names {name!r}, which is not among the tools", param=tool_choice.name_param)
        spec = specs[index]
        check_schema_bounds(spec.parameters, tools[index].parameters_param)
        arguments = single_line(strict_schema(spec.parameters))
        return ToolPlan(emitter(strict=True), lambda: NamedCallParser(specs, spec.name),
                        Constraint(json_schema=arguments), ((spec.name, arguments),))
    raise InvalidRequest("tool_choice must be 'none', 'auto', 'required' or a function", param=tool_choice.param)
