import pytest

from toolparse import Case, check_case

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', "",
         [("get_weather", {"city": "Oslo"})]),
    Case("text-around", 'Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> Done.',
         "Let me check.  Done.", [("get_weather", {"city": "Oslo"})]),
    Case("parallel", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}</tool_call>\n'
         '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2.5}}</tool_call>', "\n",
         [("get_weather", {"city": "Oslo", "days": 2}), ("add", {"a": 1, "b": 2.5})]),
    Case("empty-args", '<tool_call>{"name": "now", "arguments": {}}</tool_call>', "", [("now", {})]),
    Case("nested-unicode-escapes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich \\"Nord\\" 日本 </x>", '
         '"extra": {"deep": [1, {"k": null}]}}}</tool_call>', "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 </x>', "extra": {"deep": [1, {"k": None}]}})]),
    Case("string-arguments", '<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>', "",
         [("add", {"a": 1})]),
    Case("broken-json", '<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>after',
         '<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>after'),
    Case("unknown-tool", 'x<tool_call>{"name": "launch", "arguments": {}}</tool_call>',
         'x<tool_call>{"name": "launch", "arguments": {}}</tool_call>'),
    Case("cut-off-complete-json", '<tool_call>{"name": "now", "arguments": {}}', "", [("now", {})]),
    Case("cut-off-incomplete", '<tool_call>{"name": "now", "argu', '<tool_call>{"name": "now", "argu'),
    Case("partial-marker-text", "a <tool_ but no call", "a <tool_ but no call"),
    Case("ends-with-partial-marker", "text <tool_c", "text <tool_c"),
    Case("nan-is-not-json", '<tool_call>{"name": "add", "arguments": {"a": NaN}}</tool_call>',
         '<tool_call>{"name": "add", "arguments": {"a": NaN}}</tool_call>'),
    Case("long-call", '<tool_call>{"name": "get_weather", "arguments": {"city": "' + "Oslo " * 2000 + '"}}</tool_call>',
         "", [("get_weather", {"city": "Oslo " * 2000})]),
    Case("absurdly-deep", "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>",
         "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hermes(case):
    check_case("hermes", case)
