"""step3: Step-3's steptml invoke/parameter elements inside `<｜tool_calls_begin｜>` … `<｜tool_calls_end｜>`. Outputs as
vLLM's tests/tool_parsers/test_step3_tool_parser.py has them: one call, parallel calls with `<｜tool_sep｜>` between,
every value type, no arguments, text around, escaped strings, whitespace kept in string values, the DeepSeek-style
`function<｜tool_sep｜>NAME` head, and its malformed inputs."""

import pytest

from rostra.parsing.tools import detect_tool_parser
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.step3 import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
from toolparse import TOOLS, Case, check_case, streamed_before

TEST = ToolSpec("test_function", {"type": "object", "properties": {
    "string_field": {"type": "string"}, "int_field": {"type": "integer"}, "float_field": {"type": "number"},
    "bool_field": {"type": "boolean"}, "null_field": {"type": "null"}, "array_field": {"type": "array"},
    "object_field": {"type": "object"}, "quoted": {"type": "string"}, "path": {"type": "string"},
    "newline": {"type": "string"}}})
EDIT = ToolSpec("edit_file", {"type": "object", "properties": {
    "old_string": {"type": "string"}, "indent": {"type": "integer"}, "enabled": {"type": "boolean"}}})
ALL = [*TOOLS, TEST, EDIT]


def invoke(name: str, **params: str) -> str:
    body = "".join(f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items())
    return f'{CALL_BEGIN}<steptml:invoke name="{name}">{body}</steptml:invoke>{CALL_END}'


TOKYO = CALLS_BEGIN + invoke("get_weather", city="Tokyo") + CALLS_END
CASES = [
    Case("none", "This is a regular response without any tool calls.",
         "This is a regular response without any tool calls."),
    Case("one", TOKYO, "", [("get_weather", {"city": "Tokyo"})]),
    Case("parallel", CALLS_BEGIN + invoke("get_weather", city="Tokyo") + SEP + invoke("add", a="1", b="2.5") + CALLS_END,
         "", [("get_weather", {"city": "Tokyo"}), ("add", {"a": 1, "b": 2.5})]),
    Case("types", CALLS_BEGIN + invoke("test_function", string_field="hello", int_field="42", float_field="3.14",
                                       bool_field="true", null_field="null", array_field='["a", "b", "c"]',
                                       object_field='{"nested": "value"}') + CALLS_END, "",
         [("test_function", {"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True,
                             "null_field": None, "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}})]),
    Case("no-arguments", CALLS_BEGIN + invoke("now") + CALLS_END, "", [("now", {})]),
    Case("text-around", "Let me check the weather for you.\n\n" + TOKYO + "\n\nI'll get that information.",
         "Let me check the weather for you.\n\n\n\nI'll get that information.", [("get_weather", {"city": "Tokyo"})]),
    Case("escaped", CALLS_BEGIN + invoke("test_function", quoted='He said "hello"', path="C:\\Users\\file.txt",
                                         newline="line1\nline2") + CALLS_END, "",
         [("test_function", {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt", "newline": "line1\nline2"})]),
    Case("whitespace-is-data", f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}edit_file\n<steptml:invoke name=\"edit_file\">"
         '<steptml:parameter name="old_string">    if x:\n        return 1\n</steptml:parameter>'
         '<steptml:parameter name="indent"> 4 </steptml:parameter><steptml:parameter name="enabled"> true '
         f"</steptml:parameter></steptml:invoke>{CALL_END}{CALLS_END}", "",
         [("edit_file", {"old_string": "    if x:\n        return 1\n", "indent": 4, "enabled": True})]),
    Case("parallel-with-function-heads", f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}now\n<steptml:invoke name=\"now\">"
         f"</steptml:invoke>{CALL_END}{SEP}{CALL_BEGIN}function{SEP}get_weather\n<steptml:invoke name=\"get_weather\">"
         f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke>{CALL_END}{CALLS_END}', "",
         [("now", {}), ("get_weather", {"city": "Oslo"})]),
    Case("unicode", CALLS_BEGIN + invoke("get_weather", city="Zürich ☀ 北京") + CALLS_END, "",
         [("get_weather", {"city": "Zürich ☀ 北京"})]),
    # vLLM's malformed inputs: a call cut off after its head ends (it had started); a call outside a section is text.
    Case("cut-off-after-the-head", CALLS_BEGIN + CALL_BEGIN + '<steptml:invoke name="now">', "", [("now", {})]),
    Case("no-section-stays-text", CALL_BEGIN + '<steptml:invoke name="now"></steptml:invoke>' + CALL_END,
         CALL_BEGIN + '<steptml:invoke name="now"></steptml:invoke>' + CALL_END),
    Case("unknown-tool-stays-text", CALLS_BEGIN + invoke("launch", target="moon") + CALLS_END,
         CALLS_BEGIN + invoke("launch", target="moon") + CALLS_END),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_step3(case):
    check_case("step3", case, tools=ALL)


@pytest.mark.parametrize("case", CASES[:9], ids=lambda c: c.id)
def test_step3_layered_reads_the_same(case):
    check_case("step3", case, tools=ALL, rounds=20, layered=True)


def test_a_long_value_streams_before_its_end():
    output = CALLS_BEGIN + invoke("get_weather", city="line of code\n" * 200) + CALLS_END
    assert len(streamed_before("step3", output, "</steptml:parameter>")) > 2000


def test_the_marker_selects_it():
    assert detect_tool_parser('… <steptml:invoke name="{{ name }}"> …') == "step3"
