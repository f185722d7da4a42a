"""pythonic: the output is a Python list of calls (Llama 3.2 and Llama 4 pythonic tool calling).

    [get_weather(city="Oslo", days=3), add(a=1, b=2.5)]
    <|python_start|>[now()]<|python_end|>

Arguments are keyword arguments whose values are Python literals (strings, numbers, True /
False / None, lists, tuples, dicts; JSON's true / false / null are accepted as well). The list
is read with the `ast` module, never evaluated. Like llama3_json the calls have no start marker
of their own: the list must begin the output (after whitespace and an optional <|python_start|>)
or follow a <|python_start|>; an output that starts with anything else is content.

A list whose first call is a known tool streams (pythonic_stream): each call starts at its "("
and its arguments are written as JSON while the keyword arguments arrive.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from rostra.parsing.tools.base import BlockStream, ParsedCall
from rostra.parsing.tools.llama3_json import BareCallParser

_JSON_NAMES = {"true": True, "false": False, "null": None}


class PythonicToolParser(BareCallParser):
    name = "pythonic"
    opener = "["
    tag = "<|python_start|>"
    trailer_tags = ("<|python_end|>",)
    quotes = "'\""
    python_strings = True
    _prefix = "open"  # how far region_prefix has read: open ("[" seen), name, after_name

    def region_started(self) -> None:
        self._prefix = "open"

    def region_prefix(self, char: str) -> bool | None:
        # A call list starts "[", whitespace, an identifier, whitespace, "(": give up on anything
        # else right away, so prose like "[1] see below" or "[Note: ...]" streams without delay.
        if self._prefix == "open":
            if char.isspace():
                return False
            if char.isidentifier():
                self._prefix = "name"
                return False
            return None
        if char == "(":
            return True
        if char.isspace():
            self._prefix = "after_name"
            return False
        if self._prefix == "name" and ("a" + char).isidentifier():
            return False
        return None

    def new_stream(self) -> BlockStream | None:
        from rostra.parsing.tools.pythonic_stream import PythonicStream  # (it builds on this module)

        return PythonicStream(self)

    def parse_region(self, raw: str) -> list[ParsedCall] | None:
        try:
            tree = ast.parse(raw.strip(), mode="eval")
            return _calls(tree.body)
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            return None


def calls_in_list(node: ast.expr) -> list[ParsedCall] | None:
    """The calls of a list node `[name(key=literal, …), …]`; None if it holds anything else (ValueError: a value
    JSON cannot hold)."""
    return _calls(node)


def _calls(node: ast.expr) -> list[ParsedCall] | None:
    if not isinstance(node, ast.List) or not node.elts:
        return None
    calls = []
    for item in node.elts:
        # Only name(keyword=literal, ...): no positional or **arguments, no attribute calls.
        if not isinstance(item, ast.Call) or not isinstance(item.func, ast.Name) or item.args:
            return None
        arguments: dict[str, Any] = {}
        for keyword in item.keywords:
            if keyword.arg is None or keyword.arg in arguments:
                return None
            arguments[keyword.arg] = _literal(keyword.value)
        calls.append(ParsedCall(item.func.id, arguments))
    return calls


def _literal(node: ast.expr) -> Any:
    return _plain(ast.literal_eval(_JsonNames().visit(node)))


def literal_value(text: str) -> Any:
    """A keyword's value written as `text` as JSON data; SyntaxError / ValueError if it is none."""
    return _literal(ast.parse(text.strip(), mode="eval").body)


class _JsonNames(ast.NodeTransformer):
    """true / false / null as the constants they mean in JSON (models mix the two up)."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node


def _plain(value: Any) -> Any:
    """A literal as JSON data; ValueError for what JSON cannot hold (sets, bytes, complex, nan)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a JSON number")
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item) for key, item in value.items()}
    raise ValueError(f"not JSON data: {type(value).__name__}")
