import re

import pytest

from rostra.parsing.tools import REGISTRY
from toolparse import Case, check_case, run_parser

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
    Case("broken-json", '[TOOL_CALLS]add{"a": 1,}', '[TOOL_CALLS]add{"a": 1,}'),
    Case("broken-v3", '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}]', '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}]'),
    Case("args-not-object", "[TOOL_CALLS]add[1, 2]", "[TOOL_CALLS]add[1, 2]"),
    Case("no-args", "[TOOL_CALLS]now", "[TOOL_CALLS]now"),
    Case("marker-only", "[TOOL_CALLS]", "[TOOL_CALLS]"),
    Case("unknown-tool", 'x[TOOL_CALLS]launch{"a": 1}', 'x[TOOL_CALLS]launch{"a": 1}'),
    Case("unknown-then-known", '[TOOL_CALLS]launch{}[TOOL_CALLS]now{}', "[TOOL_CALLS]launch{}", [("now", {})]),
    Case("good-then-broken", '[TOOL_CALLS]now{}[TOOL_CALLS]add{"a": ', '[TOOL_CALLS]add{"a": ', [("now", {})]),
    Case("cut-off", '[TOOL_CALLS]get_weather{"city": "Os', '[TOOL_CALLS]get_weather{"city": "Os'),
    Case("trailing-text", '[TOOL_CALLS]now{} done', '[TOOL_CALLS]now{} done'),
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
