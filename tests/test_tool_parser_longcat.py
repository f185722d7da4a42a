"""longcat: Meituan LongCat's `<longcat_tool_call>` blocks, with hermes's JSON body (LongCat-Flash-Chat; the outputs of
vLLM's tests/tool_parsers/test_longcat_tool_parser.py: one call, parallel calls, every JSON type, empty arguments,
text around, escaped strings, and its malformed inputs) or GLM's key/value body in LongCat's tag names (the later
models, as LongCat API clients receive them: yaicli's tests/test_longcat_provider.py, an agent transcript)."""

import pytest

from rostra.parsing.tools import detect_tool_parser
from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

TEST = ToolSpec("test_function", {"type": "object", "properties": {}})
QUERY = ToolSpec("call_monitor", {"type": "object", "properties": {"query": {"type": "string"},
                                                                    "limit": {"type": "integer"}}})
ALL = [*TOOLS, TEST, QUERY]

TOKYO = '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo"}}</longcat_tool_call>'
TYPES = """<longcat_tool_call>{
  "name": "test_function",
  "arguments": {
    "string_field": "hello",
    "int_field": 42,
    "float_field": 3.14,
    "bool_field": true,
    "null_field": null,
    "array_field": ["a", "b", "c"],
    "object_field": {"nested": "value"},
    "empty_array": [],
    "empty_object": {}
  }
}</longcat_tool_call>"""
ESCAPED = r"""<longcat_tool_call>{
  "name": "test_function",
  "arguments": {
    "quoted": "He said \"hello\"",
    "path": "C:\\Users\\file.txt",
    "newline": "line1\nline2",
    "unicode": "emoji: 🎉"
  }
}</longcat_tool_call>"""
PAIRS = ("<longcat_tool_call>call_monitor\n<longcat_arg_key>query</longcat_arg_key>\n"
         "<longcat_arg_value>SELECT soul FROM agent_soul WHERE agent = 'A';</longcat_arg_value>\n"
         "<longcat_arg_key>limit</longcat_arg_key>\n<longcat_arg_value>5</longcat_arg_value>\n</longcat_tool_call>")

CASES = [
    Case("none", "This is a regular response without any tool calls.",
         "This is a regular response without any tool calls."),
    Case("one", TOKYO, "", [("get_weather", {"city": "Tokyo"})]),
    Case("parallel", TOKYO + '\n<longcat_tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</longcat_tool_call>',
         "\n", [("get_weather", {"city": "Tokyo"}), ("add", {"a": 1, "b": 2})]),
    Case("types", TYPES, "", [("test_function", {
        "string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True, "null_field": None,
        "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}})]),
    Case("empty-arguments", '<longcat_tool_call>{"name": "now", "arguments": {}}</longcat_tool_call>', "",
         [("now", {})]),
    Case("text-around", "Let me check the weather for you.\n" + TOKYO + "\nHere is the result.",
         "Let me check the weather for you.\n\nHere is the result.", [("get_weather", {"city": "Tokyo"})]),
    Case("escaped", ESCAPED, "", [("test_function", {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt",
                                                     "newline": "line1\nline2", "unicode": "emoji: 🎉"})]),
    # vLLM's malformed inputs: a block cut off in its arguments still ends (it had started); the other two stay text.
    Case("cut-off-arguments", '<longcat_tool_call>{"name": "now", "arguments": {', "", [("now", {})]),
    Case("arguments-not-an-object",
         '<longcat_tool_call>{"name": "now", "arguments": "not a dict"}</longcat_tool_call>',
         '<longcat_tool_call>{"name": "now", "arguments": "not a dict"}</longcat_tool_call>'),
    Case("invalid-json", "Some text with <longcat_tool_call>invalid json", "Some text with <longcat_tool_call>invalid json"),
    Case("unknown-tool-stays-text", '<longcat_tool_call>{"name": "launch", "arguments": {}}</longcat_tool_call>',
         '<longcat_tool_call>{"name": "launch", "arguments": {}}</longcat_tool_call>'),
    # The key/value body.
    Case("pairs", "Let me check the state." + PAIRS, "Let me check the state.",
         [("call_monitor", {"query": "SELECT soul FROM agent_soul WHERE agent = 'A';", "limit": 5})]),
    Case("pairs-no-newlines", "<longcat_tool_call>get_weather<longcat_arg_key>city</longcat_arg_key><longcat_arg_value>"
         "Zürich \"Nord\" 🎉</longcat_arg_value></longcat_tool_call>", "",
         [("get_weather", {"city": 'Zürich "Nord" 🎉'})]),
    Case("pairs-unknown-tool-stays-text", "<longcat_tool_call>Bash\n<longcat_arg_key>command</longcat_arg_key>\n"
         "<longcat_arg_value>ls</longcat_arg_value>\n</longcat_tool_call>",
         "<longcat_tool_call>Bash\n<longcat_arg_key>command</longcat_arg_key>\n<longcat_arg_value>ls"
         "</longcat_arg_value>\n</longcat_tool_call>"),
    Case("pairs-cut-off-mid-value", "<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n"
         "<longcat_arg_value>Os", "", [("get_weather", {"city": "Os"})]),
    Case("partial-marker-text", "a <longcat_ but no call", "a <longcat_ but no call"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_longcat(case):
    check_case("longcat", case, tools=ALL)


@pytest.mark.parametrize("case", CASES[:7], ids=lambda c: c.id)
def test_longcat_layered_reads_the_same(case):
    check_case("longcat", case, tools=ALL, rounds=20, layered=True)


def test_a_long_value_streams_before_its_end():
    text = "line of code\n" * 200
    pairs = (f"<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n<longcat_arg_value>{text}"
             "</longcat_arg_value>\n</longcat_tool_call>")
    assert len(streamed_before("longcat", pairs, "</longcat_arg_value>")) > 2000
    json_body = '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "' + "x" * 3000 + '"}}</longcat_tool_call>'
    assert len(streamed_before("longcat", json_body, "</longcat_tool_call>")) > 2500


def test_the_marker_selects_it():
    assert detect_tool_parser("... <longcat_tool_call>\n{\"name\": ...}\n</longcat_tool_call> ...") == "longcat"
