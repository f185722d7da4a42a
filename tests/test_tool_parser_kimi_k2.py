import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import REGISTRY, tool_parser_class
from rostra.parsing.tools.kimi_k2 import ARGUMENTS_BEGIN, CALL_BEGIN, CALL_END, SECTION_BEGIN, SECTION_END
from toolparse import TOOLS, Case, check_case, streamed_before

REGISTRY.setdefault("kimi_k2", "kimi_k2:KimiK2ToolParser")


def call(call_id: str, arguments: str, end: str = CALL_END) -> str:
    return f"{CALL_BEGIN}{call_id}{ARGUMENTS_BEGIN}{arguments}{end}"


def section(*calls: str, end: str = SECTION_END) -> str:
    return SECTION_BEGIN + "".join(calls) + end


WEATHER = call("functions.get_weather:0", '{"city": "Oslo"}')
ADD = call("functions.add:1", '{"a": 1, "b": 2.5}')
OSLO = ("get_weather", {"city": "Oslo"})
SUM = ("add", {"a": 1, "b": 2.5})
LAUNCH = call("functions.launch:1", "{}")
CUT = "a" + SECTION_BEGIN + WEATHER + CALL_BEGIN + "functions.add:1" + ARGUMENTS_BEGIN + '{"a": '
NAN = section(call("functions.add:0", '{"a": NaN}'))

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", section(WEATHER), "", [OSLO]),
    Case("parallel", section(WEATHER, ADD), "", [OSLO, SUM]),
    Case("whitespace-between-calls", section("\n" + WEATHER + "\n", ADD + "\n"), "", [OSLO, SUM]),
    Case("text-around", "Let me check. " + section(WEATHER) + " Done.", "Let me check.  Done.", [OSLO]),
    Case("no-section-end", "ok" + section(WEATHER, ADD, end=""), "ok", [OSLO, SUM]),
    Case("no-call-end-complete-json", section(call("functions.now:0", "{}", end=""), end=""), "", [("now", {})]),
    Case("no-functions-prefix", section(call("get_weather:3", '{"city": "Oslo"}')), "", [OSLO]),
    Case("no-index", section(call("functions.get_weather", '{"city": "Oslo"}')), "", [OSLO]),
    Case("empty-args", section(call("functions.now:0", "{}")), "", [("now", {})]),
    Case("nested-unicode-escapes",
         section(call("functions.get_weather:0", '{"city": "Zürich \\"Nord\\" 日本 <|x|>", '
                                                 '"extra": {"deep": [1, {"k": null}]}}')), "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 <|x|>', "extra": {"deep": [1, {"k": None}]}})]),
    # A call streams once its head is read, so it cannot be taken back: arguments that break are
    # closed where they broke, a bad call after it is text (one before any call: the section is text).
    Case("broken-json-closed-where-it-broke", section(call("functions.add:0", '{"a": 1')) + "after", "after",
         [("add", {"a": 1})]),
    Case("array-arguments", section(call("functions.add:0", "[1]")), section(call("functions.add:0", "[1]"))),
    Case("unknown-tool-first-spoils-section", "x" + section(LAUNCH, WEATHER) + "y",
         "x" + section(LAUNCH, WEATHER) + "y"),
    Case("unknown-tool-after-a-call-is-text", "x" + section(WEATHER, LAUNCH) + "y", "x" + LAUNCH + "y", [OSLO]),
    Case("stray-text-first-spoils-section", section("hmm", WEATHER), section("hmm", WEATHER)),
    Case("stray-text-after-a-call-is-text", section(WEATHER, "hmm", ADD), "hmm", [OSLO, SUM]),
    Case("missing-argument-begin", section(f"{CALL_BEGIN}functions.now:0{{}}{CALL_END}"),
         section(f"{CALL_BEGIN}functions.now:0{{}}{CALL_END}")),
    Case("cut-off-mid-call", CUT, "a", [OSLO, ("add", {})]),
    Case("empty-section", section(), section()),
    Case("partial-marker-text", "a <|tool_calls_ but no call", "a <|tool_calls_ but no call"),
    Case("ends-with-partial-marker", "text <|tool_calls_sec", "text <|tool_calls_sec"),
    Case("nan-is-not-json-stops-the-arguments", NAN, "", [("add", {})]),
    Case("two-sections", section(WEATHER) + "\n" + section(ADD), "\n", [OSLO, SUM]),
    Case("long-call", section(call("functions.get_weather:0", '{"city": "' + "Oslo " * 2000 + '"}')), "",
         [("get_weather", {"city": "Oslo " * 2000})]),
    Case("absurdly-deep", section(call("functions.add:0", "[" * 3000 + "]" * 3000)),
         section(call("functions.add:0", "[" * 3000 + "]" * 3000))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kimi_k2(case):
    check_case("kimi_k2", case)


def test_max_calls_keeps_the_first():
    parser = tool_parser_class("kimi_k2")(TOOLS, max_calls=1)
    events = parser.feed([Text(section(WEATHER, ADD))]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]
    assert events[0].name == "get_weather"


def test_a_long_call_streams_before_its_end():
    # A coding agent writing a file: the arguments must be out before the call ends.
    text = "line of code\n" * 200
    output = section(call("functions.get_weather:0", json.dumps({"city": text})))
    streamed = streamed_before("kimi_k2", output, CALL_END)
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
