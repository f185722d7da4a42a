"""phi4_mini_json: `functools[…]`. Outputs as vLLM's tests/tool_parsers/test_phi4mini_tool_parser.py has Phi-4-mini
write them (one call, several on their own lines, all JSON value types, escapes and emoji, text around the list,
the malformed ones), and as vLLM's examples/tool_chat_template_phi4_mini.jinja teaches: no closing marker."""

import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import tool_parser_class
from toolparse import TOOLS, Case, ToolSpec, check_case, streamed_before

WEATHER = '{"name": "get_weather", "arguments": {"city": "Tokyo"}}'
ADD = '{"name": "add", "arguments": {"a": 1, "b": 2.5}}'
TOKYO = ("get_weather", {"city": "Tokyo"})
SUM = ("add", {"a": 1, "b": 2.5})
ANY = ToolSpec("test_function", {"type": "object"})

CASES = [
    Case("none", "This is a regular response without any tool calls.",
         "This is a regular response without any tool calls."),
    Case("one", f"functools[{WEATHER}]", "", [TOKYO]),
    Case("parallel-on-lines", f"functools[\n  {WEATHER},\n  {ADD}\n]", "", [TOKYO, SUM]),
    Case("text-around", f"Let me check the weather for you.\nfunctools[{WEATHER}]\nWould you like to know more?",
         "Let me check the weather for you.\n\nWould you like to know more?", [TOKYO]),
    Case("empty-args", 'functools[{"name": "now", "arguments": {}}]', "", [("now", {})]),
    Case("data-types", 'functools[{\n  "name": "test_function",\n  "arguments": {\n    "string_field": "hello",\n'
         '    "int_field": 42,\n    "float_field": 3.14,\n    "bool_field": true,\n    "null_field": null,\n'
         '    "array_field": ["a", "b", "c"],\n    "object_field": {"nested": "value"},\n    "empty_array": [],\n'
         '    "empty_object": {}\n  }\n}]', "",
         [("test_function", {"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True,
                             "null_field": None, "array_field": ["a", "b", "c"],
                             "object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}})]),
    Case("escapes-and-unicode", 'functools[{\n  "name": "test_function",\n  "arguments": {\n'
         '    "quoted": "He said \\"hello\\"",\n    "path": "C:\\\\Users\\\\file.txt",\n'
         '    "newline": "line1\\nline2",\n    "unicode": "emoji: 🎉 日本 ]"\n  }\n}]', "",
         [("test_function", {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt", "newline": "line1\nline2",
                             "unicode": "emoji: 🎉 日本 ]"})]),
    Case("parameters-key", 'functools[{"name": "add", "parameters": {"a": 1}}]', "", [("add", {"a": 1})]),
    Case("string-arguments", 'functools[{"name": "add", "arguments": "{\\"a\\": 1}"}]', "", [("add", {"a": 1})]),
    Case("word-in-prose-is-text", "Python's functools module has lru_cache.", "Python's functools module has lru_cache."),
    # Malformed (vLLM's list): never a call, the text stays, the output goes on.
    Case("empty-list-is-text", "functools[] This is just text", "functools[] This is just text"),
    Case("not-json-is-text", "functools[ This is just text ]", "functools[ This is just text ]"),
    Case("string-not-dict-is-text", 'functools[{"name": "add", "arguments": "not a dict"}]',
         'functools[{"name": "add", "arguments": "not a dict"}]'),
    Case("unknown-tool-is-text", 'functools[{"name": "launch", "arguments": {}}] ok',
         'functools[{"name": "launch", "arguments": {}}] ok'),
    Case("cut-off-mid-arguments-ends-the-call", 'functools[{"name": "add", "arguments": {"a": 1', "", [("add", {"a": 1})]),
    Case("cut-off-before-arguments-is-text", 'functools[{"name": "add", "argu', 'functools[{"name": "add", "argu'),
    Case("ends-with-partial-marker", "see functo", "see functo"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_phi4_mini(case):
    tools = [*TOOLS, ANY]
    check_case("phi4_mini_json", case, tools)
    check_case("phi4_mini_json", case, tools, layered=True)


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = tool_parser_class("phi4_mini_json")(TOOLS, max_calls=1)
    events = parser.feed([Text(f"functools[{WEATHER}, {ADD}]")]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]


def test_a_long_call_streams_before_its_end():
    text = "line of code\n" * 200
    output = "functools[" + json.dumps({"name": "get_weather", "arguments": {"city": text}}) + "]"
    streamed = streamed_before("phi4_mini_json", output, "]")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
