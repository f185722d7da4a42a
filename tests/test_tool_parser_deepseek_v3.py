import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import REGISTRY, tool_parser_class
from rostra.parsing.tools.arguments import MAX_DEPTH
from rostra.parsing.tools.deepseek_v3 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
from toolparse import TOOLS, Case, check_case, streamed_before

REGISTRY.setdefault("deepseek_v3", "deepseek_v3:DeepSeekV3ToolParser")


def test_markers_are_the_special_tokens():
    assert CALLS_BEGIN == "<｜tool▁calls▁begin｜>" and CALLS_END == "<｜tool▁calls▁end｜>"
    assert CALL_BEGIN == "<｜tool▁call▁begin｜>" and CALL_END == "<｜tool▁call▁end｜>" and SEP == "<｜tool▁sep｜>"


def v3(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}function{SEP}{name}\n```json\n{arguments}\n```{CALL_END}"


def v31(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}{name}{SEP}{arguments}{CALL_END}"


def nested_lists(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def block(*calls: str) -> str:
    return CALLS_BEGIN + "".join(calls) + CALLS_END


WEATHER = v3("get_weather", '{"city": "Oslo"}')
ADD = v3("add", '{"a": 1, "b": 2.5}')

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", block(WEATHER), "", [("get_weather", {"city": "Oslo"})]),
    Case("text-around", "Let me check.\n\n" + block(WEATHER) + "\nDone.", "Let me check.\n\n\nDone.",
         [("get_weather", {"city": "Oslo"})]),
    Case("parallel", block(WEATHER, ADD), "", [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2.5})]),
    Case("parallel-whitespace-between", block(WEATHER, "\n", ADD, "\n"), "",
         [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2.5})]),
    Case("empty-args", block(v3("now", "{}")), "", [("now", {})]),
    Case("nested-unicode-escapes", block(v3("get_weather", '{"city": "Zürich \\"Nord\\" 日本 ```", '
                                              '"extra": {"deep": [1, {"k": null}]}}')), "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 ```', "extra": {"deep": [1, {"k": None}]}})]),
    Case("v3.1", block(v31("get_weather", '{"city": "Oslo"}'), v31("now", "{}")), "",
         [("get_weather", {"city": "Oslo"}), ("now", {})]),
    Case("fence-without-json-tag", block(f"{CALL_BEGIN}function{SEP}now\n```\n{{}}\n```{CALL_END}"), "", [("now", {})]),
    # A call streams once its head is read, so it cannot be taken back: arguments that break are
    # closed where they broke, a bad call after it is text (one before any call: the block is text).
    Case("broken-json-closed-where-it-broke", block(v3("add", '{"a": 1')) + "after", "after", [("add", {"a": 1})]),
    Case("bad-call-after-a-call-is-text", block(WEATHER, v3("add", "[1]")), v3("add", "[1]"),
         [("get_weather", {"city": "Oslo"})]),
    Case("bad-first-call-keeps-block-text", block(v3("add", "[1]"), WEATHER), block(v3("add", "[1]"), WEATHER)),
    Case("broken-no-sep", block(f"{CALL_BEGIN}function get_weather\n{{}}{CALL_END}"),
         block(f"{CALL_BEGIN}function get_weather\n{{}}{CALL_END}")),
    Case("broken-stray-text-in-block", block("I will call: ", WEATHER), block("I will call: ", WEATHER)),
    Case("nan-is-not-json-stops-the-arguments", block(v31("add", '{"a": NaN}')), "", [("add", {})]),
    Case("absurdly-deep-cut-at-max-depth", block(v31("add", '{"a": ' + "[" * 3000 + "]" * 3000 + "}")), "",
         [("add", {"a": nested_lists(MAX_DEPTH - 1)})]),
    Case("unknown-tool", "x" + block(v3("launch", "{}")), "x" + block(v3("launch", "{}"))),
    Case("cut-off-without-calls-end", CALLS_BEGIN + WEATHER, "", [("get_weather", {"city": "Oslo"})]),
    Case("cut-off-after-complete-json", CALLS_BEGIN + WEATHER + CALL_BEGIN + "function" + SEP + 'now\n```json\n{}',
         "", [("get_weather", {"city": "Oslo"}), ("now", {})]),
    Case("cut-off-mid-call", CALLS_BEGIN + WEATHER + CALL_BEGIN + "function" + SEP + 'add\n```json\n{"a": 1',
         "", [("get_weather", {"city": "Oslo"}), ("add", {"a": 1})]),
    Case("cut-off-in-name", CALLS_BEGIN + CALL_BEGIN + "function" + SEP + "no",
         CALLS_BEGIN + CALL_BEGIN + "function" + SEP + "no"),
    Case("empty-block", CALLS_BEGIN + CALLS_END, CALLS_BEGIN + CALLS_END),
    Case("partial-marker-text", "a <｜tool▁ but no call", "a <｜tool▁ but no call"),
    Case("ascii-lookalike-is-text", "<|tool_calls_begin|>x", "<|tool_calls_begin|>x"),
    Case("ends-with-partial-marker", "text <｜tool▁calls", "text <｜tool▁calls"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_deepseek_v3(case):
    check_case("deepseek_v3", case)


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = tool_parser_class("deepseek_v3")(TOOLS, max_calls=1)
    events = parser.feed([Text(block(WEATHER, ADD))]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]


@pytest.mark.parametrize("write", [v3, v31], ids=["v3", "v3.1"])
def test_a_long_call_streams_before_its_end(write):
    # A coding agent writing a file: the arguments must be out before the call ends.
    text = "line of code\n" * 200
    output = block(write("get_weather", json.dumps({"city": text})))
    streamed = streamed_before("deepseek_v3", output, CALL_END)
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
