"""Bounds on decoding constraints, checked before any engine sees one.

Engines compile a constraint into a grammar whose size grows with the counts it names: llama.cpp
expands `x{0,N}` (and a schema's `maxItems: N`, `maxLength: N`) into N copies, so one request with
`{"type": "array", "maxItems": 1000000000000}` made it allocate until the process aborted, taking
every stream in flight with it. So every count is bounded here, with limits that real schemas,
regexes and grammars stay far below, and each refusal is a 400 naming the parameter. Integers a
64-bit engine cannot hold are refused too (llama.cpp's JSON reader throws on them).
"""

from __future__ import annotations

import math
import re
from typing import Any

from rostra.errors import InvalidRequest

MAX_REPEAT = 10_000  # one count: minItems, maxLength, {m,n}, ... (measured: README, "Security notes")
MAX_NESTED_REPEAT = 100_000  # counts multiplied along a regex's nesting: (a{100}){100} is 10,000
MAX_SCHEMA_NODES = 10_000  # objects and lists in one schema (all tools' together under tool_choice)
MAX_SCHEMA_DEPTH = 64  # nesting of a schema
MAX_PATTERN_LENGTH = 10_000  # characters of one regex
MAX_GRAMMAR_LENGTH = 100_000  # characters of one grammar
MAX_TOOLS = 512  # OpenAI takes 128

INT64 = 2**63
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "minContains",
           "maxContains")


def check_int64(value: int, param: str) -> None:
    if not -INT64 <= value < INT64:
        raise InvalidRequest(f"{param}: the integer {_short(value)} does not fit in 64 bits", param=param)


def check_count(value: Any, param: str) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_REPEAT:
        raise InvalidRequest(f"{param}: {_short(value)} is more than this server allows ({MAX_REPEAT})", param=param)


def check_schema_bounds(schema: Any, param: str, counts: bool = True) -> None:
    """Size, depth, counts, numbers and patterns of a JSON schema (walked without recursion: a deep
    schema must not exhaust the stack on its way to a 400). `counts=False` for a schema no engine will
    compile, such as a tool's parameters while the model may choose to call it: only a constraint expands
    counts, and real tool definitions carry large ones (Claude Code's: `maxLength: 524288`)."""
    nodes = 0
    stack: list[tuple[Any, str, int]] = [(schema, param, 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidRequest(f"{param}: the schema nests deeper than {MAX_SCHEMA_DEPTH} levels", param=path)
        if isinstance(node, dict):
            nodes += 1
            for key, value in node.items():
                child = f"{path}.{key}"
                if key in _COUNTS and counts:
                    check_count(value, child)
                elif key == "pattern" and isinstance(value, str):
                    check_regex(value, child)
                elif key == "patternProperties" and isinstance(value, dict):
                    for pattern in value:
                        check_regex(pattern, f"{child}[{pattern[:40]!r}]")
                stack.append((value, child, depth + 1))
        elif isinstance(node, list):
            nodes += 1
            stack.extend((item, f"{path}[{index}]", depth + 1) for index, item in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool):
            check_int64(node, path)
        elif isinstance(node, float) and not math.isfinite(node):
            raise InvalidRequest(f"{path}: numbers must be finite", param=path)
        if nodes > MAX_SCHEMA_NODES:
            raise InvalidRequest(f"{param}: the schema has more than {MAX_SCHEMA_NODES} parts", param=param)


def check_regex(pattern: str, param: str) -> None:
    """A regex that compiles, with its counted repetitions bounded one by one and multiplied along
    their nesting."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidRequest(f"{param}: the pattern is longer than {MAX_PATTERN_LENGTH} characters", param=param)
    from re import _parser  # type: ignore[attr-defined]  # the standard library's own regex parser

    try:
        parsed = _parser.parse(pattern)
    except (re.error, OverflowError, RecursionError) as exc:  # OverflowError: a count beyond 2**32
        raise InvalidRequest(f"{param}: invalid regular expression: {exc}", param=param) from None
    stack: list[tuple[Any, int]] = [(parsed, 1)]
    while stack:
        items, factor = stack.pop()
        for op, argument in items:
            if op in (_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT):
                low, high, body = argument
                counted = [count for count in (low, high) if count != _parser.MAXREPEAT]
                for count in counted:
                    if count > MAX_REPEAT:
                        raise InvalidRequest(f"{param}: the repetition count {count} is more than this server "
                                             f"allows ({MAX_REPEAT})", param=param)
                nested = factor * max(counted + [1])
                if nested > MAX_NESTED_REPEAT:
                    raise InvalidRequest(f"{param}: nested repetitions multiply to more than {MAX_NESTED_REPEAT}",
                                         param=param)
                stack.append((body, nested))
            elif op == _parser.SUBPATTERN:
                stack.append((argument[-1], factor))
            elif op == _parser.BRANCH:
                stack.extend((branch, factor) for branch in argument[1])
            elif op in (_parser.ASSERT, _parser.ASSERT_NOT):
                stack.append((argument[1], factor))
            elif op == _parser.GROUPREF_EXISTS:
                stack.extend((branch, factor) for branch in argument[1:] if branch is not None)


# `{m}`, `{m,}`, `{m,n}` in a grammar, outside its string literals, character classes and comments.
_GRAMMAR_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
_GRAMMAR_SKIPPED = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|#[^\n]*')


def check_grammar_bounds(grammar: str, param: str) -> None:
    """A GBNF (or llguidance lark) grammar's size and its repetition counts."""
    if len(grammar) > MAX_GRAMMAR_LENGTH:
        raise InvalidRequest(f"{param}: the grammar is longer than {MAX_GRAMMAR_LENGTH} characters", param=param)
    for match in _GRAMMAR_COUNT.finditer(_GRAMMAR_SKIPPED.sub(" ", grammar)):
        for count in match.groups():
            if count and (len(count) > 9 or int(count) > MAX_REPEAT):
                raise InvalidRequest(f"{param}: the repetition count {_short(count)} is more than this server "
                                     f"allows ({MAX_REPEAT})", param=param)


def check_tool_count(tools: list[Any] | None, param: str = "tools") -> None:
    if tools is not None and len(tools) > MAX_TOOLS:
        raise InvalidRequest(f"{param}: at most {MAX_TOOLS} tools per request", param=param)


def _short(value: Any) -> str:
    text = str(value) if not isinstance(value, int) or value.bit_length() < 4000 else "(a very long integer)"
    return text if len(text) <= 40 else text[:20] + "..." + text[-8:]
