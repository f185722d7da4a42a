"""functiongemma, gemma4, jamba and ernie45 (issue 43, third round): each case whole, one character at a time and under
random splits, streamed = whole.

FunctionGemma: the outputs of vLLM's tests/tool_parsers/test_functiongemma_tool_parser.py (one call, several
arguments, text before the call, two calls one after the other, every value between <escape> tokens as vLLM's
example template writes them, `count:<escape>42<escape>` read as a number) and Google's FunctionGemma guide
(strings between <escape>, numbers bare, nested objects and lists). Gemma 4: its template's own rendering of calls
(llama.cpp models/templates/gemma4.jinja: `<|"|>` for `<escape>`, keys sorted) and thinking channel. Jamba: vLLM's test_jamba_tool_parser.py
(a space before the block, text before it, two calls in the list, the list on its own lines). ERNIE 4.5:
vLLM's test_ernie45_moe_tool_parser.py and tests/reasoning/test_ernie45_reasoning_parser.py."""

import random

import pytest

from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, run_reasoning_parser, splits, streamed_before

OSLO = ("get_weather", {"city": "Oslo", "days": 3})
SEARCH = ToolSpec("search", {"type": "object", "properties": {
    "query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"},
    "filters": {"type": "object"}, "tags": {"type": "array"}, "zip": {"type": "string"}}})
TOOLS_FG = [*TOOLS, SEARCH]


def fg(body: str) -> str:
    return f"<start_function_call>call:{body}<end_function_call>"


FUNCTIONGEMMA = [
    Case("no-call", "Hello, how can I help you today?", "Hello, how can I help you today?"),
    Case("one", fg("get_weather{city:<escape>Oslo<escape>,days:3}"), "", [OSLO]),
    # vLLM's example template writes every value between escapes: the schema types them back.
    Case("every-value-escaped", fg("get_weather{city:<escape>Oslo<escape>,days:<escape>3<escape>}"), "", [OSLO]),
    Case("text-before", "Let me check the weather for you. " + fg("get_weather{city:<escape>Oslo<escape>,days:3}"),
         "Let me check the weather for you. ", [OSLO]),
    Case("two-calls", fg("get_weather{city:<escape>Oslo<escape>,days:3}") + fg("add{a:1,b:2.5}"), "",
         [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("empty-arguments", fg("now{}"), "", [("now", {})]),
    # A string holds what would be syntax outside it: commas, braces, quotes, a colon, non-ASCII.
    Case("strings-hold-syntax", fg('search{query:<escape>a, b} "c": 北京 ☀<escape>,limit:<escape>10<escape>,'
                                   "exact:true,zip:01234}"), "",
         [("search", {"query": 'a, b} "c": 北京 ☀', "limit": 10, "exact": True, "zip": "01234"})]),
    Case("nested", fg("search{query:<escape>x<escape>,filters:{units:[<escape>°C<escape>,null],level:{n:1}},"
                      "tags:[<escape>a<escape>,<escape>b<escape>]}"), "",
         [("search", {"query": "x", "filters": {"units": ["°C", None], "level": {"n": 1}}, "tags": ["a", "b"]})]),
    Case("text-after", fg("get_weather{city:<escape>Oslo<escape>,days:3}") + " Done.", " Done.", [OSLO]),
    Case("unknown-tool-stays-text", fg("launch{target:<escape>moon<escape>}"),
         fg("launch{target:<escape>moon<escape>}")),
    Case("not-this-syntax-stays-text", fg('get_weather({"city": "Oslo"})'), fg('get_weather({"city": "Oslo"})')),
    # Started, then unreadable: the call ends with the pairs read so far; the rest of its block is dropped.
    Case("broken-after-start", fg("get_weather{city:<escape>Oslo<escape> days=3}"), "",
         [("get_weather", {"city": "Oslo"})]),
    Case("cut-off-after-a-pair", "<start_function_call>call:get_weather{city:<escape>Oslo<escape>,days:", "",
         [("get_weather", {"city": "Oslo"})]),
    Case("cut-off-in-the-head", "<start_function_call>call:get_wea", "<start_function_call>call:get_wea"),
]


@pytest.mark.parametrize("case", FUNCTIONGEMMA, ids=lambda c: c.id)
def test_functiongemma_tool_calls(case):
    check_case("functiongemma", case, tools=TOOLS_FG)


def test_functiongemma_arguments_stream_pair_by_pair():
    output = fg("search{limit:5,query:<escape>" + "long query " * 20 + "<escape>,exact:false}")
    early = streamed_before("functiongemma", output, "<end_function_call>", tools=TOOLS_FG)
    assert early.startswith('{"limit": 5, "query": "long query')


def g4(body: str) -> str:
    return f"<|tool_call>call:{body}<tool_call|>"


GEMMA4 = [
    Case("two-calls", "Checking. " + g4('get_weather{city:<|"|>Oslo ☀ <|"|>,days:3}') + g4("add{a:1,b:2}"),
         "Checking. ", [("get_weather", {"city": "Oslo ☀ ", "days": 3}), ("add", {"a": 1, "b": 2})]),
    Case("nested", g4('search{filters:{units:[<|"|>°C<|"|>]},query:<|"|>a, b}<|"|>}'), "",
         [("search", {"filters": {"units": ["°C"]}, "query": "a, b}"})]),
    # FunctionGemma's <escape> is not Gemma 4's string token: the started call ends with what was read (nothing).
    Case("foreign-escape-ends-the-started-call", g4("get_weather{city:<escape>Oslo<escape>}"), "",
         [("get_weather", {})]),
]


@pytest.mark.parametrize("case", GEMMA4, ids=lambda c: c.id)
def test_gemma4_tool_calls(case):
    check_case("gemma4", case, tools=TOOLS_FG)


@pytest.mark.parametrize("prompt,output,thinking,answer", [
    ("<|turn>model\n", "<|channel>thought\nOslo, then a sum.<channel|>Checking.", "Oslo, then a sum.", "Checking."),
    ("<|turn>model\n<|channel>thought\n<channel|>", "No thinking here.", "", "No thinking here."),  # thinking off
])
def test_gemma4_reasoning(prompt, output, thinking, answer):
    assert run_reasoning_parser(reasoning_parser_class("gemma4")(prompt), list(output))[:2] == (thinking, answer)


def jamba(*calls: str) -> str:
    return "<tool_calls>[\n    " + ",\n    ".join(calls) + "\n]</tool_calls>"


DALLAS = '{"name": "get_weather", "arguments": {"city": "Dallas", "days": 3}}'
JAMBA = [
    Case("one", " " + jamba(DALLAS), " ", [("get_weather", {"city": "Dallas", "days": 3})]),
    Case("text-before", " Sure! let me call the tool for you." + jamba(DALLAS),
         " Sure! let me call the tool for you.", [("get_weather", {"city": "Dallas", "days": 3})]),
    Case("two", " " + jamba(DALLAS, '{"name": "get_weather", "arguments": {"city": "Orlando ☀", "days": 1}}'), " ",
         [("get_weather", {"city": "Dallas", "days": 3}), ("get_weather", {"city": "Orlando ☀", "days": 1})]),
    Case("unknown-tool-stays-text", jamba('{"name": "launch", "arguments": {}}'),
         jamba('{"name": "launch", "arguments": {}}')),
]


@pytest.mark.parametrize("case", JAMBA, ids=lambda c: c.id)
def test_jamba_tool_calls(case):
    check_case("jamba", case)


ERNIE_CALLS = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京", "days": 3}}\n</tool_call>\n'
               '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n')


@pytest.mark.parametrize("output,thinking,answer", [
    ("abc</think>def", "abc", "def"),
    ("abc", "abc", ""),  # without </think>, all is thinking
    ("abc</think>", "abc", ""),
    ("abc\nABC</think>def\nDEF", "abc\nABC", "def\nDEF"),
    ("abc\n</think>\n\n<response>\ndef\n</response>\n", "abc\n", "def"),  # the answer in its <response> tags
    ("I need two tools.\n</think>\n\n" + ERNIE_CALLS, "I need two tools.\n", ERNIE_CALLS),
])
def test_ernie45_reasoning(output, thinking, answer):
    def run(pieces):
        return run_reasoning_parser(reasoning_parser_class("ernie45")("User: hi\nAssistant: "), pieces)[:2]

    assert run([output]) == (thinking, answer)
    rng = random.Random(output)
    for _ in range(50):
        assert run(splits(output, rng)) == (thinking, answer)


def test_ernie45_tool_calls():
    check_case("ernie45", Case("two", ERNIE_CALLS, "\n\n",  # (the newlines after each block)
                               [("get_weather", {"city": "北京", "days": 3}), ("add", {"a": 1, "b": 2})]))
