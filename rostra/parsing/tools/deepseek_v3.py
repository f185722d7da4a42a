"""deepseek_v3: the tool-call markup of DeepSeek V3 / R1, and of V3.1.

The markers are special tokens spelled with a fullwidth vertical bar "｜" (U+FF5C) and a
lower-one-eighth block "▁" (U+2581) for spaces; they are written with escapes below because
they look like ASCII "|" and "_" but are not. V3 / R1:

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Oslo"}
    ```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add
    ```json
    {"a": 1}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 drops the type and the fence:

    <｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Oslo"}<｜tool▁call▁end｜>

All calls sit in one calls-begin … calls-end block; the block is all or nothing: if any call in
it is malformed or names an unknown tool, the whole block stays text. The output may end
without calls-end (the model often stops right after its last call), and even without the last
call-end, as long as that call's arguments are complete JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rostra.parsing.tools.base import Head, ParsedCall, SectionToolParser

BAR, SPACE = "\uff5c", "\u2581"


def _marker(words: str) -> str:
    return f"<{BAR}{words.replace(' ', SPACE)}{BAR}>"


CALLS_BEGIN = _marker("tool calls begin")
CALLS_END = _marker("tool calls end")
CALL_BEGIN = _marker("tool call begin")
CALL_END = _marker("tool call end")
SEP = _marker("tool sep")
FENCE_OPEN = re.compile(r"```[A-Za-z]*[ \t]*\n?")  # ```json, ``` or ```json{... on one line
ARGS_OPEN = re.compile(r"\s*(?:```[A-Za-z]*[ \t]*\n?)?\s*\{")  # V3: up to the arguments' "{"


class DeepSeekV3ToolParser(SectionToolParser):
    name = "deepseek_v3"
    start = CALLS_BEGIN
    end = CALLS_END
    end_optional = True

    call_begin = CALL_BEGIN
    call_end = CALL_END

    def parse_call(self, body: str) -> ParsedCall | None:
        return parse_call(body)

    def read_head(self, text: str) -> Head | None:
        head, sep, tail = text.partition(SEP)
        if not sep:
            return None
        stripped = tail.lstrip()
        if stripped.startswith("{"):  # V3.1
            name, args_at = head.strip(), len(text) - len(stripped)
        else:
            name, newline, rest = tail.partition("\n")
            opened = ARGS_OPEN.match(rest)
            if head.strip() != "function" or not newline or not opened:
                return None
            name, args_at = name.strip(), len(text) - len(rest) + opened.end() - 1
        return Head(name, args_at) if name else None


def parse_call(body: str) -> ParsedCall | None:
    """`function<sep>NAME\\n```json\\nARGS\\n```` (V3) or `NAME<sep>ARGS` (V3.1)."""
    head, sep, tail = body.partition(SEP)
    if not sep:
        return None
    if tail.lstrip().startswith("{"):
        name, arguments = head, tail  # V3.1 (also a V3 call whose name line went missing)
    else:
        if head.strip() != "function":
            return None
        name, newline, arguments = tail.partition("\n")
        if not newline:
            return None
    name = name.strip()
    parsed = _arguments(arguments)
    return ParsedCall(name, parsed) if name and parsed is not None else None


def _arguments(text: str) -> dict[str, Any] | None:
    """The JSON object of a call, with or without its ```json fence; None if incomplete."""
    text = text.strip()
    fence = FENCE_OPEN.match(text)
    if fence:
        text = text[fence.end():].rstrip()
        # The closing fence may be missing when the output was cut off right after the JSON.
        text = text[:-3] if text.endswith("```") else text
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _reject_constant(name: str) -> None:
    # NaN / Infinity parse in Python but are not JSON: the arguments we emit must be.
    raise ValueError(name)
