"""glm45: GLM-4.5 / 4.6 / 4.7's <tool_call>NAME<arg_key>…</arg_key><arg_value>…</arg_value></tool_call>.

Outputs in the shapes of the chat template's own rendering (tests/data/templates/GLM-4.6.jinja: a newline after
the name and after each tag), of vLLM's glm4_moe parser tests (the calls indented, text before and between
calls, Chinese content, a call without arguments, a malformed key) and of GLM-4.7 (vLLM's glm47 tests,
llama.cpp's test-chat.cpp: no newlines at all)."""

import json

import pytest

from rostra.parsing.tools import tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

TYPED = ToolSpec("search", {"type": "object", "properties": {
    "query": {"type": "string"}, "limit": {"type": "integer"}, "filters": {"type": "object"},
    "exact": {"type": "boolean"}, "tags": {"type": "array"}}})


def call(name: str, *pairs: tuple[str, str], newlines: bool = True) -> str:
    """A call as GLM-4.5/4.6's template writes it (newlines) or as GLM-4.7 does (none)."""
    n = "\n" if newlines else ""
    body = "".join(f"<arg_key>{key}</arg_key>{n}<arg_value>{value}</arg_value>{n}" for key, value in pairs)
    return f"<tool_call>{name}{n}{body}</tool_call>"


OSLO = ("get_weather", {"city": "Oslo", "days": 3})
WEATHER = call("get_weather", ("city", "Oslo"), ("days", "3"))
# vLLM's glm4_moe test: the calls indented by its triple-quoted strings.
INDENTED = ("<tool_call>get_weather\n    <arg_key>city</arg_key>\n    <arg_value>Dallas</arg_value>\n"
            "    <arg_key>days</arg_key>\n    <arg_value>2</arg_value>\n    </tool_call>")
MALFORMED_KEY = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Seattle</arg_value>\n"
                 "<arg_key>incomplete_arg\n<arg_value>value</arg_value>\n</tool_call>")

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", WEATHER, "", [OSLO]),
    Case("glm47-no-newlines", call("get_weather", ("city", "Paris"), newlines=False), "",
         [("get_weather", {"city": "Paris"})]),
    Case("indented", INDENTED, "", [("get_weather", {"city": "Dallas", "days": 2})]),
    Case("text-before", "I'll help you check the weather. " + WEATHER, "I'll help you check the weather. ", [OSLO]),
    Case("text-between-and-after", "I will help you get the weather info.\n\n" + WEATHER +
         "\n\nmeanwhile, Bergen.\n\n" + call("get_weather", ("city", "Bergen")) + "\nDone.",
         "I will help you get the weather info.\n\n\n\nmeanwhile, Bergen.\n\n\nDone.",
         [OSLO, ("get_weather", {"city": "Bergen"})]),
    Case("parallel-glm47", call("get_weather", ("city", "NYC"), newlines=False) +
         call("add", ("a", "1"), ("b", "2.5"), newlines=False), "",
         [("get_weather", {"city": "NYC"}), ("add", {"a": 1, "b": 2.5})]),
    Case("no-arguments", "<tool_call>now\n</tool_call>", "", [("now", {})]),
    Case("no-arguments-glm47", "<tool_call>now</tool_call>", "", [("now", {})]),
    Case("chinese-and-unicode", "我来查一下。" + call("get_weather", ("city", "北京 Zürich 🎉 \"quoted\"")), "我来查一下。",
         [("get_weather", {"city": '北京 Zürich 🎉 "quoted"'})]),
    # Values are strings unless the schema says otherwise; a parameter the schema does not know is JSON-decoded
    # where it is JSON (the template wrote it with tojson), as vLLM's glm4_moe parser does.
    Case("typed-and-nested", call("search", ("query", "42"), ("limit", "10"), ("exact", "true"),
                                  ("filters", '{"lang": "no", "deep": [1, {"k": null}]}'), ("tags", '["a", "b"]'),
                                  ("extra", '{"x": [1, 2]}'), ("plain", "not json")), "",
         [("search", {"query": "42", "limit": 10, "exact": True, "filters": {"lang": "no", "deep": [1, {"k": None}]},
                      "tags": ["a", "b"], "extra": {"x": [1, 2]}, "plain": "not json"})]),
    Case("multiline-code-value", call("get_weather", ("city", 'def f(x):\n    return "a\\b" < x\n\n')), "",
         [("get_weather", {"city": 'def f(x):\n    return "a\\b" < x\n\n'})]),
    Case("reasoning-left-to-the-reasoning-parser", "<think>I want the weather.</think>\n\nSure.\n" + WEATHER,
         "<think>I want the weather.</think>\n\nSure.\n", [OSLO]),
    # A call streams from its name on, so a malformed key after it ends the call with what was read: the
    # stream never aborts and the rest of the block is dropped (logged).
    Case("malformed-key-ends-the-call", MALFORMED_KEY + "after", "after", [("get_weather", {"city": "Seattle"})]),
    Case("unknown-tool-stays-text", "x" + call("launch", ("target", "moon")) + "y",
         "x" + call("launch", ("target", "moon")) + "y"),
    Case("json-body-stays-text", '<tool_call>{"name": "now"}</tool_call>', '<tool_call>{"name": "now"}</tool_call>'),
    Case("missing-value-close", "<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>1\n<arg_key>b</arg_key>\n"
         "<arg_value>2</arg_value>\n</tool_call>", "", [("add", {"a": 1, "b": 2})]),
    Case("cut-off-mid-value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Os", "",
         [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-name", "ok <tool_call>get_wea", "ok <tool_call>get_wea"),
    Case("cut-off-after-name-only", "<tool_call>now", "<tool_call>now"),
    Case("partial-marker-text", "a <tool_ but no call", "a <tool_ but no call"),
    Case("long-value", call("get_weather", ("city", "Oslo " * 2000)), "", [("get_weather", {"city": "Oslo " * 2000})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_glm45(case):
    check_case("glm45", case, tools=[*TOOLS, TYPED])


@pytest.mark.parametrize("case", CASES[:8], ids=lambda c: c.id)
def test_glm45_layered_reads_the_same(case):
    # The default server parser: glm45 first, then the lenient recognisers on what it leaves.
    check_case("glm45", case, tools=[*TOOLS, TYPED], rounds=20, layered=True)


def test_parallel_tool_calls_false_keeps_the_first_call():
    from rostra.parsing.events import Text, ToolCallStart

    parser = tool_parser_class("glm45")(TOOLS, max_calls=1)
    events = parser.feed([Text(WEATHER + call("add", ("a", "1")))]) + parser.finish()
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather"]


def test_a_long_string_value_streams_before_its_end():
    text = "line of code\n" * 200
    output = call("get_weather", ("city", text), ("days", "2"))
    streamed = streamed_before("glm45", output, "</arg_value>\n<arg_key>days")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
