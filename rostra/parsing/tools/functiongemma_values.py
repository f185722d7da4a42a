"""FunctionGemma's argument syntax, read into JSON values.

FunctionGemma (google/functiongemma-270m-it) writes a call's arguments as a brace-delimited list of `key:value`
pairs, not JSON: keys are bare, every string is wrapped in the `<escape>` token (so `,`, `}` or quotes inside it
need no escaping), numbers and booleans are bare, objects nest in `{…}` and lists in `[…]`:

    {city:<escape>Oslo<escape>,days:3,extra:{units:[<escape>°C<escape>,null]}}

(Google's FunctionGemma guide, "Formatting and best practices": "A single token, <escape>, is used as a delimiter
for all string values"; vLLM's tests/tool_parsers/test_functiongemma_tool_parser.py reads
`count:<escape>42<escape>` as 42 and `enabled:<escape>true<escape>` as true, since templates such as vLLM's
examples/tool_chat_template_functiongemma.jinja write every value between escapes.)

The readers take the text and a position and return the value and the position after it. `Incomplete` says the
text stops before the value does (more may come); `Malformed` that it is not this syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rostra.parsing.tools.param_values import convert, schema_types

ESCAPE = "<escape>"
KEY = re.compile(r"\s*([^:{}\[\],<>\s]+)\s*:")
MAX_DEPTH = 64  # deeper nesting is not arguments a model meant


class Incomplete(Exception):
    """The text ends inside the value."""


class Malformed(ValueError):
    """Not FunctionGemma's argument syntax."""


@dataclass(frozen=True)
class Escaped:
    """A value written between <escape> tokens: a string, unless the tool's schema types it otherwise."""

    text: str


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def read_key(text: str, pos: int, escape: str = ESCAPE) -> tuple[str, int]:
    """A pair's key and the position after its colon."""
    pos = skip_space(text, pos)
    if text.startswith(escape, pos):  # (a key written as a string)
        value, after = read_value(text, pos, escape=escape)
        after = skip_space(text, after)
        if after >= len(text):
            raise Incomplete
        if text[after] != ":" or not isinstance(value, Escaped):
            raise Malformed(text[pos:after + 1])
        return value.text, after + 1
    found = KEY.match(text, pos)
    if found:
        return found.group(1), found.end()
    rest = text[pos:]
    if not rest or escape.startswith(rest) or re.fullmatch(r"[^:{}\[\],<>\s]+\s*", rest):
        raise Incomplete
    raise Malformed(rest[:40])


def read_value(text: str, pos: int, depth: int = 0, escape: str = ESCAPE) -> tuple[Any, int]:
    """A value (an Escaped for a string, else its JSON value) and the position after it; `escape` is the token
    that delimits strings (FunctionGemma's <escape>, Gemma 4's <|"|>)."""
    if depth > MAX_DEPTH:
        raise Malformed("nested too deep")
    pos = skip_space(text, pos)
    if pos >= len(text) or escape.startswith(text[pos:pos + len(escape)]) and len(text) - pos < len(escape):
        raise Incomplete
    if text.startswith(escape, pos):
        end = text.find(escape, pos + len(escape))
        if end < 0:
            raise Incomplete
        return Escaped(text[pos + len(escape): end]), end + len(escape)
    if text[pos] == "{":
        return read_object(text, pos + 1, depth + 1, escape)
    if text[pos] == "[":
        return read_list(text, pos + 1, depth + 1, escape)
    end = pos
    while end < len(text) and text[end] not in ",}]" and not text.startswith(escape, end):
        end += 1
    if end == len(text):
        raise Incomplete  # a bare value is whole only at the delimiter after it
    raw = text[pos:end].strip()
    if not raw or any(c in raw for c in "{[:<"):
        raise Malformed(raw)
    return convert(raw, None), end


def read_object(text: str, pos: int, depth: int, escape: str = ESCAPE) -> tuple[dict[str, Any], int]:
    """The pairs after an object's `{`, and the position after its `}`."""
    pairs: dict[str, Any] = {}
    pos = skip_space(text, pos)
    if text.startswith("}", pos):
        return pairs, pos + 1
    while True:
        key, pos = read_key(text, pos, escape)
        value, pos = read_value(text, pos, depth, escape)
        pairs[key] = plain(value)
        pos = separator(text, pos, "}")
        if text[pos] == "}":
            return pairs, pos + 1
        pos += 1


def read_list(text: str, pos: int, depth: int, escape: str = ESCAPE) -> tuple[list[Any], int]:
    items: list[Any] = []
    pos = skip_space(text, pos)
    if text.startswith("]", pos):
        return items, pos + 1
    while True:
        value, pos = read_value(text, pos, depth, escape)
        items.append(plain(value))
        pos = separator(text, pos, "]")
        if text[pos] == "]":
            return items, pos + 1
        pos += 1


def separator(text: str, pos: int, close: str) -> int:
    """The position of the `,` or `close` after a member."""
    pos = skip_space(text, pos)
    if pos >= len(text):
        raise Incomplete
    if text[pos] not in ("," + close):
        raise Malformed(text[pos:pos + 40])
    return pos


def plain(value: Any) -> Any:
    """A nested value as JSON: an escaped one is a string."""
    return value.text if isinstance(value, Escaped) else value


def typed(value: Any, schema: Any) -> Any:
    """A top-level argument as the tool's schema types it: `<escape>42<escape>` is 42 for an integer."""
    if isinstance(value, Escaped):
        return convert(value.text, schema) if schema_types(schema) else value.text
    return value
