"""kimi_k2: the tool-call markup of Moonshot Kimi K2.

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
    {"city": "Oslo"}<|tool_call_end|><|tool_call_begin|>functions.add:1<|tool_call_argument_begin|>
    {"a": 1}<|tool_call_end|><|tool_calls_section_end|>

(One line in the output, broken here for reading.)

Every call has an id "functions.NAME:IDX" (IDX counts calls over the conversation); the name is
what lies between the optional "functions." prefix and the last ":". That id is the call's id in
the response too (Kimi's template writes it back into the history as it is): the model's own,
with the "functions." prefix added when the model left it out. The arguments are a JSON
object. All calls sit in one section, which is all or nothing: if any call in it is malformed
or names an unknown tool, the whole section stays text. The output may end without the section
end, and even without the last call end, as long as that call's arguments are complete JSON.
"""

from __future__ import annotations

from dataclasses import replace

from rostra.parsing.events import Event
from rostra.parsing.tools.base import Head, ParsedCall, SectionToolParser, loads_strict

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENTS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"


class KimiK2ToolParser(SectionToolParser):
    name = "kimi_k2"
    start = SECTION_BEGIN
    end = SECTION_END
    end_optional = True

    call_begin = CALL_BEGIN
    call_end = CALL_END

    def parse_call(self, body: str) -> ParsedCall | None:
        return parse_call(body)

    def read_head(self, text: str) -> Head | None:
        call_id, sep, arguments = text.partition(ARGUMENTS_BEGIN)
        stripped = arguments.lstrip()
        if not sep or not stripped.startswith("{"):
            return None
        name, model_id = name_and_id(call_id)
        return Head(name, len(text) - len(stripped), model_id) if name else None

    def call_id(self, name: str) -> str:
        return f"functions.{name}:{self.calls}"  # a call the model wrote without its ":IDX"

    def emit(self, calls: list[ParsedCall]) -> list[Event]:
        # A call the model wrote without its ":IDX" still gets an id of Kimi's shape.
        return super().emit([call if call.id else replace(call, id=f"functions.{call.name}:{self.calls + number}")
                             for number, call in enumerate(calls)])


def parse_call(body: str) -> ParsedCall | None:
    """`functions.NAME:IDX<argument begin>{...}`; None unless the arguments are a whole object."""
    call_id, sep, arguments = body.partition(ARGUMENTS_BEGIN)
    if not sep:
        return None
    name, model_id = name_and_id(call_id)
    try:
        parsed = loads_strict(arguments)
    except (ValueError, RecursionError):  # not JSON (or cut off); or nested too deep to decode
        return None
    if not name or not isinstance(parsed, dict):
        return None
    return ParsedCall(name, parsed, id=model_id)


def name_and_id(call_id: str) -> tuple[str, str]:
    """`functions.NAME:IDX` -> (NAME, the id as Kimi writes it); the id is "" without an IDX."""
    call_id = call_id.strip()
    name = call_id.rpartition(":")[0] if ":" in call_id else call_id
    name = name.removeprefix("functions.").strip()
    number = call_id.rpartition(":")[2].strip() if ":" in call_id else ""
    return name, f"functions.{name}:{number}" if number.isdigit() else ""
