"""The tool-parser contract, and the machinery most formats share.

A tool parser sits after the reasoning parser: it receives Text events (the answer) and turns
the model's tool-call markup into ToolCallStart / ToolCallArgs / ToolCallEnd events, passing
the rest through as Text. Rules every format keeps:

- Markup never reaches the content; text before, between and after calls does.
- A call is emitted once it is complete and valid (known tool name, arguments that parse): a
  broken or unknown call stays text. The exception is a call whose start is unambiguous (a
  hermes `{"name": …, "arguments": {` head, a forced call: `stream_calls`, CallStream): it starts
  as soon as its name is read and its arguments stream; if they then break, it still ends, with
  what was valid closed into JSON. Either way nothing streamed is ever taken back, and a stream
  always equals its non-streamed fold.
- Every call then passes the CallEmitter (emitter.py): tools of the request only, tool_choice,
  parallel_tool_calls, indexes 0, 1, 2... per choice, ids, canonical strict JSON arguments.
"""

from __future__ import annotations

import json
import logging
import secrets
import string
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from rostra.parsing.events import Event, Text, ToolCallArgs, ToolCallEnd, ToolCallStart, feed_texts

log = logging.getLogger("rostra.tools")


@dataclass(frozen=True)
class Head:
    """A call's head as read: its name, the model's id for it, where its arguments' "{" is."""

    name: str
    args_at: int
    id: str = ""


class BlockStream(Protocol):
    """What streams a block's calls as the model writes them (CallStream, SectionStream)."""

    @property
    def started(self) -> bool: ...  # a call went out: the block can no longer be parsed whole

    def feed(self, text: str) -> tuple[list[Event], str]: ...  # events, and text after the call

    def end(self) -> list[Event]: ...  # the block ended


@dataclass(frozen=True)
class ToolSpec:
    """A function tool of the request: its name and the JSON schema of its parameters."""

    name: str
    parameters: dict[str, Any]
    strict: bool = False  # the tool's `strict`: its arguments must match the schema exactly


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""  # the model's own id for the call (Kimi K2); "" : the parser makes one


def openai_call_id() -> str:
    return "call_" + secrets.token_hex(12)


def alphanumeric_id(length: int = 9) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str) -> Any:
    """json.loads without Python's NaN/Infinity extension (clients could not parse them back)."""
    return json.loads(text, parse_constant=_no_constants)


class ToolParser:
    """Base: passes Text through; subclasses recognise their markup (see MarkupToolParser)."""

    name = "base"
    # The family's reasoning parser: detection (parsing/dialect.py) picks it with this one when the template
    # writes its markers.
    reasoning: str | None = None
    # Turn markup of the family's templates (not its calls'): where two formats read a template's calls alike
    # (Jamba's and Hunyuan's <tool_calls>[…]), detection picks the one whose family's markup the template has.
    family_markers: tuple[str, ...] = ()
    # Whether detection tries it on the template's probe call. False for a family whose calls are another format's
    # (ERNIE 4.5 writes hermes's): reading the probe would tell nothing the other format's parser does not.
    probed = True

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        self.tools = {tool.name: tool for tool in tools}
        self.calls = 0  # calls emitted so far: the next call's index
        self.max_calls = max_calls  # parallel_tool_calls: false -> 1; later calls are dropped

    def feed(self, events: list[Event]) -> list[Event]:
        return feed_texts(events, self.feed_text)

    def feed_text(self, text: str) -> list[Event]:
        return [Text(text)] if text else []

    def finish(self) -> list[Event]:
        return []

    def new_call_id(self) -> str:
        return openai_call_id()

    def emit(self, calls: list[ParsedCall]) -> list[Event]:
        events: list[Event] = []
        for call in calls:
            if self.max_calls is not None and self.calls >= self.max_calls:
                log.info("dropped tool call %r: parallel_tool_calls is false", call.name)
                continue
            index = self.calls
            self.calls += 1
            events += [ToolCallStart(index, call.id or self.new_call_id(), call.name),
                       ToolCallArgs(index, arguments_json(call.arguments)), ToolCallEnd(index)]
        return events

    def known(self, calls: list[ParsedCall] | None, raw: str) -> list[ParsedCall] | None:
        """The calls if every one names a tool of the request; else None (the markup stays text)."""
        if not calls:
            log.info("unparseable tool call left as text: %.200r", raw)
            return None
        unknown = [c.name for c in calls if c.name not in self.tools]
        if unknown:
            log.info("tool call to unknown tool(s) %s left as text", unknown)
            return None
        return calls


def call_from_object(obj: Any, arguments_keys: Sequence[str] = ("arguments", "parameters")) -> ParsedCall | None:
    """{"name": ..., "arguments": {...}} (or "parameters"; arguments may be a JSON string)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments: Any = {}
    for key in arguments_keys:
        if key in obj:
            arguments = obj[key]
            break
    if isinstance(arguments, str):
        try:
            arguments = loads_strict(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None
    return ParsedCall(obj["name"], arguments)


def calls_from_json(text: str) -> list[ParsedCall] | None:
    """A JSON object or a list of objects, each a call; None if it is not exactly that."""
    try:
        value = loads_strict(text)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [call_from_object(item) for item in items]
    return None if not calls or any(c is None for c in calls) else calls  # type: ignore[return-value]


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


class MarkupToolParser(ToolParser):
    """Formats whose calls sit between a start and an end marker, e.g. <tool_call>…</tool_call>.

    Outside a call, text is released except a tail that could be the start of `start`. Inside,
    text is buffered until `end` (or the end of the output, when `end_optional`), then the
    block between the markers goes to `parse_block`: calls -> events, None -> the raw markup
    is released as text.

    With `stream_calls`, a block that is one JSON call object streams instead (CallStream): the
    call starts once its name is read and its arguments go out as they arrive; the block's end
    ends it. Blocks of any other shape are parsed whole, as above.
    """

    start: str
    end: str
    end_optional = False  # a call may run to the end of the output without its end marker
    stream_calls = False
    restarts = False  # a new start marker inside a block ends it (its end marker was left out)
    # An end marker outside any block is markup too (a model that closed a block twice): dropped.
    drops_stray_end = False
    drops_empty = False  # a block with nothing but whitespace in it is dropped, not kept as text

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int | None = None):
        super().__init__(tools, max_calls)
        self._pending = ""  # text not yet released (outside: a partial start marker)
        self._inside = False
        self._searched = 0  # inside: the end marker does not start before this index of _pending
        self._stream: BlockStream | None = None  # inside, when streaming: the block's stream
        self._streamed = 0  # inside: _pending up to here went to the stream
        self._after: list[str] = []  # inside: text after a streamed call object, before the end

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        raise NotImplementedError

    def feed_text(self, text: str) -> list[Event]:
        self._pending += text
        out: list[Event] = []
        while self._pending:
            if not self._inside:
                at = self._pending.find(self.start)
                stray = self._pending.find(self.end) if self.drops_stray_end else -1
                if stray >= 0 and (at < 0 or stray < at):
                    log.info("stray %r outside a tool call dropped", self.end)
                    out += [Text(self._pending[:stray])] if stray else []
                    self._pending = self._pending[stray + len(self.end):]
                    continue
                if at < 0:
                    keep = max(partial_suffix(self._pending, self.start),
                               partial_suffix(self._pending, self.end) if self.drops_stray_end else 0)
                    release = self._pending[: len(self._pending) - keep]
                    self._pending = self._pending[len(release):]
                    out += [Text(release)] if release else []
                    break
                if at:
                    out.append(Text(self._pending[:at]))
                self._pending = self._pending[at:]
                self._enter()
            end_at, end_len = self._find_end()
            if end_at < 0:
                # Next time, look only where a new end marker could begin: the cost per chunk
                # stays proportional to the chunk, however long the call.
                longest = max(len(self.end), len(self.start) if self.restarts else 0)
                self._searched = max(len(self.start), len(self._pending) - longest + 1)
                keep = max(partial_suffix(self._pending, self.end),
                           partial_suffix(self._pending, self.start) if self.restarts else 0)
                out += self._stream_to(len(self._pending) - keep)
                break
            out += self._stream_to(end_at)
            self._searched = 0
            raw = self._pending[: end_at + end_len]
            self._pending = self._pending[len(raw):]
            self._inside = False
            out += self._close(raw, raw[len(self.start): end_at])
        return merge_text(out)

    def finish(self) -> list[Event]:
        raw, inside = self._pending, self._inside
        out = self._stream_to(len(raw)) if inside else []
        self._pending, self._inside = "", False
        if not raw:
            return out
        if inside and (self.end_optional or self._stream_started()):
            return out + self._close(raw, raw[len(self.start):])
        return [Text(raw)]

    def _find_end(self) -> tuple[int, int]:
        """Where the block ends, and the length of the marker that ends it (0: a new start)."""
        since = max(len(self.start), self._searched)
        at = self._pending.find(self.end, since)
        if self.restarts:
            again = self._pending.find(self.start, since)
            if again >= 0 and (at < 0 or again < at):
                return again, 0
        return at, len(self.end)

    def new_stream(self) -> BlockStream | None:
        """The stream of a new block; None: blocks are parsed whole at their end."""
        from rostra.parsing.tools.call_stream import CallStream  # (it builds on this module)

        return CallStream(self) if self.stream_calls else None

    def _enter(self) -> None:
        self._inside = True
        self._stream = self.new_stream()
        self._streamed = len(self.start)
        self._after = []

    def _stream_to(self, upto: int) -> list[Event]:
        if self._stream is None or upto <= self._streamed:
            return []
        piece, self._streamed = self._pending[self._streamed: upto], upto
        events, after = self._stream.feed(piece)
        self._after.append(after)
        return events

    def _stream_started(self) -> bool:
        return self._stream is not None and self._stream.started

    def _close(self, raw: str, block: str) -> list[Event]:
        stream, self._stream = self._stream, None
        if stream is not None and stream.started:
            after = "".join(self._after).strip()  # text the model wrote after the call, unclosed
            return stream.end() + ([Text(after)] if after else [])
        if self.drops_empty and not block.strip():
            # An empty block (Qwen-family models write <tool_call>\n\n</tool_call>) carries no
            # call and nothing to read: dropped, as markup never reaches the content.
            log.info("empty tool-call block dropped: %.200r", raw)
            return []
        calls = self.known(self.parse_block(block), raw)
        return self.emit(calls) if calls else [Text(raw)]


class SectionToolParser(MarkupToolParser):
    """Formats whose calls sit in one section, each between `call_begin` and `call_end`
    (DeepSeek, Kimi). Calls stream (SectionStream) once their head is read; a section whose
    first call cannot stream is parsed whole, all or nothing: one bad call leaves it all text."""

    call_begin: str
    call_end: str

    def new_stream(self) -> BlockStream | None:
        from rostra.parsing.tools.section_stream import SectionStream  # (it builds on this module)

        return SectionStream(self)

    def read_head(self, text: str) -> Head | None:
        """The head of a call from the text after call_begin; None until its arguments' "{"."""
        raise NotImplementedError

    def call_id(self, name: str) -> str:
        return self.new_call_id()

    def parse_call(self, body: str) -> ParsedCall | None:
        raise NotImplementedError

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        calls: list[ParsedCall] = []
        rest = block.strip()
        while rest:
            if not rest.startswith(self.call_begin):
                return None  # stray text between calls: not this format
            rest = rest[len(self.call_begin):]
            end = rest.find(self.call_end)
            # Without its end marker this must be the last call (the output was cut off after it).
            body, rest = (rest, "") if end < 0 else (rest[:end], rest[end + len(self.call_end):].strip())
            call = self.parse_call(body)
            if call is None:
                return None
            calls.append(call)
        return calls or None


def merge_text(events: list[Event]) -> list[Event]:
    """Adjacent Text events as one (fewer, larger content deltas); commentary and answer text stay apart."""
    merged: list[Event] = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, Text) and isinstance(last, Text) and last.commentary == event.commentary:
            merged[-1] = Text(last.text + event.text, commentary=event.commentary)
        elif not (isinstance(event, Text) and not event.text):
            merged.append(event)
    return merged
