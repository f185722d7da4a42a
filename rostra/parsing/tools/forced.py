"""Parsers for forced tool choice, whose output constrained decoding has shaped already.

tool_choice "required": the model writes a JSON list of {"name", "arguments"} calls.
tool_choice named: the model writes only the arguments object of that one function.
Either way the whole output is one JSON value, parsed at the end.
"""

from __future__ import annotations

from typing import Sequence

from rostra.parsing.events import Event, Text
from rostra.parsing.tools.base import ParsedCall, ToolParser, ToolSpec, calls_from_json, loads_strict


class _WholeOutputParser(ToolParser):
    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._buffer: list[str] = []

    def feed_text(self, text: str) -> list[Event]:
        self._buffer.append(text)
        return []

    def finish(self) -> list[Event]:
        raw = "".join(self._buffer)
        calls = self.known(self.parse(raw), raw) if raw.strip() else None
        return self.emit(calls) if calls else ([Text(raw)] if raw else [])

    def parse(self, raw: str) -> list[ParsedCall] | None:
        raise NotImplementedError


class RequiredCallsParser(_WholeOutputParser):
    name = "required"

    def parse(self, raw: str) -> list[ParsedCall] | None:
        return calls_from_json(raw)


class NamedCallParser(_WholeOutputParser):
    name = "named"

    def __init__(self, tools: Sequence[ToolSpec], function: str):
        super().__init__(tools)
        self.function = function

    def parse(self, raw: str) -> list[ParsedCall] | None:
        try:
            arguments = loads_strict(raw)
        except (ValueError, RecursionError):
            return None
        return [ParsedCall(self.function, arguments)] if isinstance(arguments, dict) else None
