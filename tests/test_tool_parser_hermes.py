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
    # A call whose head was read has started (its arguments streamed): when its JSON breaks or is
    # cut off it still ends, with what was valid closed into JSON; the rest of the block is dropped.
    Case("broken-json", '<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>after', "after",
         [("add", {"a": 1})]),
    Case("broken-json-mid-value", '<tool_call>{"name": "add", "arguments": {"a": 1, "b": tru, "c": 3}}</tool_call>!',
         "!", [("add", {"a": 1})]),
    Case("cut-off-in-string", '<tool_call>{"name": "get_weather", "arguments": {"city": "Os', "",
         [("get_weather", {"city": "Os"})]),
    Case("unknown-tool", 'x<tool_call>{"name": "launch", "arguments": {}}</tool_call>',
         'x<tool_call>{"name": "launch", "arguments": {}}</tool_call>'),
    Case("cut-off-complete-json", '<tool_call>{"name": "now", "arguments": {}}', "", [("now", {})]),
    Case("cut-off-incomplete", '<tool_call>{"name": "now", "argu', '<tool_call>{"name": "now", "argu'),
    Case("partial-marker-text", "a <tool_ but no call", "a <tool_ but no call"),
    Case("ends-with-partial-marker", "text <tool_c", "text <tool_c"),
    Case("nan-is-not-json", '<tool_call>{"name": "add", "arguments": {"b": 2, "a": NaN}}</tool_call>', "",
         [("add", {"b": 2})]),
    Case("nan-in-a-list-is-text", '<tool_call>[{"name": "add", "arguments": {"a": NaN}}]</tool_call>',
         '<tool_call>[{"name": "add", "arguments": {"a": NaN}}]</tool_call>'),
    Case("arguments-first-not-streamed", '<tool_call>{"arguments": {"a": 1}, "name": "add"}</tool_call>', "",
         [("add", {"a": 1})]),
    Case("long-call", '<tool_call>{"name": "get_weather", "arguments": {"city": "' + "Oslo " * 2000 + '"}}</tool_call>',
         "", [("get_weather", {"city": "Oslo " * 2000})]),
    # Issue 45: markup never reaches the content. An empty block (Qwen-family models emit
    # <tool_call>\n\n</tool_call>) carries nothing and is dropped; a block whose end tag was left
    # out before the next start is ended there; a stray end tag after a call is markup, dropped.
    Case("empty-block", "<tool_call>\n\n</tool_call>", ""),
    Case("empty-block-then-text", "Hi\n<tool_call> </tool_call>\nbye", "Hi\n\nbye"),
    Case("empty-block-then-call", '<tool_call>\n\n</tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
         "\n", [("now", {})]),
    Case("call-then-empty-block", '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>\n<tool_call>\n\n</tool_call>',
         "\n", [("now", {})]),
    Case("empty-block-cut-off", "Hi <tool_call>\n\n", "Hi "),
    Case("empty-block-restarted", '<tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>', "",
         [("now", {})]),
    Case("nested-blocks", '<tool_call>\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>\n</tool_call>',
         "\n", [("now", {})]),
    Case("stray-end-tag", '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>\n</tool_call>\nDone.',
         "\n\nDone.", [("now", {})]),
    Case("whitespace-around-json", '<tool_call>\n\n  {"name": "add", "arguments": {"a": 1}}  \n\n</tool_call>\nok', "\nok",
         [("add", {"a": 1})]),
    Case("malformed-stays-text", '<tool_call>\n{"name": get}\n</tool_call>\n<tool_call>\n\n</tool_call>',
         '<tool_call>\n{"name": get}\n</tool_call>\n'),
    Case("absurdly-deep", "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>",
         "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hermes(case):
    check_case("hermes", case)
    check_case("hermes", case, layered=True)  # the default: the lenient layers after hermes
