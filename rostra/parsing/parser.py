"""The output-parser contract, and the per-choice pipeline that chains the parsers.

A parser takes text deltas and returns semantic events; `finish()` flushes what it held.
The same object serves stream and non-stream (non-stream is the fold of the events), and a
parser never sees HTTP or protocol models. Reasoning parsers run first, then the tool
parser sees only the answer text.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol, Sequence

from rostra.core import EngineOutput, TokenStep
from rostra.core import FinishReason as EngineFinishReason
from rostra.parsing.decoder import Decoder
from rostra.parsing.events import Event, Finish, FinishReason, Text, ToolCallEnd, ToolCallStart
from rostra.parsing.reasoning.base import ReasoningParser
from rostra.parsing.tools.base import ToolParser
from rostra.parsing.tools.emitter import CallEmitter

log = logging.getLogger("rostra.tools")


class OutputParser(Protocol):
    def feed(self, events: list[Event]) -> list[Event]:
        """Transform events (it rewrites the Text events it understands)."""

    def finish(self) -> list[Event]:
        """Events for what was held back at the end."""


class ChoicePipeline:
    """Engine outputs of one choice -> semantic events: decoder, then parsers in order."""

    def __init__(self, decoder: Decoder, parsers: Sequence[OutputParser] = (), with_logprobs: bool = False):
        self._decoder = decoder
        self._parsers = list(parsers)
        self._with_logprobs = with_logprobs
        self._pending_logprobs: list[TokenStep] = []
        self.completion_tokens = 0
        self.reasoning_tokens = 0
        self._undecided_tokens = 0
        self.made_tool_call = False
        # The reasoning parser, if any, comes first; tokens fed while it is in the thinking count as reasoning.
        first = self._parsers[0] if self._parsers else None
        self._reasoning = first if isinstance(first, ReasoningParser) else None

    @property
    def stopped(self) -> bool:
        return self._decoder.stopped

    def feed(self, output: EngineOutput) -> list[Event]:
        text = []
        thinking_before = self._thinking()
        fed = 0
        for token in output.tokens:
            if self._decoder.stopped:
                break
            fed += 1
            text.append(self._decoder.feed(token))
            if self._with_logprobs and not self._decoder.stopped:
                self._pending_logprobs.append(token)
        self.completion_tokens += fed
        if output.completion_tokens is not None:
            self.completion_tokens = output.completion_tokens
        events = self._parse("".join(text))
        self._count_reasoning(fed, thinking_before)
        return events

    def _thinking(self) -> bool:
        return self._reasoning is not None and self._reasoning.in_reasoning

    def _count_reasoning(self, fed: int, thinking_before: bool) -> None:
        """Tokens that open, fill or close the thinking are reasoning tokens; those spent while
        the parser could not yet tell (a start marker's first tokens) count once it can."""
        if self._reasoning is None:
            return
        if self._reasoning.state == "deciding":
            self._undecided_tokens += fed
        elif thinking_before or self._thinking():
            self.reasoning_tokens += fed + self._undecided_tokens
            self._undecided_tokens = 0
        else:
            self._undecided_tokens = 0

    def finish(self, engine_reason: EngineFinishReason, engine_stop: int | str | None = None) -> list[Event]:
        """`engine_stop`: the stop the engine matched itself, if it says (an upstream's stop_reason)."""
        self._decoder.note_engine_stop(engine_stop)
        # The budget ended the output: what a tool parser still holds is an unfinished call (or the start of
        # one), never an answer; calls it ends now were cut.
        cut = engine_reason == "length" and not self._decoder.stopped
        events = self._parse(self._decoder.finish(cut))
        for position, parser in enumerate(self._parsers):
            flushed = parser.finish()
            if cut and isinstance(parser, (ToolParser, CallEmitter)):
                flushed = _cut_calls(flushed)
            for later in self._parsers[position + 1:]:
                flushed = later.feed(flushed)
            events += flushed
        events = self._attach_logprobs(events)
        if self._pending_logprobs and not self._decoder.stopped:
            # Tokens whose text became tool-call markup: their logprobs still belong to the answer.
            events.append(Text("", tuple(self._pending_logprobs)))
            self._pending_logprobs = []
        self._note_tool_calls(events)
        reason: FinishReason
        if cut:
            reason = "length"  # calls or not: the output did not end where the model meant it to
        elif self.made_tool_call:
            reason = "tool_calls"  # whenever a call was made, as OpenAI reports it
        else:
            reason = "stop" if self._decoder.stopped else engine_reason
        return events + [Finish(reason, self.completion_tokens, self.reasoning_tokens, self._decoder.stop_string,
                                self._decoder.stop_token)]

    def _note_tool_calls(self, events: list[Event]) -> None:
        if not self.made_tool_call:
            self.made_tool_call = any(isinstance(e, ToolCallStart) for e in events)

    def _parse(self, text: str) -> list[Event]:
        if not text and not self._pending_logprobs:
            return []
        events: list[Event] = [Text(text)] if text else []
        for parser in self._parsers:
            events = parser.feed(events)
        self._note_tool_calls(events)
        return self._attach_logprobs(events)

    def _attach_logprobs(self, events: list[Event]) -> list[Event]:
        """Logprobs ride on the first text released after their tokens were sampled."""
        if not self._pending_logprobs:
            return events
        for i, event in enumerate(events):
            if isinstance(event, Text) and event.text:
                events[i] = dataclasses.replace(event, logprobs=tuple(self._pending_logprobs))
                self._pending_logprobs = []
                break
        return events


def _cut_calls(flushed: list[Event]) -> list[Event]:
    """A tool parser's flush when the budget cut the output: held text (a partial marker, an unfinished
    call's markup) is dropped rather than released as content, and each call ended here is marked cut."""
    kept: list[Event] = []
    for event in flushed:
        if isinstance(event, Text):
            if event.text:
                log.info("output cut inside a tool call: %d characters of its markup dropped", len(event.text))
            if event.logprobs:
                kept.append(Text("", event.logprobs))
        elif isinstance(event, ToolCallEnd):
            kept.append(dataclasses.replace(event, complete=False))
        else:
            kept.append(event)
    return kept
