import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import REGISTRY, tool_parser_class
from toolparse import TOOLS, Case, check_case, streamed_before

REGISTRY.setdefault("granite", "granite:GraniteToolParser")

WEATHER = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
ADD = '{"name": "add", "arguments": {"a": 1, "b": 2.5}}'
OSLO = ("get_weather", {"city": "Oslo"})
SUM = ("add", {"a": 1, "b": 2.5})

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one-3.0-marker", f"<|tool_call|>[{WEATHER}]", "", [OSLO]),
    Case("one-3.1-marker", f"<tool_call>[{WEATHER}]", "", [OSLO]),
    Case("space-after-marker", f"<tool_call> \n[{WEATHER}]", "", [OSLO]),
    Case("parallel", f"<|tool_call|>[{WEATHER}, {ADD}]", "", [OSLO, SUM]),
    Case("text-before", f"Let me check.<tool_call>[{WEATHER}]", "Let me check.", [OSLO]),
    Case("text-after", f"<tool_call>[{WEATHER}] Done.", " Done.", [OSLO]),
    Case("trailing-whitespace-is-markup", f"<tool_call>[{WEATHER}]\n \n", "", [OSLO]),
    Case("two-lists", f"<tool_call>[{WEATHER}]\n<|tool_call|>[{ADD}]", "\n", [OSLO, SUM]),
    Case("bare-list", f"[{WEATHER}, {ADD}]", "", [OSLO, SUM]),
    Case("bare-list-leading-whitespace", f"\n  [{WEATHER}]", "", [OSLO]),
    Case("bare-list-unknown-tool", '[{"name": "launch", "arguments": {}}]',
         '[{"name": "launch", "arguments": {}}]'),
    Case("bare-list-not-at-start", f"Here: [{WEATHER}]", f"Here: [{WEATHER}]"),
    Case("bare-non-call-list", "[1, 2] are numbers", "[1, 2] are numbers"),
    Case("bare-markdown-link", '[see "this](http://x) and more', '[see "this](http://x) and more'),
    Case("empty-list", "<tool_call>[]", "<tool_call>[]"),
    Case("marker-without-list", "<tool_call> is a tag; <|tool_call|>x", "<tool_call> is a tag; <|tool_call|>x"),
    Case("single-object", f"<tool_call>{WEATHER}", "", [OSLO]),
    Case("empty-args", '<tool_call>[{"name": "now", "arguments": {}}]', "", [("now", {})]),
    Case("no-args-key", '<tool_call>[{"name": "now"}]', "", [("now", {})]),
    Case("nested-unicode-escapes",
         '<tool_call>[{"name": "get_weather", "arguments": {"city": "Zürich \\"Nord]\\" 日本 [}", '
         '"extra": {"deep": [1, {"k": null}]}}}]', "",
         [("get_weather", {"city": 'Zürich "Nord]" 日本 [}', "extra": {"deep": [1, {"k": None}]}})]),
    Case("string-arguments", '<tool_call>[{"name": "add", "arguments": "{\\"a\\": 1}"}]', "", [("add", {"a": 1})]),
    # A call streams once `{"name": …, "arguments": {` is read, so it cannot be taken back:
    # arguments that break (or are cut off) are closed where they broke, and the list ends there.
    Case("broken-json-closed-where-it-broke", 'ok <tool_call>[{"name": "add", "arguments": {"a": 1,}}] after',
         "ok  after", [("add", {"a": 1})]),
    Case("unknown-tool-first-is-text", f'x<tool_call>[{{"name": "launch", "arguments": {{}}}}, {WEATHER}]',
         f'x<tool_call>[{{"name": "launch", "arguments": {{}}}}, {WEATHER}]'),
    Case("unknown-tool-after-a-call-is-dropped", f'x<tool_call>[{WEATHER}, {{"name": "launch", "arguments": {{}}}}]',
         "x", [("get_weather", {"city": "Oslo"})]),
    Case("cut-off-mid-call", '<tool_call>[{"name": "now", "argu', '<tool_call>[{"name": "now", "argu'),
    Case("cut-off-after-call", f"<tool_call>[{WEATHER}", "", [("get_weather", {"city": "Oslo"})]),
    Case("partial-marker-text", "a <tool_ but no call, <|tool_ either", "a <tool_ but no call, <|tool_ either"),
    Case("ends-with-partial-marker", "text <|tool_c", "text <|tool_c"),
    Case("nan-is-not-json-stops-the-arguments", '<tool_call>[{"name": "add", "arguments": {"a": NaN}}]', "",
         [("add", {})]),
    Case("long-call", '<tool_call>[{"name": "get_weather", "arguments": {"city": "' + "Oslo " * 2000 + '"}}]',
         "", [("get_weather", {"city": "Oslo " * 2000})]),
    Case("absurdly-deep", "<tool_call>[{" + "[" * 3000 + "]" * 3000 + "}]",
         "<tool_call>[{" + "[" * 3000 + "]" * 3000 + "}]"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_granite(case):
    check_case("granite", case)


def test_max_calls_keeps_the_first():
    parser = tool_parser_class("granite")(TOOLS, max_calls=1)
    events = parser.feed([Text(f"<tool_call>[{WEATHER}, {ADD}]")]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]
    assert events[0].name == "get_weather"


@pytest.mark.parametrize("marker", ["<|tool_call|>", "<tool_call>"])
def test_a_long_call_streams_before_its_end(marker):
    # A long string argument (Granite 3.x's list-of-calls format, from its chat template): the
    # arguments must be out before the list closes, in multi-token deltas; the second call too.
    text = "line of code\n" * 200
    output = marker + '[{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": ' + json.dumps(
        {"city": text}) + "}]"
    streamed = streamed_before("granite", output, '"}}]')
    assert streamed.startswith('{}{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
