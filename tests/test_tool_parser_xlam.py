"""xlam: xLAM-2's JSON list of calls. Outputs as the model writes them: its chat template's own rendering of past
calls (vllm-tool_chat_template_xlam_llama.jinja: the bare list) and vLLM's tests/tool_parsers/test_xlam_tool_parser.py
(parallel calls, the list in a ```json block after text, after [TOOL_CALLS], inside <tool_call>…</tool_call>)."""

import json

import pytest

from toolparse import Case, check_case, streamed_before

DALLAS = ("get_weather", {"city": "Dallas", "days": 3})
ORLANDO = ("get_weather", {"city": "Orlando", "days": 1})
LIST = ('[{"name": "get_weather", "arguments": {"city": "Dallas", "days": 3}}, '
        '{"name": "get_weather", "arguments": {"city": "Orlando", "days": 1}}]')
ONE = '[{"name": "get_weather", "arguments": {"city": "Dallas", "days": 3}}]'
NESTED = {"city": "Zürich 日本 \"Nord\"", "days": 2, "extra": {"units": ["°C", None], "deep": [{"k": True}]}}

CASES = [
    Case("none", "This is a test", "This is a test"),
    Case("parallel-bare-list", LIST, "", [DALLAS, ORLANDO]),
    Case("json-fence-after-text", "I'll help you with that.\n```json\n" + ONE + "\n```", "I'll help you with that.\n",
         [DALLAS]),
    Case("json-fence-alone", "```json\n" + ONE + "\n```", "", [DALLAS]),
    Case("tool-calls-marker", "I'll check the weather for you.[TOOL_CALLS]" + ONE, "I'll check the weather for you.",
         [DALLAS]),
    Case("tool-call-tags", "I'll help you check the weather.<tool_call>" + ONE + "</tool_call>",
         "I'll help you check the weather.", [DALLAS]),
    Case("text-after-the-fence", "```json\n" + ONE + "\n```\nDone.", "\nDone.", [DALLAS]),
    Case("nested-unicode", '[{"name": "get_weather", "arguments": ' + json.dumps(NESTED, ensure_ascii=False) + "}]",
         "", [("get_weather", NESTED)]),
    Case("empty-list-of-nothing-is-text", "[]", "[]"),
    Case("a-list-of-numbers-is-text", "[1, 2, 3] are numbers", "[1, 2, 3] are numbers"),
    Case("unknown-tool-stays-text", '[{"name": "launch", "arguments": {}}]', '[{"name": "launch", "arguments": {}}]'),
    Case("a-fence-of-other-json-stays", "```json\n{\"a\": 1}\n```", "```json\n{\"a\": 1}\n```"),
    Case("cut-off-mid-arguments", '[{"name": "get_weather", "arguments": {"city": "Dal', "",
         [("get_weather", {"city": "Dal"})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_xlam(case):
    check_case("xlam", case)


def test_a_long_string_argument_streams_before_its_end():
    text = "line of code\n" * 200
    output = '[{"name": "get_weather", "arguments": ' + json.dumps({"city": text, "days": 2}) + "}]"
    streamed = streamed_before("xlam", output, ', "days"')
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
