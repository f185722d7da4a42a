"""Forced tool choice: the output constrained decoding shaped, read as it streams."""

import json
import random

import pytest

from rostra.parsing.events import Text, ToolCallArgs, ToolCallStart
from rostra.parsing.tools.emitter import CallEmitter
from rostra.parsing.tools.forced import NamedCallParser, RequiredCallsParser
from toolparse import TOOLS, fold_tool_calls, splits


def run(make, pieces, strict=True):
    parser, emitter = make(), CallEmitter(TOOLS, strict=strict)
    events = []
    for piece in pieces:
        events += emitter.feed(parser.feed([Text(piece)]))
    events += emitter.feed(parser.finish()) + emitter.finish()
    content = "".join(e.text for e in events if isinstance(e, Text))
    args = ["" for e in events if isinstance(e, ToolCallStart)]
    for e in events:
        if isinstance(e, ToolCallArgs):
            args[e.index] += e.text
    return content, fold_tool_calls(events)[0], args


def required():
    return RequiredCallsParser(TOOLS)


def named():
    return NamedCallParser(TOOLS, "get_weather")


CASES = [
    (required, '[{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}]', "",
     [("get_weather", {"city": "Oslo", "days": 2})]),
    (required, ' [ {"name": "now", "arguments": {}} , {"name": "add", "arguments": {"a": 1.5, "b": 2}} ] ', "",
     [("now", {}), ("add", {"a": 1.5, "b": 2})]),
    (required, '[{"arguments": {"a": 1}, "name": "add"}]', "", [("add", {"a": 1})]),  # parsed whole
    (required, '[{"name": "launch", "arguments": {}}]', '[{"name": "launch", "arguments": {}}]', []),
    (required, "I cannot call a tool.", "I cannot call a tool.", []),  # an engine that does not constrain
    (required, '[{"name": "get_weather", "arguments": {"city": "Os', "", [("get_weather", {"city": "Os"})]),
    (named, '{"city": "Rome"}', "", [("get_weather", {"city": "Rome"})]),
    (named, '  {"city": "Rome", "extra": [1, 2]}  ', "", [("get_weather", {"city": "Rome"})]),  # strict
    (named, "Rome", "Rome", []),
    (named, '{"city": "Ro', "", [("get_weather", {"city": "Ro"})]),  # cut off by max_tokens: still ends
]


@pytest.mark.parametrize("make,output,content,calls", CASES)
def test_forced_whole_and_split(make, output, content, calls):
    whole = run(make, [output])
    assert whole[:2] == (content, calls)
    rng = random.Random(output)
    for pieces in [list(output)] + [splits(output, rng) for _ in range(50)]:
        assert run(make, pieces) == whole  # the argument text itself too, not only its meaning


def test_named_arguments_stream_from_the_first_brace():
    output = '{"city": "' + "Oslo " * 30 + '"}'
    parser, emitter = named(), CallEmitter(TOOLS, strict=True)
    first = emitter.feed(parser.feed([Text(output[:12])]))
    assert isinstance(first[0], ToolCallStart) and isinstance(first[1], ToolCallArgs)
    deltas = [emitter.feed(parser.feed([Text(output[i:i + 10])])) for i in range(12, len(output), 10)]
    assert sum(1 for d in deltas if d) > 10
    rest = emitter.feed(parser.finish()) + emitter.finish()
    text = "".join(e.text for batch in [first, *deltas, rest] for e in batch if isinstance(e, ToolCallArgs))
    assert json.loads(text) == {"city": "Oslo " * 30}
