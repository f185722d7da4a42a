"""Layered parsing (the default): the format's parser, then the lenient recognisers.

The recorded cases in data/qwen25_coder.jsonl are what Qwen2.5-Coder-0.5B-Instruct really wrote
for 96 BFCL cases (see each line's "source"): its chat template asks for <tool_call> tags (so hermes
is detected), and it answers with a fenced ```json block instead, now and then a bare JSON object,
prose, a call to a tool the request does not have, or JSON with `//` comments or arithmetic
(`3 * 10**8`), which is not JSON. Each line's "calls" is what it wrote as a call to a tool of the
request: the whole output (fence aside) one JSON object naming an offered tool.
"""

import json
from pathlib import Path

import pytest

from rostra.parsing.events import Text, ToolCallArgs, ToolCallStart
from rostra.parsing.tools import layered_tool_parser, tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.emitter import CallEmitter
from toolparse import Case, check_case, run_parser

RECORDED = [json.loads(line) for line in (Path(__file__).parent / "data" / "qwen25_coder.jsonl").open()]
FENCE_CALL = ('```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Oslo"\n  }\n}\n```')


@pytest.mark.parametrize("sample", RECORDED, ids=lambda s: s["id"])
def test_recorded_qwen25_coder_outputs(sample):
    tools = [ToolSpec(name, {"type": "object"}) for name in sample["tools"]]
    if sample["calls"]:
        case = Case(sample["id"], sample["output"], "", [tuple(call) for call in sample["calls"]])
    else:  # prose, not JSON, or a call to a tool the request does not have: that stays text
        case = Case(sample["id"], sample["output"], sample["output"])
    check_case("hermes", case, tools, rounds=30, layered=True)
    # Without the lenient layers the call is lost in the content (the behaviour of issue 13).
    assert run_parser("hermes", [sample["output"]], tools).calls == []


CASES = [
    Case("fenced", "Sure.\n" + FENCE_CALL + "\nDone.", "Sure.\n\nDone.", [("get_weather", {"city": "Oslo"})]),
    Case("bare-object-parameters", 'I will call it: {"name": "add", "parameters": {"a": 1, "b": 2}}',
         "I will call it: ", [("add", {"a": 1, "b": 2})]),
    Case("list-in-text", 'Calls: [{"name": "now", "arguments": {}}, {"name": "add", "arguments": {"a": 1}}] ok',
         "Calls:  ok", [("now", {}), ("add", {"a": 1})]),
    Case("tool-call-missing-end-before-next", '<tool_call>{"name": "now", "arguments": {}}\n'
         '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>', "", [("now", {}), ("add", {"a": 1})]),
    Case("tool-call-missing-end-then-text", '<tool_call>{"name": "now", "arguments": {}}\nThat is all.',
         "That is all.", [("now", {})]),
    Case("tool-call-with-fence", '<tool_call>\n```json\n{"name": "add", "arguments": {"a": 2}}\n```\n</tool_call>',
         "", [("add", {"a": 2})]),
    Case("bare-function", "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n"
         "</parameter>\n</function>", "", [("get_weather", {"city": "Oslo", "days": 3})]),
    Case("tool-call-with-function", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n"
         "</tool_call>", "", [("add", {"a": 1})]),
    Case("unknown-tool-stays-text", '```json\n{"name": "launch", "arguments": {}}\n```',
         '```json\n{"name": "launch", "arguments": {}}\n```'),
    Case("plain-json-stays-text", 'The answer is {"city": "Oslo"}.', 'The answer is {"city": "Oslo"}.'),
    Case("python-fence-stays-text", '```python\nget_weather(city="Oslo")\n```', '```python\nget_weather(city="Oslo")\n```'),
    Case("hermes-still-first", 'x<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>y', "xy",
         [("add", {"a": 1})]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_layered_over_hermes(case):
    check_case("hermes", case, layered=True)


@pytest.mark.parametrize("primary", ["mistral", "llama3_json", "pythonic", "qwen3_coder", "json"])
def test_fenced_calls_are_found_after_any_format(primary):
    check_case(primary, Case("fenced-" + primary, "Sure.\n" + FENCE_CALL, "Sure.\n", [("get_weather", {"city": "Oslo"})]),
               layered=True)


@pytest.mark.parametrize("body", ['{"name": "get_weather", "arguments": {"city": "Oslo"}}',
                                  '\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n'])
def test_a_tagged_call_under_the_default_json_parser_leaves_no_tags(body):
    """A template that teaches no format gets `json`; a model that writes hermes tags anyway (SmolLM2 does) must
    not leave `<tool_call></tool_call>` in the content (issue 45: the JSON was read first, the tags left)."""
    check_case("json", Case("tagged", "Let me check.<tool_call>" + body + "</tool_call>", "Let me check.",
                            [("get_weather", {"city": "Oslo"})]), layered=True)


def test_strict_parsing_is_the_format_alone():
    assert run_parser("hermes", [FENCE_CALL]).calls == []
    assert run_parser("hermes", [FENCE_CALL], layered=True).calls == [("get_weather", {"city": "Oslo"})]


def test_hermes_arguments_stream_before_the_call_ends():
    """A long argument (file contents) goes out in many deltas, not as one at the end."""
    from toolparse import TOOLS
    body = "print('hi')\\n" * 40
    output = '<tool_call>{"name": "get_weather", "arguments": {"city": "' + body + '"}}</tool_call>'
    parser = layered_tool_parser(tool_parser_class("hermes"))(TOOLS)
    emitter = CallEmitter(TOOLS)
    events = []
    pieces = [output[i:i + 5] for i in range(0, len(output), 5)]
    for number, piece in enumerate(pieces):
        for event in emitter.feed(parser.feed([Text(piece)])):
            events.append((number, event))
    events += [(len(pieces), e) for e in emitter.feed(parser.finish()) + emitter.finish()]
    start = next(n for n, e in events if isinstance(e, ToolCallStart))
    deltas = [n for n, e in events if isinstance(e, ToolCallArgs)]
    assert start < len(pieces) // 4 and len(deltas) > 50
    assert json.loads("".join(e.text for _, e in events if isinstance(e, ToolCallArgs))) == {
        "city": body.replace("\\n", "\n")}
