"""qwen3_coder: the XML-like call format of Qwen3-Coder (templates that render `<function=…>`).

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Oslo
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

Several <tool_call> blocks are parallel calls. A parameter's value is raw text, not JSON: the
newline after <parameter=…> and the one before </parameter> belong to the markup, and the value
is converted by the type the tool's JSON schema gives that parameter (a string stays exactly
as written, so code with quotes or newlines needs no escaping).

A block that begins with `<function=NAME>` of a known tool streams (qwen3_coder_stream): the
call starts there and its arguments are written as JSON while the parameters arrive. Any other
block is parsed whole at its end.

Tolerated: a block closed by </tool_call> whose </function> (or last </parameter>) is missing,
and a block cut off by the end of the output after a complete </function>. A block cut off
earlier is text, like every other malformed block.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall, ToolSpec

FUNCTION_OPEN = re.compile(r"\s*<function=([^>\n]+)>")
PARAMETER_OPEN = re.compile(r"\s*<parameter=([^>\n]+)>")
FUNCTION_CLOSE = re.compile(r"\s*</function>")
PARAMETER_CLOSE = "</parameter>"


class Qwen3CoderToolParser(MarkupToolParser):
    name = "qwen3_coder"
    start = "<tool_call>"
    end = "</tool_call>"
    end_optional = True

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._cut_off = False  # the block being parsed ran to the end of the output unclosed

    def new_stream(self) -> BlockStream | None:
        from rostra.parsing.tools.qwen3_coder_stream import FunctionStream  # (it builds on this module)

        return FunctionStream(self)

    def finish(self) -> list[Event]:
        # The base closes an unterminated block only from finish(); mark it so parse_block can
        # insist on a complete </function> there (a cut-off call must not become a shorter one).
        self._cut_off = True
        try:
            return super().finish()
        finally:
            self._cut_off = False

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        calls: list[ParsedCall] = []
        pos = 0
        while True:
            opened = FUNCTION_OPEN.match(block, pos)
            if not opened:
                break
            parsed = self._parse_function(block, opened.group(1).strip(), opened.end())
            if parsed is None:
                return None
            call, pos = parsed
            calls.append(call)
        # Only whitespace may follow the last function; nothing else may sit in the block.
        return calls if calls and not block[pos:].strip() else None

    def _parse_function(self, block: str, name: str, pos: int) -> tuple[ParsedCall, int] | None:
        properties = self.properties(name)
        arguments: dict[str, Any] = {}
        while True:
            closed = FUNCTION_CLOSE.match(block, pos)
            if closed:
                return ParsedCall(name, arguments), closed.end()
            opened = PARAMETER_OPEN.match(block, pos)
            if not opened:
                # No </function>: acceptable only where the block itself was closed and
                # nothing but whitespace is left.
                if block[pos:].strip() or self._cut_off:
                    return None
                return ParsedCall(name, arguments), len(block)
            key, start = opened.group(1).strip(), opened.end()
            end = block.find(PARAMETER_CLOSE, start)
            after = block.find("<parameter=", start)
            if end >= 0 and (after < 0 or end < after):
                pos = end + len(PARAMETER_CLOSE)  # (a value may contain "</function>")
            else:
                # A missing </parameter>: the value runs to the next tag (or the block's end).
                following = _next_tag(block, start)
                if self._cut_off and following < 0:
                    return None
                end = pos = following if following >= 0 else len(block)
            arguments[key] = convert(_strip_newlines(block[start:end]), properties.get(key))

    def properties(self, name: str) -> dict[str, Any]:
        tool = self.tools.get(name)
        properties = tool.parameters.get("properties") if tool and isinstance(tool.parameters, dict) else None
        return properties if isinstance(properties, dict) else {}


def _next_tag(block: str, start: int) -> int:
    """Where the next <parameter=…> or </function> begins after `start`, or -1."""
    found = [at for at in (block.find("<parameter=", start), block.find("</function>", start)) if at >= 0]
    return min(found) if found else -1


def _strip_newlines(value: str) -> str:
    """The value without the one newline the markup puts on each side of it."""
    if value.startswith("\r\n"):
        value = value[2:]
    elif value.startswith("\n"):
        value = value[1:]
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value


def convert(value: str, schema: Any) -> Any:
    """The raw text of a parameter as the type its schema declares; the text itself when it
    does not fit (the model meant something, and a string loses nothing)."""
    types = schema_types(schema)
    if not types:
        return _json_or_text(value)
    text = value.strip()
    # Try the non-string types first: with ["integer", "string"], "3" is meant as 3.
    for kind in sorted(types, key=lambda t: t == "string"):
        if kind == "string":
            return value
        converted = _CONVERTERS.get(kind, _json_value)(text)
        if converted is not _NO:
            return converted
    return value


_NO = object()  # "does not convert" (None is a real value: JSON null)


def schema_types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    # anyOf / oneOf of typed alternatives (how optional parameters are often declared).
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return [t for option in schema[key] for t in schema_types(option)]
    return []


def _json_or_text(value: str) -> Any:
    converted = _json_value(value.strip())
    return value if converted is _NO else converted


def _json_value(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # not JSON; or nested too deep to decode
        return _NO


def _reject_constant(name: str) -> None:
    # NaN / Infinity parse in Python but are not JSON: the arguments we emit must be.
    raise ValueError(name)


def _number(text: str) -> Any:
    value = _json_value(text)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _NO


def _integer(text: str) -> Any:
    value = _number(text)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # a fractional number is kept as a number, not lost to a string


def _boolean(text: str) -> Any:
    return {"true": True, "false": False}.get(text.lower(), _NO)


def _null(text: str) -> Any:
    return None if text.lower() in ("null", "none") else _NO


def _typed_json(kind: type) -> Any:
    def convert_json(text: str) -> Any:
        value = _json_value(text)
        return value if isinstance(value, kind) else _NO
    return convert_json


_CONVERTERS = {"integer": _integer, "number": _number, "boolean": _boolean, "null": _null,
               "object": _typed_json(dict), "array": _typed_json(list)}
