"""OpenAI gpt-oss: the harmony format, parsed from its markup text.

After the prompt's `<|start|>assistant` the model writes messages, each a header and a body:

    <|channel|>analysis<|message|>THINKING<|end|>
    <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>

(the recipient `to=...` may also stand before `<|channel|>`). The analysis channel is
reasoning; a body with a recipient is a tool call, emitted here (ToolCallStart/Args/End): a
body that begins with "{" starts the call there and its arguments stream as they are written
(ArgumentsWriter: if they break they are closed where they broke, text after them is dropped);
any other body is decided when the message ends, a call if it is empty, else text; a call to the built-in
`python` tool is its code as written (`<|channel|>analysis code<|message|>print(1)`), emitted when it ends as
arguments `{"code": ...}`; every other
body (final, commentary preambles) and text outside any message is answer text, a commentary body's marked as
commentary (harmony's preambles and progress notes: the Responses API's `phase: "commentary"`). The closing
marker may be missing (the engine stops on it): the end of the output closes the message.

Reasoning and answer text stream as they arrive; only a tail that could begin a marker is held
back, and a header is held until it ends, so the stream always equals its non-streamed fold. `state` is "reasoning" inside an analysis body, "deciding" before the first
message and inside a header (its channel not known yet), "answering" otherwise.
"""

from __future__ import annotations

import json
import re

from rostra.parsing.events import (
    Event,
    Reasoning,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from rostra.parsing.reasoning.base import ReasoningParser, merge_reasoning
from rostra.parsing.tools.arguments import ArgumentsWriter
from rostra.parsing.tools.base import merge_text, openai_call_id, partial_suffix

START, CHANNEL, MESSAGE, CONSTRAIN = "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"
END, RETURN, CALL = "<|end|>", "<|return|>", "<|call|>"
CLOSERS = (END, RETURN, CALL)

# The markers that mean something in each place; any other text there is content.
OUTSIDE_MARKERS = (START, CHANNEL, MESSAGE, *CLOSERS)
HEADER_MARKERS = (START, CHANNEL, MESSAGE, CONSTRAIN, *CLOSERS)
BODY_MARKERS = (START, CHANNEL, *CLOSERS)

_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL = re.compile(re.escape(CHANNEL) + r"\s*([^\s<]*)")
PYTHON = "python"  # the built-in tool whose calls are code, not JSON


class GptOssReasoningParser(ReasoningParser):
    name = "gpt_oss"

    def __init__(self, prompt_text: str = "", enabled: bool = True):
        # Harmony always has channels: the output is parsed the same whatever `enabled` says.
        self.state = "deciding"
        self._held = ""  # text not yet handled: at most a tail that could begin a marker
        self._where = "outside"  # outside | header | body
        self._header = ""  # the header so far (markup included), while in one
        self._kind = "text"  # the body being read: reasoning | text | call
        self._commentary = False  # a text body on the commentary channel
        self._recipient = ""
        self._body = ""  # a tool call's body, held until it is known to begin with "{"
        self._writer: ArgumentsWriter | None = None  # the streaming call's arguments
        self._calls = 0
        self._seen_header = False

    def finish(self) -> list[Event]:
        held, self._held = self._held, ""
        out = self._content(held)
        if self._where == "body":
            out += self._close()
        self._leave_header()  # an unfinished header is markup: dropped
        return merge_reasoning(merge_text(out))

    # -- the scanner ------------------------------------------------------------------

    def _markers(self) -> tuple[str, ...]:
        return {"outside": OUTSIDE_MARKERS, "header": HEADER_MARKERS}.get(self._where, BODY_MARKERS)

    def _feed_text(self, text: str) -> list[Event]:
        self._held += text
        out: list[Event] = []
        while self._held:
            markers = self._markers()
            found = [(at, marker) for marker in markers if (at := self._held.find(marker)) >= 0]
            if not found:
                keep = max(partial_suffix(self._held, marker) for marker in markers)
                content = self._held[: len(self._held) - keep]
                self._held = self._held[len(content):]
                out += self._content(content)
                break
            at, marker = min(found)
            content, self._held = self._held[:at], self._held[at + len(marker):]
            out += self._content(content)
            out += self._marker(marker)
        return out

    def _content(self, text: str) -> list[Event]:
        if not text:
            return []
        if self._where == "header":
            self._header += text
            return []
        if self._where == "body":
            if self._kind == "reasoning":
                return [Reasoning(text)]
            if self._kind == "call":
                return self._call_body(text)
            return [Text(text, commentary=self._commentary)]
        return [Text(text)]

    def _call_body(self, text: str) -> list[Event]:
        if self._recipient == PYTHON:  # code: held until the message ends
            self._body += text
            return []
        if self._writer is None:
            decided = bool(self._body) and not self._body.isspace()  # (not an object: look no further)
            self._body += text
            stripped = "" if decided else self._body.lstrip()
            if not stripped.startswith("{"):
                return []  # nothing yet, or a body that is not an object: decided at its end
            self._writer, self._body = ArgumentsWriter(), ""
            name = self._recipient.removeprefix("functions.")
            return [ToolCallStart(self._calls, openai_call_id(), name), *self._arguments(stripped)]
        return self._arguments(text)

    def _arguments(self, text: str) -> list[Event]:
        assert self._writer is not None
        out = self._writer.feed(text)
        return [ToolCallArgs(self._calls, out)] if out else []

    def _marker(self, marker: str) -> list[Event]:
        out: list[Event] = []
        if self._where == "body" and marker in (START, CHANNEL, *CLOSERS):
            out += self._close()  # a new header without a closing marker also ends the body
        if marker == START:
            self._open_header("")
        elif marker == CHANNEL:
            if self._where == "header":
                self._header += marker
            else:
                self._open_header(marker)
        elif marker == CONSTRAIN:  # only a header marker
            self._header += marker
        elif marker == MESSAGE:
            self._open_body()
        elif self._where == "header":  # a closer ending a header: stray markup, dropped
            self._leave_header()
        return out  # (a closer outside any message is dropped too)

    def _open_header(self, header: str) -> None:
        self._where, self._header = "header", header
        self._seen_header = True
        self.state = "deciding"  # which channel is not known until the header ends

    def _leave_header(self) -> None:
        if self._where == "header":
            self._where, self._header = "outside", ""
            self.state = "answering" if self._seen_header else "deciding"

    def _open_body(self) -> None:
        header, self._header = self._header, ""
        self._where = "body"
        self._seen_header = True
        recipient = _RECIPIENT.search(header)
        channel = _CHANNEL.search(header)
        self._recipient = recipient.group(1) if recipient else ""
        self._body = ""
        if self._recipient:
            self._kind = "call"
        elif channel and channel.group(1) == "analysis":
            self._kind = "reasoning"
        else:
            self._kind = "text"  # final, commentary preambles, anything else
        self._commentary = self._kind == "text" and channel is not None and channel.group(1) == "commentary"
        self.state = "reasoning" if self._kind == "reasoning" else "answering"

    def _close(self) -> list[Event]:
        """The end of a body (closing marker, new header, or end of the output)."""
        self._where = "outside"
        self.state = "answering"
        if self._kind != "call":
            return []
        body, self._body = self._body, ""
        writer, self._writer = self._writer, None
        index = self._calls
        if writer is None and self._recipient == PYTHON:
            self._calls += 1
            return [ToolCallStart(index, openai_call_id(), PYTHON),
                    ToolCallArgs(index, json.dumps({"code": body}, ensure_ascii=False)), ToolCallEnd(index)]
        if writer is None:
            if body.strip():
                return [Text(body)]  # not a JSON object
            self._calls += 1
            name = self._recipient.removeprefix("functions.")
            return [ToolCallStart(index, openai_call_id(), name), ToolCallArgs(index, "{}"), ToolCallEnd(index)]
        self._calls += 1
        tail = writer.close()
        events: list[Event] = [ToolCallArgs(index, tail)] if tail else []
        return events + [ToolCallEnd(index)]
