"""Semantic events: the small closed set every renderer consumes.

A stream is rendered event by event; a non-streamed response is the fold of the same events,
so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Literal, Union

from rostra.core import TokenStep
from rostra.parsing.decoder import StopToken

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(frozen=True)
class Text:
    text: str
    # The tokens this text came from, when the request asked for logprobs.
    logprobs: tuple[TokenStep, ...] = ()
    # Text the model wrote as commentary, not as its answer: gpt-oss's commentary channel (a preamble to its tool
    # calls, a progress note). The Responses API labels its message `phase: "commentary"`.
    commentary: bool = False
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class Reasoning:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True)
class ToolCallArgs:
    index: int
    text: str
    type: Literal["tool_call_args"] = "tool_call_args"


@dataclass(frozen=True)
class ToolCallEnd:
    index: int
    # False: the output was cut (max_tokens, the context's end) before the call was written out; its
    # arguments were closed into valid JSON, but the call is not the one the model meant to make.
    complete: bool = True
    type: Literal["tool_call_end"] = "tool_call_end"


@dataclass(frozen=True)
class Finish:
    reason: FinishReason
    completion_tokens: int
    reasoning_tokens: int = 0  # of completion_tokens, those sampled while the model was thinking
    stop_string: str | None = None  # the request's stop string that ended the text, if one did (Anthropic names it)
    stop_token: StopToken | None = None  # the request's stop token that ended it, if one did

    @property
    def stop_reason(self) -> str | int | None:
        """vLLM's `stop_reason`: the matched stop string, else the stop token's id; None after an
        end-of-generation token or the length limit."""
        if self.stop_string is not None:
            return self.stop_string
        return self.stop_token.token_id if self.stop_token is not None else None

    @property
    def stop_str(self) -> str | None:
        """tabbyAPI's `stop_str`: the matched stop string, or the text of the stop token."""
        if self.stop_string is not None:
            return self.stop_string
        return self.stop_token.text if self.stop_token is not None else None
    type: Literal["finish"] = "finish"


Event = Union[Text, Reasoning, ToolCallStart, ToolCallArgs, ToolCallEnd, Finish]


def feed_texts(events: list[Event], feed_text: Callable[[str], list[Event]]) -> list[Event]:
    """A parser's feed: each Text event's text through `feed_text` (the events it gives stand in its place), every
    other event (what a parser before it found) passed on as it is."""
    out: list[Event] = []
    for event in events:
        if not isinstance(event, Text):
            out.append(event)
        elif event.commentary:  # what a later parser leaves of commentary is commentary still
            out.extend(replace(given, commentary=True) if isinstance(given, Text) else given
                       for given in feed_text(event.text))
        else:
            out.extend(feed_text(event.text))
    return out
