"""nemotron_json: <TOOLCALL>[…]</TOOLCALL>. Outputs as Nemotron writes them: the chat templates' own rendering
of past calls (NVIDIA-Nemotron-Nano-v2.jinja: `<TOOLCALL>[{"name": …, "arguments": {…}}, …]</TOOLCALL>`, text
before it after a blank line) and vLLM's tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py (a lone object,
arguments as a JSON string, nested arguments, a malformed block that stays text)."""

import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import tool_parser_class
from toolparse import TOOLS, Case, check_case, streamed_before

WEATHER = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
ADD = '{"name": "add", "arguments": {"a": 1, "b": 2.5}}'
OSLO = ("get_weather", {"city": "Oslo"})
SUM = ("add", {"a": 1, "b": 2.5})


def block(*calls: str) -> str:
    return "<TOOLCALL>[" + ", ".join(calls) + "]</TOOLCALL>"


CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", block(WEATHER), "", [OSLO]),
    Case("parallel", block(WEATHER, ADD), "", [OSLO, SUM]),
    Case("text-before-as-the-template-writes-it", "Let me check that.\n\n" + block(WEATHER), "Let me check that.\n\n",
         [OSLO]),
    Case("text-after", block(WEATHER) + " Done.", " Done.", [OSLO]),
    Case("lone-object", f"<TOOLCALL>{WEATHER}</TOOLCALL>", "", [OSLO]),
    Case("string-arguments", '<TOOLCALL>[{"name": "add", "arguments": "{\\"a\\": 1}"}]</TOOLCALL>', "",
         [("add", {"a": 1})]),
    Case("nested-unicode", block('{"name": "get_weather", "arguments": {"city": "Zürich \\"Nord\\" 日本 </x>", '
                                 '"extra": {"deep": [1, {"k": null}], "ok": true}}}'), "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 </x>', "extra": {"deep": [1, {"k": None}], "ok": True}})]),
    Case("empty-args", block('{"name": "now", "arguments": {}}'), "", [("now", {})]),
    Case("reasoning-left-in-the-text-without-a-reasoning-parser",
         "<think>\nI need the weather for Oslo.\n</think>\n" + block(WEATHER),
         "<think>\nI need the weather for Oslo.\n</think>\n", [OSLO]),
    Case("cut-off-before-the-end-tag", "<TOOLCALL>[" + WEATHER + "]", "", [OSLO]),
    Case("cut-off-mid-arguments", '<TOOLCALL>[{"name": "add", "arguments": {"a": 1', "", [("add", {"a": 1})]),
    # Malformed: before any call streamed, the block stays text, whole, and the output goes on.
    Case("malformed-stays-text", '<TOOLCALL>[{"name": "broken", "arguments": {}</TOOLCALL> and more',
         '<TOOLCALL>[{"name": "broken", "arguments": {}</TOOLCALL> and more'),
    Case("unknown-tool-stays-text", 'x<TOOLCALL>[{"name": "launch", "arguments": {}}]</TOOLCALL>',
         'x<TOOLCALL>[{"name": "launch", "arguments": {}}]</TOOLCALL>'),
    Case("not-json-stays-text", "<TOOLCALL>get_weather(Oslo)</TOOLCALL>", "<TOOLCALL>get_weather(Oslo)</TOOLCALL>"),
    Case("empty-list-stays-text", "<TOOLCALL>[]</TOOLCALL>", "<TOOLCALL>[]</TOOLCALL>"),
    Case("broken-after-a-call-started-is-closed", block('{"name": "add", "arguments": {"a": 1, "b": tru}}') + "!",
         "!", [("add", {"a": 1})]),
    Case("partial-marker-text", "a <TOOL but no call", "a <TOOL but no call"),
    Case("ends-with-partial-marker", "text <TOOLCA", "text <TOOLCA"),
    Case("long-call", block('{"name": "get_weather", "arguments": {"city": "' + "Oslo " * 2000 + '"}}'), "",
         [("get_weather", {"city": "Oslo " * 2000})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_nemotron(case):
    check_case("nemotron_json", case)
    check_case("nemotron_json", case, layered=True)  # the default: the lenient layers after it


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = tool_parser_class("nemotron_json")(TOOLS, max_calls=1)
    events = parser.feed([Text(block(WEATHER, ADD))]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]


def test_a_long_call_streams_before_its_end():
    text = "line of code\n" * 200
    output = block(json.dumps({"name": "get_weather", "arguments": {"city": text}}))
    streamed = streamed_before("nemotron_json", output, "</TOOLCALL>")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
