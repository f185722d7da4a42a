"""command_r: Command R7B / Command A, <|START_ACTION|>[…]<|END_ACTION|>. Outputs as the model writes them: the chat
template's own rendering of past calls (CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja: a list of
{"tool_call_id", "tool_name", "parameters"} objects, one per line, four spaces in) and llama.cpp's
tests/test-chat.cpp (`<|START_ACTION|>[\\n    {"tool_call_id": "0", "tool_name": "special_function",
"parameters": {"arg1": 1}}\\n]<|END_ACTION|>`); nested and unicode arguments, several calls, text around them, and
malformed blocks that stay text."""

import json

import pytest

from toolparse import TOOLS, Case, check_case, streamed_before


def call(index: int, name: str, parameters: str) -> str:
    return f'    {{"tool_call_id": "{index}", "tool_name": "{name}", "parameters": {parameters}}}'


def action(*calls: str, end: str = "<|END_ACTION|>") -> str:
    return "<|START_ACTION|>[\n" + ",\n".join(calls) + "\n]" + end


OSLO = ("get_weather", {"city": "Oslo", "days": 3})
WEATHER = call(0, "get_weather", '{"city": "Oslo", "days": 3}')
NESTED = {"city": "Zürich 日本 🎉 \"Nord\"", "days": 1, "extra": {"units": ["°C", None], "deep": [{"k": True}]}}

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", action(WEATHER), "", [OSLO]),
    Case("llama-cpp-test", '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "add", "parameters": {"a": 1}}\n'
         "]<|END_ACTION|>", "", [("add", {"a": 1})]),
    Case("parallel", action(WEATHER, call(1, "add", '{"a": 1, "b": 2.5}')), "", [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("nested-and-unicode", action(call(0, "get_weather", json.dumps(NESTED, ensure_ascii=False))), "",
         [("get_weather", NESTED)]),
    Case("text-around", "Let me check. " + action(WEATHER) + " Done.", "Let me check.  Done.", [OSLO]),
    Case("no-arguments", action(call(0, "now", "{}")), "", [("now", {})]),
    Case("numeric-id-and-one-line", '<|START_ACTION|>[{"tool_call_id": 0, "tool_name": "get_weather", '
         '"parameters": {"city": "Oslo", "days": 3}}]<|END_ACTION|>', "", [OSLO]),
    Case("keys-in-another-order", '<|START_ACTION|>[{"tool_name": "add", "parameters": {"a": 1}, "tool_call_id": "0"}]'
         "<|END_ACTION|>", "", [("add", {"a": 1})]),
    Case("no-end-marker", "ok " + action(WEATHER, end=""), "ok ", [OSLO]),
    Case("unknown-tool-stays-text", "x" + action(call(0, "launch", '{"t": 1}')) + "y",
         "x" + action(call(0, "launch", '{"t": 1}')) + "y"),
    Case("not-json-stays-text", "<|START_ACTION|>get_weather(city=Oslo)<|END_ACTION|>",
         "<|START_ACTION|>get_weather(city=Oslo)<|END_ACTION|>"),
    Case("cut-off-mid-arguments", '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
         '"parameters": {"city": "Os', "", [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-the-head", '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_na',
         '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_na'),
    Case("partial-marker-is-text", "a <|START_ACT", "a <|START_ACT"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_command_r(case):
    check_case("command_r", case)


def test_a_long_string_argument_streams_before_its_end():
    text = "line of code\n" * 200
    output = action(call(0, "get_weather", json.dumps({"city": text, "days": 2})))
    streamed = streamed_before("command_r", output, ', "days"')
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
