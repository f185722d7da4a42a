"""Semantic events: the small closed set every renderer consumes.

A stream is rendered event by event; a non-streamed response is the fold of the same events,
so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

from rostra.core import TokenStep

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(frozen=True)
class Text:
    text: str
    # The tokens this text came from, when the request asked for logprobs.
    logprobs: tuple[TokenStep, ...] = ()
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
    type: Literal["finish"] = "finish"


Event = Union[Text, Reasoning, ToolCallStart, ToolCallArgs, ToolCallEnd, Finish]
