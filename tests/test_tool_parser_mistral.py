import json
import re

import pytest

from rostra.parsing.tools import REGISTRY
from toolparse import Case, check_case, run_parser, streamed_before

REGISTRY.setdefault("mistral", "mistral:MistralToolParser")

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("v3-one", '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]', "",
         [("get_weather", {"city": "Oslo"})]),
    Case("v3-parallel", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}, '
         '{"name": "add", "arguments": {"a": 1, "b": 2.5}}]', "",
         [("get_weather", {"city": "Oslo", "days": 2}), ("add", {"a": 1, "b": 2.5})]),
    Case("v3-object", '[TOOL_CALLS] {"name": "now", "arguments": {}}\n', "", [("now", {})]),
    Case("v11-one", '[TOOL_CALLS]get_weather{"city": "Oslo"}', "", [("get_weather", {"city": "Oslo"})]),
    Case("v11-parallel", '[TOOL_CALLS]get_weather{"city": "Oslo"}[TOOL_CALLS]add{"a": 1, "b": 2}', "",
         [("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2})]),
    Case("v11-args-marker", '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]now[ARGS]{}', "",
         [("get_weather", {"city": "Oslo"}), ("now", {})]),
    Case("v11-call-id", '[TOOL_CALLS]now[CALL_ID]a1B2c3D4e[ARGS]{}', "", [("now", {})]),
    Case("text-before", "Let me check. [TOOL_CALLS]now{}", "Let me check. ", [("now", {})]),
    Case("empty-args", "[TOOL_CALLS]now{}", "", [("now", {})]),
    Case("nested-unicode-escapes", '[TOOL_CALLS]get_weather{"city": "Zürich \\"Nord\\" 日本 [ARGS] }", '
         '"extra": {"deep": [1, {"k": null}]}}', "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 [ARGS] }', "extra": {"deep": [1, {"k": None}]}})]),
    # A v11 call streams once its name and "{" are read, so it cannot be taken back: arguments
    # that break (or are cut off) are closed where they broke; text after them is text.
    Case("broken-json-closed-where-it-broke", '[TOOL_CALLS]add{"a": 1,}', "", [("add", {"a": 1})]),
    # A pre-v11 list streams call by call too: a started call is closed where the list broke or was cut off.
    Case("broken-v3", '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}]', "", [("add", {"a": 1})]),
    Case("v3-unknown-tool-is-text", '[TOOL_CALLS] [{"name": "launch", "arguments": {}}]',
         '[TOOL_CALLS] [{"name": "launch", "arguments": {}}]'),
    Case("v3-known-then-unknown", '[TOOL_CALLS] [{"name": "now", "arguments": {}}, {"name": "launch", "arguments": {}}]',
         "", [("now", {})]),
    Case("v3-other-key-order-parsed-whole", '[TOOL_CALLS] [{"arguments": {"a": 1, "b": 2}, "name": "add"}]', "",
         [("add", {"a": 1, "b": 2})]),
    Case("args-not-object", "[TOOL_CALLS]add[1, 2]", "[TOOL_CALLS]add[1, 2]"),
    Case("no-args", "[TOOL_CALLS]now", "[TOOL_CALLS]now"),
    Case("marker-only", "[TOOL_CALLS]", "[TOOL_CALLS]"),
    Case("unknown-tool", 'x[TOOL_CALLS]launch{"a": 1}', 'x[TOOL_CALLS]launch{"a": 1}'),
    Case("unknown-then-known", '[TOOL_CALLS]launch{}[TOOL_CALLS]now{}', "[TOOL_CALLS]launch{}", [("now", {})]),
    Case("good-then-cut-off", '[TOOL_CALLS]now{}[TOOL_CALLS]add{"a": ', "", [("now", {}), ("add", {})]),
    Case("cut-off", '[TOOL_CALLS]get_weather{"city": "Os', "", [("get_weather", {"city": "Os"})]),
    Case("trailing-text", '[TOOL_CALLS]now{} done', "done", [("now", {})]),
    Case("v3-cut-off", '[TOOL_CALLS] [{"name": "now", "arguments": {', "", [("now", {})]),
    # Devstral / Mistral Small 3.2 write file contents as one long string argument (the [ARGS]
    # form of tokenizer v13, from Mistral's chat templates).
    Case("v13-long-code", "[TOOL_CALLS]get_weather[ARGS]" + json.dumps({"city": "def f():\n    return 1\n" * 50}), "",
         [("get_weather", {"city": "def f():\n    return 1\n" * 50})]),
    Case("partial-marker-text", "a [TOOL_ but no call", "a [TOOL_ but no call"),
    Case("ends-with-partial-marker", "text [TOOL_CALL", "text [TOOL_CALL"),
    Case("deep-nesting", "[TOOL_CALLS]" + "[" * 3000 + "]" * 3000, "[TOOL_CALLS]" + "[" * 3000 + "]" * 3000),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_mistral(case):
    check_case("mistral", case)


def test_mistral_ids_are_nine_alphanumerics():
    result = run_parser("mistral", ['[TOOL_CALLS]now{}[TOOL_CALLS]add{"a": 1}'])
    assert len(result.ids) == 2
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", call_id) for call_id in result.ids)


@pytest.mark.parametrize("close", ["}]", "}, {\"name\": \"now\", \"arguments\": {}}]"])
def test_a_long_pre_v11_call_streams_before_its_end(close):
    text = "line of code\n" * 200
    output = '[TOOL_CALLS] [{"name": "get_weather", "arguments": ' + json.dumps({"city": text}) + close
    streamed = streamed_before("mistral", output, close)
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20


@pytest.mark.parametrize("head", ["get_weather", "get_weather[ARGS]", "get_weather[CALL_ID]a1B2c3D4e[ARGS]"])
def test_a_long_call_streams_before_its_end(head):
    # A coding agent writing a file: the arguments must be out before the call ends (here: the
    # next call's marker, as v11 calls have no end marker of their own).
    text = "line of code\n" * 200
    output = f"[TOOL_CALLS]{head}" + json.dumps({"city": text}) + "[TOOL_CALLS]now{}"
    streamed = streamed_before("mistral", output, "[TOOL_CALLS]now")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
