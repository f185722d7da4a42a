"""seed_oss: Seed-OSS's <seed:tool_call><function=…><parameter=…>…</parameter></function></seed:tool_call>.

Outputs in the shape of the chat template's own rendering (tests/data/templates/ByteDance-Seed-OSS.jinja: no
newline around a value, `</function>` then `</seed:tool_call>`) and of vLLM's seed_oss parser tests (thinking
before the call, a value that spans lines, several calls)."""

import json

import pytest

from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

TYPED = ToolSpec("search", {"type": "object", "properties": {
    "query": {"type": "string"}, "filters": {"type": "object"}, "tags": {"type": "array"}}})


def call(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in params)
    return f"<seed:tool_call>\n<function={name}>\n{body}</function>\n</seed:tool_call>"


OSLO = ("get_weather", {"city": "Oslo", "days": 3})
WEATHER = call("get_weather", ("city", "Oslo"), ("days", "3"))

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", WEATHER, "", [OSLO]),
    Case("text-around", "Let me check.\n" + WEATHER + "\nDone.", "Let me check.\n\nDone.", [OSLO]),
    Case("parallel", WEATHER + call("add", ("a", "1"), ("b", "2.5")), "", [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("two-functions-one-block", "<seed:tool_call>\n<function=now>\n</function>\n<function=add>\n<parameter=a>1"
         "</parameter>\n</function>\n</seed:tool_call>", "", [("now", {}), ("add", {"a": 1})]),
    # The template's own example: a value that spans lines.
    Case("multiline-value", call("get_weather", ("city", "This is the value\nthat can span\nmultiple lines")), "",
         [("get_weather", {"city": "This is the value\nthat can span\nmultiple lines"})]),
    Case("unicode-nested", call("get_weather", ("city", "Zürich 日本 🎉"), ("extra", '{"deep": [1, {"k": null}]}')), "",
         [("get_weather", {"city": "Zürich 日本 🎉", "extra": {"deep": [1, {"k": None}]}})]),
    # The template writes a non-string value with Jinja's `string` filter: True, not true.
    Case("python-spelled-boolean", call("get_weather", ("city", "Oslo"), ("days", "3"), ("flag", "True")), "",
         [("get_weather", {"city": "Oslo", "days": 3, "flag": "True"})]),
    # ... and an object or a list in Python's spelling ({'k': None}), read back for a parameter typed so.
    Case("python-spelled-object", call("search", ("filters", "{'lang': 'no', 'n': [1, 2], 'on': True, 'x': None}"),
                                       ("tags", "['a', 'b']"), ("query", "{'stays': 'a string'}")), "",
         [("search", {"filters": {"lang": "no", "n": [1, 2], "on": True, "x": None}, "tags": ["a", "b"],
                      "query": "{'stays': 'a string'}"})]),
    Case("reasoning-left-to-the-reasoning-parser", "<seed:think>Oslo.</seed:think>" + WEATHER,
         "<seed:think>Oslo.</seed:think>", [OSLO]),
    Case("qwen3-block-is-not-seed", "<tool_call>\n<function=now>\n</function>\n</tool_call>",
         "<tool_call>\n<function=now>\n</function>\n</tool_call>"),
    Case("unknown-tool-stays-text", "x" + call("launch", ("t", "moon")), "x" + call("launch", ("t", "moon"))),
    Case("garbage-ends-the-call", "<seed:tool_call>\n<function=add>\n<parameter=a>1</parameter>\noops\n</function>\n"
         "</seed:tool_call>after", "after", [("add", {"a": 1})]),
    Case("cut-off-mid-value", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Os", "",
         [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-name", "<seed:tool_call>\n<function=no", "<seed:tool_call>\n<function=no"),
    Case("partial-marker-text", "a <seed:tool_ but no call", "a <seed:tool_ but no call"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_seed_oss(case):
    check_case("seed_oss", case, tools=[*TOOLS, TYPED])


def test_a_long_string_value_streams_before_its_end():
    text = "line of code\n" * 200
    output = call("get_weather", ("city", text), ("days", "2"))
    streamed = streamed_before("seed_oss", output, "</parameter>\n<parameter=days>")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
