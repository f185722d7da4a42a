"""Harness for data-driven tool-parser tests: each case whole, one character at a time, and
under many random splits; the streamed result must equal the non-streamed one."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from rostra.parsing.events import Reasoning, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.parsing.tools import layered_tool_parser, tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.emitter import CallEmitter

WEATHER = ToolSpec("get_weather", {"type": "object", "properties": {"city": {"type": "string"},
                                                                     "days": {"type": "integer"}},
                                   "required": ["city"]})
ADD = ToolSpec("add", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
NOW = ToolSpec("now", {"type": "object", "properties": {}})
TOOLS = [WEATHER, ADD, NOW]


@dataclass
class Case:
    id: str
    output: str
    content: str
    calls: list[tuple[str, dict]] = field(default_factory=list)


@dataclass
class Result:
    content: str
    calls: list[tuple[str, dict]]
    ids: list[str]


def run_parser(parser_name: str, pieces: list[str], tools=TOOLS, layered: bool = False) -> Result:
    """The parser and, after it, the CallEmitter every call passes in a server."""
    cls = tool_parser_class(parser_name)
    parser = layered_tool_parser(cls)(tools) if layered else cls(tools)
    emitter = CallEmitter(tools)
    events = []
    for piece in pieces:
        events += emitter.feed(parser.feed([Text(piece)]))
    events += emitter.feed(parser.finish()) + emitter.finish()
    content = "".join(e.text for e in events if isinstance(e, Text))
    calls, ids = fold_tool_calls(events)
    return Result(content, calls, ids)


def run_reasoning_parser(parser, pieces: list[str]) -> tuple[str, str, list]:
    """Feed a reasoning parser the output in pieces: (thinking, answer, all events)."""
    events = []
    for piece in pieces:
        events += parser.feed([Text(piece)])
    events += parser.finish()
    reasoning = "".join(e.text for e in events if isinstance(e, Reasoning))
    answer = "".join(e.text for e in events if isinstance(e, Text))
    return reasoning, answer, events


def fold_tool_calls(events) -> tuple[list[tuple[str, dict]], list[str]]:
    """The calls a client assembles from the events, checking the tool-call event contract."""
    names: dict[int, str] = {}
    args: dict[int, str] = {}
    ids: list[str] = []
    ended: list[int] = []
    for event in events:
        if isinstance(event, ToolCallStart):
            assert event.index == len(names), "indexes must count 0, 1, 2..."
            assert event.index not in names, "a call is announced once"
            names[event.index] = event.name
            ids.append(event.id)
            args[event.index] = ""
        elif isinstance(event, ToolCallArgs):
            assert event.index in names and event.index not in ended
            args[event.index] += event.text
        elif isinstance(event, ToolCallEnd):
            ended.append(event.index)
    assert sorted(ended) == sorted(names), "every call ends"
    assert len(set(ids)) == len(ids), "ids are unique"
    return [(names[i], json.loads(args[i])) for i in sorted(names)], ids


def splits(text: str, rng: random.Random) -> list[str]:
    if len(text) < 2:
        return [text]
    cuts = sorted(rng.sample(range(1, len(text)), k=rng.randint(1, min(len(text) - 1, 20))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def check_case(parser_name: str, case: Case, tools=TOOLS, rounds: int = 100, layered: bool = False) -> None:
    whole = run_parser(parser_name, [case.output], tools, layered)
    assert whole.content == case.content
    assert whole.calls == case.calls
    by_char = run_parser(parser_name, list(case.output), tools, layered)
    assert (by_char.content, by_char.calls) == (whole.content, whole.calls)
    rng = random.Random(case.id)
    for _ in range(rounds):
        split = run_parser(parser_name, splits(case.output, rng), tools, layered)
        assert (split.content, split.calls) == (whole.content, whole.calls)


def streamed_before(parser_name: str, output: str, marker: str, tools=TOOLS, step: int = 7) -> str:
    """Feed `output` in pieces of `step` characters (several tokens per delta) and return the
    arguments streamed before `marker` (a call's end, last occurrence) was fed: a long call's
    arguments must be out well before its end, not all at once when it closes."""
    cls = tool_parser_class(parser_name)
    parser, emitter = cls(tools), CallEmitter(tools)
    cut = output.rindex(marker)
    streamed = []
    for at in range(0, cut - step + 1, step):
        events = emitter.feed(parser.feed([Text(output[at: at + step])]))
        streamed += [e.text for e in events if isinstance(e, ToolCallArgs)]
    return "".join(streamed)
