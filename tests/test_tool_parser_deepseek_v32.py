"""deepseek_v32: DSML blocks. Outputs as DeepSeek-V3.2.jinja writes past calls back (one block, each invoke and
parameter on its own line, `string="true"` for strings, JSON otherwise) and as vLLM's
tests/tool_parsers/test_deepseekv32_tool_parser.py has them (no parameters, text before the block, several
invokes, typed values, object and array values)."""

import json

import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import tool_parser_class
from rostra.parsing.tools.deepseek_v32 import CALLS_BEGIN, CALLS_END, DSML, rewrite
from toolparse import TOOLS, Case, ToolSpec, check_case, streamed_before

UPDATE = ToolSpec("update", {"type": "object", "properties": {"tags": {"type": "array"}, "meta": {"type": "object"},
                                                              "note": {"type": "string"}}})


def param(key: str, value: str, string: bool = True) -> str:
    return f'<{DSML}parameter name="{key}" string="{"true" if string else "false"}">{value}</{DSML}parameter>'


def invoke(name: str, *params: str) -> str:
    return f'<{DSML}invoke name="{name}">\n' + "\n".join(params) + f"\n</{DSML}invoke>"


def block(*invokes: str) -> str:
    return CALLS_BEGIN + "\n" + "\n".join(invokes) + "\n" + CALLS_END


WEATHER = invoke("get_weather", param("city", "Oslo"), param("days", "3", string=False))
OSLO = ("get_weather", {"city": "Oslo", "days": 3})

CASES = [
    Case("none", "just some text", "just some text"),
    Case("one", block(WEATHER), "", [OSLO]),
    Case("no-parameters", block(f'<{DSML}invoke name="now">\n</{DSML}invoke>'), "", [("now", {})]),
    Case("text-before-as-the-template-writes-it", "Sure, let me check!\n\n" + block(WEATHER), "Sure, let me check!\n\n",
         [OSLO]),
    Case("several-invokes", block(WEATHER, invoke("add", param("a", "1", False), param("b", "2.5", False))), "",
         [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("string-kept-raw-with-quotes-newlines-unicode",
         block(invoke("get_weather", param("city", 'Zürich "Nord"\n日本 <b> 🎉'))), "",
         [("get_weather", {"city": 'Zürich "Nord"\n日本 <b> 🎉'})]),
    Case("object-and-array-values", block(invoke("update", param("tags", '["a", "b"]', False),
                                                 param("meta", '{"k": {"deep": [1, null]}}', False),
                                                 param("note", "[not json, a string]"))), "",
         [("update", {"tags": ["a", "b"], "meta": {"k": {"deep": [1, None]}}, "note": "[not json, a string]"})]),
    Case("typed-by-the-schema-even-with-string-true", block(invoke("get_weather", param("days", "4"))), "",
         [("get_weather", {"days": 4})]),
    Case("cut-off-before-the-block-end", CALLS_BEGIN + "\n" + WEATHER, "", [OSLO]),
    Case("unknown-tool-stays-text", "x" + block(invoke("launch")), "x" + block(invoke("launch"))),
    Case("malformed-stays-text", block("get_weather(city=Oslo)"), block("get_weather(city=Oslo)")),
    Case("partial-marker-text", f"a <{DSML}func but no call", f"a <{DSML}func but no call"),
    Case("long-call", block(invoke("get_weather", param("city", "Oslo " * 2000))), "",
         [("get_weather", {"city": "Oslo " * 2000})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_deepseek_v32(case):
    tools = [*TOOLS, UPDATE]
    check_case("deepseek_v32", case, tools)
    check_case("deepseek_v32", case, tools, layered=True)


def test_tags_are_rewritten_and_other_text_kept():
    assert rewrite(param("city", "a > b")) == "<parameter=city>a > b</parameter>"
    assert rewrite(f'<{DSML}invoke name="x">') == "<function=x>"


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = tool_parser_class("deepseek_v32")(TOOLS, max_calls=1)
    events = parser.feed([Text(block(WEATHER, invoke("now")))]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events if type(e).__name__ != "ToolCallArgs"] == [
        ("ToolCallStart", 0), ("ToolCallEnd", 0)]


def test_a_long_call_streams_before_its_end():
    text = "line of code\n" * 200
    output = block(invoke("get_weather", param("city", text)))
    streamed = streamed_before("deepseek_v32", output, f"</{DSML}invoke>")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
