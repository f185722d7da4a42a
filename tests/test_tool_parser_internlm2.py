"""internlm2: <|action_start|><|plugin|>{…}<|action_end|>. Outputs as InternLM2 / 2.5 write them: vLLM's
tests/tool_parsers/test_internlm2_tool_parser.py ("parameters", with and without the newline after <|plugin|>,
pretty-printed objects with every JSON type, escaped strings, text before the action, malformed actions) and the tool
template vLLM ships for it, which writes past calls back with "arguments" (vllm-tool_chat_template_internlm2_tool.jinja)."""

import json

import pytest

from toolparse import TOOLS, Case, check_case, streamed_before

OSLO = ("get_weather", {"city": "Tokyo"})
PRETTY = """<|action_start|><|plugin|>{
  "name": "get_weather",
  "parameters": {
    "city": "He said \\"hello\\" 🎉",
    "days": 42,
    "extra": {"float": 3.14, "bool": true, "null": null, "array": ["a", "b"], "object": {"nested": "value"}}
  }
}<|action_end|>"""

CASES = [
    Case("none", "This is a regular response without any tool calls.",
         "This is a regular response without any tool calls."),
    Case("one", '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|action_end|>', "",
         [OSLO]),
    Case("newline-and-arguments-as-the-template-writes",
         '<|action_start|><|plugin|>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}<|action_end|>', "", [OSLO]),
    Case("pretty-printed-every-type", PRETTY, "", [("get_weather", {
        "city": 'He said "hello" 🎉', "days": 42,
        "extra": {"float": 3.14, "bool": True, "null": None, "array": ["a", "b"], "object": {"nested": "value"}}})]),
    Case("text-before", 'Let me check the weather for you. <|action_start|><|plugin|>{"name": "get_weather", '
         '"parameters": {"city": "Tokyo"}}<|action_end|>', "Let me check the weather for you. ", [OSLO]),
    Case("empty-arguments", '<|action_start|><|plugin|>{"name": "now", "parameters": {}}<|action_end|>', "",
         [("now", {})]),
    Case("two-actions", '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}'
         '<|action_end|><|action_start|><|plugin|>{"name": "add", "parameters": {"a": 1}}<|action_end|>', "",
         [OSLO, ("add", {"a": 1})]),
    Case("unknown-tool-stays-text", '<|action_start|><|plugin|>{"name": "delete_everything", "parameters": {}}'
         "<|action_end|>", '<|action_start|><|plugin|>{"name": "delete_everything", "parameters": {}}<|action_end|>'),
    Case("arguments-not-an-object-stay-text", '<|action_start|><|plugin|>{"name": "get_weather", "parameters": '
         '"not a dict"}<|action_end|>', '<|action_start|><|plugin|>{"name": "get_weather", "parameters": "not a dict"}'
         "<|action_end|>"),
    Case("not-json-stays-text", "<|action_start|><|plugin|>not json<|action_end|>",
         "<|action_start|><|plugin|>not json<|action_end|>"),
    Case("interpreter-is-not-a-call", "<|action_start|><|interpreter|>print(1)<|action_end|>",
         "<|action_start|><|interpreter|>print(1)<|action_end|>"),
    Case("cut-off-mid-arguments", '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "To', "",
         [("get_weather", {"city": "To"})]),
    Case("cut-off-in-the-head", '<|action_start|><|plugin|>{"name": "func", "parameters": {',
         '<|action_start|><|plugin|>{"name": "func", "parameters": {'),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_internlm2(case):
    check_case("internlm2", case)


def test_a_long_string_argument_streams_before_its_end():
    text = "line of code\n" * 200
    output = ('<|action_start|><|plugin|>{"name": "get_weather", "parameters": '
              + json.dumps({"city": text, "days": 2}) + "}<|action_end|>")
    streamed = streamed_before("internlm2", output, ', "days"')
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
