import json

import pytest

from rostra.parsing.tools import REGISTRY
from toolparse import Case, check_case, streamed_before

REGISTRY.setdefault("llama3_json", "llama3_json:Llama3JsonToolParser")

WEATHER = '{"name": "get_weather", "parameters": {"city": "Oslo"}}'

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("empty", "", ""),
    Case("whitespace-only", " \n ", " \n "),
    Case("one", WEATHER, "", [("get_weather", {"city": "Oslo"})]),
    Case("arguments-key", '{"name": "add", "arguments": {"a": 1, "b": 2}}', "", [("add", {"a": 1, "b": 2})]),
    Case("string-parameters", '{"name": "add", "parameters": "{\\"a\\": 1}"}', "", [("add", {"a": 1})]),
    Case("extra-keys", '{"type": "function", "name": "now", "parameters": {}}', "", [("now", {})]),
    Case("leading-whitespace-and-tag", '\n <|python_tag|>' + WEATHER + "\n", "", [("get_weather", {"city": "Oslo"})]),
    Case("python-tag-no-space", "<|python_tag|>" + WEATHER, "", [("get_weather", {"city": "Oslo"})]),
    Case("parallel", '{"name": "get_weather", "parameters": {"city": "Oslo", "days": 2}}; '
         '{"name": "add", "parameters": {"a": 1, "b": 2.5}};\n{"name": "now", "parameters": {}}', "",
         [("get_weather", {"city": "Oslo", "days": 2}), ("add", {"a": 1, "b": 2.5}), ("now", {})]),
    Case("parallel-newline", '{"name": "now", "parameters": {}}\n{"name": "now", "parameters": {}}', "",
         [("now", {}), ("now", {})]),
    Case("trailing-semicolon", '{"name": "now", "parameters": {}};', "", [("now", {})]),
    Case("text-before-python-tag", "Let me check. <|python_tag|>" + WEATHER, "Let me check. ",
         [("get_weather", {"city": "Oslo"})]),
    Case("text-after", WEATHER + "\n\nI asked for the weather.", "\n\nI asked for the weather.",
         [("get_weather", {"city": "Oslo"})]),
    Case("json-in-prose-is-text", "Use " + WEATHER + " to call it.", "Use " + WEATHER + " to call it."),
    Case("empty-args", '{"name": "now", "parameters": {}}', "", [("now", {})]),
    Case("no-parameters-key", '{"name": "now"}', "", [("now", {})]),
    Case("nested-unicode-escapes", '{"name": "get_weather", "parameters": {"city": "Zürich \\"Nord\\" 日本 {not; a} \\\\", '
         '"extra": {"deep": [1, {"k": null}], "s": "}]"}}}', "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 {not; a} \\', "extra": {"deep": [1, {"k": None}], "s": "}]"}})]),
    Case("json-answer-is-text", '{"answer": 42, "ok": true}', '{"answer": 42, "ok": true}'),
    Case("json-answer-then-more", '{"answer": 42}\n' + WEATHER, '{"answer": 42}\n' + WEATHER),
    # A call streams once `{"name": "TOOL", "parameters": {` is read, so it cannot be taken back:
    # arguments that break (or are cut off) are closed where they broke.
    Case("broken-json-closed-where-it-broke", '{"name": "add", "parameters": {"a": 1,}} after', " after",
         [("add", {"a": 1})]),
    Case("balanced-not-json", "{not json} x", "{not json} x"),
    Case("unknown-tool", '{"name": "launch", "parameters": {}}', '{"name": "launch", "parameters": {}}'),
    Case("second-call-unknown", WEATHER + '; {"name": "launch", "parameters": {}} end',
         '; {"name": "launch", "parameters": {}} end', [("get_weather", {"city": "Oslo"})]),
    Case("cut-off", '{"name": "get_weather", "parameters": {"city": "Os', "", [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-head-is-text", '{"name": "get_weather", "param', '{"name": "get_weather", "param'),
    # The long-string shape of a file write (Llama 3.1's JSON tool-calling prompt format, model card).
    Case("long-string", '<|python_tag|>{"name": "get_weather", "parameters": ' + json.dumps({"city": "x = 1\n" * 300})
         + "}", "", [("get_weather", {"city": "x = 1\n" * 300})]),
    Case("cut-off-second", WEATHER + '; {"name": "now", "param', '; {"name": "now", "param',
         [("get_weather", {"city": "Oslo"})]),
    Case("tag-then-prose", "<|python_tag|>brave_search.call(query=\"x\")", "<|python_tag|>brave_search.call(query=\"x\")"),
    Case("partial-tag-then-text", "<|python no tag", "<|python no tag"),
    Case("ends-with-partial-tag", "Some text <|python_t", "Some text <|python_t"),
    Case("ends-with-tag", "Some text <|python_tag|>", "Some text <|python_tag|>"),
    Case("nested-too-deep", "[" * 3000 + "]" * 3000, "[" * 3000 + "]" * 3000),
    Case("deep-object", '{"a":' * 3000 + "1" + "}" * 3000, '{"a":' * 3000 + "1" + "}" * 3000),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_llama3_json(case):
    check_case("llama3_json", case)


def test_a_long_call_streams_before_its_end():
    # A coding agent writing a file: the arguments must be out before the call's object closes.
    text = "line of code\n" * 200
    output = '<|python_tag|>{"name": "get_weather", "parameters": ' + json.dumps({"city": text}) + "}"
    streamed = streamed_before("llama3_json", output, '"}}')
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
