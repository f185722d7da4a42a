import pytest

from rostra.parsing.events import Text
from rostra.parsing.tools import REGISTRY
from rostra.parsing.tools.json_lenient import JsonToolParser
from toolparse import TOOLS, Case, check_case

REGISTRY.setdefault("json", "json_lenient:JsonToolParser")

WEATHER = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
ADD = '{"name": "add", "parameters": {"a": 1, "b": 2.5}}'
W, A = ("get_weather", {"city": "Oslo"}), ("add", {"a": 1, "b": 2.5})


def same(id: str, output: str) -> Case:
    """A case whose output is not a call: it all comes out as content, unchanged."""
    return Case(id, output, output)


CASES = [
    same("none", "Just text, no tools."),
    Case("bare-object", WEATHER, "", [W]),
    Case("bare-parameters", ADD, "", [A]),
    Case("bare-list", f"[{WEATHER}, {ADD}]", "", [W, A]),
    Case("bare-text-around", f"Calling it now: {WEATHER} and that is all.", "Calling it now:  and that is all.", [W]),
    Case("two-bare-with-text-between", f"{WEATHER}\nthen\n{ADD}", "\nthen\n", [W, A]),
    Case("fenced", f"```json\n{WEATHER}\n```", "", [W]),
    Case("fenced-real-qwen2.5-coder-0.5b", "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```",
         "", [W]),
    Case("fenced-text-around", f"Sure! ```json\n{WEATHER}\n``` Hope this helps", "Sure!  Hope this helps", [W]),
    Case("fenced-without-json", f"Here:\n```\n{WEATHER}\n```\n", "Here:\n\n", [W]),
    Case("fenced-upper-json-and-list", f"```JSON \n[{WEATHER},\n {ADD}]\n```", "", [W, A]),
    Case("fenced-close-on-same-line", f"```json\n{WEATHER}```", "", [W]),
    Case("fenced-one-line", f"```json{WEATHER}```", "", [W]),
    Case("fenced-indented-close", f"```json\n  {WEATHER}\n  ```", "", [W]),
    Case("two-fences", f"```json\n{WEATHER}\n```\n```json\n{ADD}\n```", "\n", [W, A]),
    Case("empty-arguments", '{"name": "now", "arguments": {}} {"name": "now"} {"name": "now", "arguments": null}', "  ",
         [("now", {}), ("now", {}), ("now", {})]),
    Case("string-arguments", '{"name": "add", "arguments": "{\\"a\\": 1}"}', "", [("add", {"a": 1})]),
    Case("openai-shape", '[{"type": "function", "function": {"name": "add", "arguments": {"a": 1}}}]', "",
         [("add", {"a": 1})]),
    Case("nested-unicode-escapes", '{"name": "get_weather", "arguments": {"city": "Zürich \\"Nord\\" 日本 \\\\", '
         '"extra": {"deep": [1, {"k": null, "t": true, "f": false, "n": -1.5e3}]}}}', "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 \\', "extra": {"deep": [1, {"k": None, "t": True, "f": False,
                                                                               "n": -1500.0}]}})]),
    Case("braces-inside-strings", '{"name": "get_weather", "arguments": {"city": "a}b{c ] [ \\" ``` \\\\"}}', "",
         [("get_weather", {"city": 'a}b{c ] [ " ``` \\'})]),
    Case("fenced-braces-and-fence-inside-strings", '```json\n{"name": "get_weather", "arguments": {"city": "x```y } {"}}\n```',
         "", [("get_weather", {"city": "x```y } {"})]),
    # Not calls: all of it stays content, unchanged.
    same("json-not-a-call", 'The weather: {"city": "Oslo", "temp": [1, 2]}.'),
    same("json-list-not-calls", "[1, 2, 3] and [{\"a\": 1}] and []"),
    same("fenced-json-not-a-call", '```json\n{"city": "Oslo"}\n```\nDone.'),
    same("fenced-plain-code", "```\nls -la { }\necho \"unbalanced\n```\nok"),
    same("fenced-other-language-holds-a-call", f"```python\nrequests.post(url, json={WEATHER})\n```\n"),
    same("fenced-other-language-indented-close", f"1. Run:\n   ```sh\n   echo {WEATHER}\n   ```\n2. Done {{ x"),
    same("fenced-other-language-bracket-in-info", "```python {title=x}\nprint({\"a\": 1})\n```"),
    same("unknown-tool", '{"name": "launch", "arguments": {"target": "moon"}}'),
    same("unknown-tool-fenced", '```json\n{"name": "launch", "arguments": {}}\n```'),
    same("list-with-one-unknown", f'[{WEATHER}, {{"name": "launch", "arguments": {{}}}}]'),
    same("arguments-not-an-object", '{"name": "add", "arguments": [1, 2]}'),
    same("nan-is-not-json", '{"name": "add", "arguments": {"a": NaN}}'),
    same("stray-brace-never-closes", "Use { and } like this: { and nothing else"),
    same("stray-brace-key-never-closes", 'Start {"unterminated": [1, 2 and then prose after it'),
    same("stray-bracket", "See [the docs](https://x.y) and [1]."),
    same("mismatched-brackets", '{"a": [1, 2}] then text'),
    same("broken-json", '{"name": "add", "arguments": {"a": 1,}}'),
    same("absurdly-deep", '{"name": "add", "arguments": {"a": ' + "[" * 3000 + "]" * 3000 + "}}"),
    same("cut-off-mid-call", '{"name": "get_weather", "arguments": {"city": "Os'),
    same("cut-off-fenced-mid-call", '```json\n{"name": "get_weather", "arguments": {"city": "Os'),
    Case("cut-off-fenced-complete-json", f"```json\n{WEATHER}\n``", "", [W]),
    same("inline-code", "Use `x` or ``y`` or ```z``` here `{\"a\": 1}`"),
    same("four-backticks", "````\nraw\n````"),
    same("ends-with-backticks", "text ``"),
    same("ends-with-fence-open", "text ```js"),
    Case("call-after-stray-brace", f"x {{ y }} {WEATHER}", "x { y } ", [W]),
    Case("call-after-non-json-candidate", f'{{"a" oops}} {WEATHER}', '{"a" oops} ', [W]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_json(case):
    check_case("json", case)


def test_text_is_released_before_a_candidate_completes():
    """Streaming: prose goes out at once; only a possible call is held, and prose-like braces
    are let go as soon as they cannot be JSON."""
    parser = JsonToolParser(TOOLS)
    assert parser.feed([Text("Hello ")]) == [Text("Hello ")]
    assert parser.feed([Text('{"name": "get_')]) == []
    events = parser.feed([Text('weather", "arguments": {}} and { so')])
    assert [type(e).__name__ for e in events] == ["ToolCallStart", "ToolCallArgs", "ToolCallEnd", "Text"]
    assert events[-1] == Text(" and { so")
    assert parser.feed([Text("``")]) == []
    assert parser.feed([Text("`python\n{")]) == [Text("```python\n{")]  # code: no candidates inside
    assert parser.finish() == []


def test_long_candidate_in_small_pieces():
    """A long call full of brackets and escapes inside strings, fed 4 characters at a time."""
    parser = JsonToolParser(TOOLS)
    body = '{"name": "get_weather", "arguments": {"city": "' + "x\\\"{[" * 20000 + '"}}'
    events = []
    for at in range(0, len(body), 4):
        events += parser.feed([Text(body[at:at + 4])])
    events += parser.finish()
    assert [type(e).__name__ for e in events] == ["ToolCallStart", "ToolCallArgs", "ToolCallEnd"]


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = JsonToolParser(TOOLS, max_calls=1)
    events = parser.feed([Text(f"[{WEATHER}, {ADD}]")]) + parser.finish()
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]
