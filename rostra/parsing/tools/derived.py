"""derived: a tool-call parser built from the markup a chat template writes around a call (parsing/derive.py
reads it off the template's rendering of a probe call), for a family no parser of rostra knows.

Three ways of writing a call's name and arguments are read (`DerivedMarkup.encoding`):

    name_json   PREFIX NAME SEP {arguments} SUFFIX                 <|fn|>get_weather\\n{"city": "Oslo"}<|/fn|>
    keyed_json  PREFIX {"NAME_KEY": NAME, "ARGS_KEY": {…}} SUFFIX  [[call]]{"name": …, "arguments": {…}}[[/call]]
    xml         PREFIX NAME NAME_CLOSE (KEY_OPEN key KEY_CLOSE value VALUE_CLOSE)… SUFFIX
                                                                   <call name="get_weather"><arg name="city">Oslo</arg></call>

Each call is a block of its own, or the calls sit in one section (SECTION_START … SECTION_END, separated by
whitespace or a SEPARATOR such as ","). JSON arguments stream once the call's head is read (SectionStream); XML
values stream as they are written (tagged_calls_stream). A block that does not read as a call to a tool of the
request stays text, as with every other parser.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rostra.parsing.events import Event
from rostra.parsing.tools.base import (BlockStream, Head, ParsedCall, SectionToolParser, ToolParser, loads_strict)
from rostra.parsing.tools.section_stream import BETWEEN, HEAD, SectionStream
from rostra.parsing.tools.tagged_calls import CallTags, TaggedCallsToolParser

NEVER = "\x00"  # an end marker no output contains: the block runs to the output's end (or a new start)
NAME_KEY_VALUE = '\\s*\\{{\\s*"{name_key}"\\s*:\\s*"((?:[^"\\\\\\n]|\\\\.)*)"\\s*,\\s*"{args_key}"\\s*:\\s*(?=\\{{)'


@dataclass(frozen=True)
class DerivedMarkup:
    encoding: str  # name_json | keyed_json | xml
    prefix: str  # what opens a call (xml: up to its name)
    suffix: str = ""  # what closes a call ("": nothing but the next call or the section's end)
    section_start: str = ""  # what opens the section the calls sit in ("": every call is a block of its own)
    section_end: str = ""
    separator: str = ""  # between calls in a section, besides whitespace
    name_sep: str = ""  # name_json: between the name and the arguments' "{" ("": whitespace)
    name_key: str = "name"  # keyed_json
    arguments_key: str = "arguments"
    name_close: str = ""  # xml: after the name
    key_open: str = ""
    key_close: str = ""
    value_close: str = ""
    value_newlines: bool = False  # xml: the markup puts a newline on each side of a value

    def describe(self) -> str:
        """The markup as one call written out, for the log line and /v1/models."""
        if self.encoding == "name_json":
            call = f"{self.prefix}NAME{self.name_sep or ' '}{{arguments}}{self.suffix}"
        elif self.encoding == "keyed_json":
            call = f'{self.prefix}{{"{self.name_key}": NAME, "{self.arguments_key}": {{arguments}}}}{self.suffix}'
        else:
            call = (f"{self.prefix}NAME{self.name_close}{self.key_open}KEY{self.key_close}VALUE{self.value_close}…"
                    f"{self.suffix}")
        if self.section_start:
            call = f"{self.section_start}{call}{self.separator}…{self.section_end}"
        return json.dumps(call, ensure_ascii=False)


def derived_parser_class(markup: DerivedMarkup) -> type[ToolParser]:
    """A parser class for `markup` (one per model: a class, like every registered parser, so the server layers the
    lenient parsers after it as usual)."""
    if markup.encoding == "xml":
        return type("DerivedXmlToolParser", (DerivedXmlToolParser,), {
            "markup": markup, "tags": xml_tags(markup),
            "start": markup.section_start or markup.prefix, "end": markup.section_end or markup.suffix or NEVER,
            "end_optional": True, "restarts": not markup.section_start})
    sectioned = bool(markup.section_start)
    return type("DerivedJsonToolParser", (DerivedJsonToolParser,), {
        "markup": markup, "start": markup.section_start if sectioned else markup.prefix,
        "end": (markup.section_end or NEVER) if sectioned else (markup.suffix or NEVER),
        "call_begin": markup.prefix if sectioned else "", "call_end": (markup.suffix or NEVER) if sectioned else NEVER,
        "end_optional": True, "restarts": not sectioned})


class DerivedJsonToolParser(SectionToolParser):
    """name_json and keyed_json calls: blocks of one call, or a section of them."""

    name = "derived"
    markup: DerivedMarkup

    def new_stream(self) -> BlockStream | None:
        return DerivedStream(self)

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        if not self.markup.section_start:
            call = self.parse_call(block)
            return [call] if call else None
        calls: list[ParsedCall] = []
        rest = block.strip()
        while rest:
            if calls and self.markup.separator and rest.startswith(self.markup.separator):
                rest = rest[len(self.markup.separator):].lstrip()
            if not rest.startswith(self.call_begin):
                return None
            rest = rest[len(self.call_begin):]
            end = rest.find(self.call_end) if self.call_end != NEVER else -1
            body, rest = (rest, "") if end < 0 else (rest[:end], rest[end + len(self.call_end):].strip())
            call = self.parse_call(body)
            if call is None:
                return None
            calls.append(call)
        return calls or None

    def read_head(self, text: str) -> Head | None:
        if self.markup.encoding == "keyed_json":
            found = keyed_head(self.markup).match(text)
            if not found:
                return None
            try:
                name = json.loads(f'"{found.group(1)}"')
            except ValueError:
                return None
            return Head(name, found.end())
        name, args_at = self._split_name(text)
        return Head(name, args_at) if name and args_at >= 0 and text[args_at:].startswith("{") else None

    def parse_call(self, body: str) -> ParsedCall | None:
        if self.markup.encoding == "keyed_json":
            return keyed_call(self.markup, body)
        name, args_at = self._split_name(body)
        if not name or args_at < 0:
            return None
        arguments = whole_object(body[args_at:])
        return ParsedCall(name, arguments) if arguments is not None else None

    def _split_name(self, text: str) -> tuple[str, int]:
        """The name before the arguments and where the arguments begin (-1: not in sight yet)."""
        sep = self.markup.name_sep.strip()
        if sep:
            at = text.find(sep)
            if at < 0:
                return "", -1
            name, rest = text[:at].strip(), text[at + len(sep):]
        else:
            found = re.match(r"\s*(\S+?)(?=\{|\s)", text)
            if not found:
                return "", -1
            name, rest = found.group(1), text[found.end():]
        stripped = rest.lstrip()
        return (name, len(text) - len(stripped)) if stripped and " " not in name else (name, -1)


def keyed_head(markup: DerivedMarkup) -> re.Pattern[str]:
    return re.compile(NAME_KEY_VALUE.format(name_key=re.escape(markup.name_key),
                                            args_key=re.escape(markup.arguments_key)))


def keyed_call(markup: DerivedMarkup, body: str) -> ParsedCall | None:
    value = whole_object(body)
    if value is None or not isinstance(value.get(markup.name_key), str):
        return None
    arguments: Any = value.get(markup.arguments_key, {})
    if isinstance(arguments, str):
        arguments = whole_object(arguments) if arguments.strip() else {}
    return ParsedCall(value[markup.name_key], arguments) if isinstance(arguments, dict) else None


def whole_object(text: str) -> dict[str, Any] | None:
    """`text` as one JSON object (whitespace around it allowed); None if it is anything else."""
    try:
        value = loads_strict(text.strip())
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class DerivedStream(SectionStream):
    """SectionStream for derived markup: a block of one call starts at its head; in a section, the separator
    between calls is markup."""

    def __init__(self, parser: DerivedJsonToolParser):
        super().__init__(parser)
        self.markup = parser.markup
        if not self.markup.section_start:
            self.state = HEAD

    def _step(self, out: list[Event]) -> bool:
        if self.state == BETWEEN and self.started and self.markup.separator:
            stripped = self._buf.lstrip()
            if stripped.startswith(self.markup.separator):
                self._buf = stripped[len(self.markup.separator):]
                return True
            if not stripped:
                self._buf = ""
                return False
        return super()._step(out)


class DerivedXmlToolParser(TaggedCallsToolParser):
    name = "derived"
    markup: DerivedMarkup


def _flexible(markup: str) -> str:
    """A regex for literal markup whose whitespace may vary."""
    return r"\s*".join(re.escape(piece) for piece in markup.split())


def xml_tags(markup: DerivedMarkup) -> CallTags:
    name_close = markup.name_close.strip()
    name = r"([^\s<>\"'=|\[\]]+)" + (r"\s*" + _flexible(name_close) if name_close else r"(?=\s|<|\Z)")
    opening = markup.prefix.strip() if markup.section_start else ""
    key_close = markup.key_close.strip()
    return CallTags(
        function_open=opening, function_head=re.compile(r"\s*" + (_flexible(opening) + r"\s*" if opening else "") + name),
        parameter_open=markup.key_open.strip(),
        parameter_head=re.compile(r"\s*" + _flexible(markup.key_open) + r"([^\n]+?)" + _flexible(key_close)),
        head_end=key_close.split()[-1] if key_close else ">", parameter_close=markup.value_close.strip(),
        function_close=markup.suffix.strip() if markup.section_start else "",
        value_newlines=markup.value_newlines, name_needs_follower=not name_close)
