"""olmo3: Ai2 OLMo 3 (Olmo-3 / 3.1 Instruct), Python calls one per line inside `<function_calls>`:

    <function_calls>get_weather(city="Oslo", days=3)
    add(a=1, b=2.5)</function_calls>

Its chat template teaches the tags ("Output any function calls within <function_calls></function_calls> XML tags")
and writes past calls back as `NAME(key=value, …)` with every value `tojson`-ed, one call a line
(tests/data/templates/allenai-Olmo-3.1-32B-Instruct.jinja). The model also writes Python literals (`'single
quotes'`, `True`, `None`: vLLM's tests/tool_parsers/test_olmo3_tool_parser.py); both read alike, as the pythonic
parser reads them. The calls stream as pythonic lists do (PythonicStream), from the first keyword argument; a block
that is not calls to tools of the request stays text.
"""

from __future__ import annotations

import ast

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, MarkupToolParser, ParsedCall
from rostra.parsing.tools.pythonic import PythonicToolParser, calls_in_list
from rostra.parsing.tools.pythonic_stream import AFTER, NAME, PythonicStream


class Olmo3ToolParser(MarkupToolParser):
    name = "olmo3"
    start = "<function_calls>"
    end = "</function_calls>"
    end_optional = True

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        try:
            tree = ast.parse(block.strip(), mode="exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        calls: list[ast.expr] = []
        for statement in tree.body:
            if not isinstance(statement, ast.Expr):
                return None
            value = statement.value  # a line of calls separated by commas parses as a tuple
            calls += value.elts if isinstance(value, ast.Tuple) else [value]
        try:
            return calls_in_list(ast.List(elts=calls, ctx=ast.Load()))
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return None

    def new_stream(self) -> BlockStream | None:
        return LineCallsStream(self)  # type: ignore[arg-type]


class LineCallsStream(PythonicStream):
    """PythonicStream without the list's brackets: calls follow one another on their own lines (or after a ",")."""

    def __init__(self, parser: PythonicToolParser):
        super().__init__(parser)
        self.state = NAME

    def _step(self, out: list[Event]) -> bool:
        if self.state == AFTER:
            stripped = self._buf.lstrip()
            if not stripped:
                self._buf = ""
                return False
            self._buf, self.state = stripped.removeprefix(","), NAME
            return True
        return super()._step(out)
