"""minimax_m2: MiniMax-M2's <minimax:tool_call><invoke name="…"><parameter name="…">…</parameter></invoke>.

Outputs in the shape of the chat template's own rendering (tests/data/templates/unsloth-MiniMax-M2.jinja:
strings as written, other values with tojson, one <invoke> per call inside one block) and of the reference
parsers' tests (vLLM's minimax_m2 tests, Ollama's: text before and after, two calls in one block, a
malformed trailing invoke that must not lose the call before it)."""

import json

import pytest

from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

TYPED = ToolSpec("search", {"type": "object", "properties": {
    "query": {"type": "string"}, "limit": {"type": "integer"}, "filters": {"type": "object"}}})


def invoke(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f'<parameter name="{key}">{value}</parameter>\n' for key, value in params)
    return f'<invoke name="{name}">\n{body}</invoke>\n'


def block(*invokes: str, end: str = "</minimax:tool_call>") -> str:
    return "<minimax:tool_call>\n" + "".join(invokes) + end


OSLO = ("get_weather", {"city": "Oslo", "days": 3})
WEATHER = invoke("get_weather", ("city", "Oslo"), ("days", "3"))

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", block(WEATHER), "", [OSLO]),
    Case("text-before", "Let me check the weather. " + block(WEATHER), "Let me check the weather. ", [OSLO]),
    Case("text-after", block(WEATHER) + "\nPlease wait.", "\nPlease wait.", [OSLO]),
    Case("two-in-one-block", block(invoke("get_weather", ("city", "NYC")), invoke("get_weather", ("city", "LA"))), "",
         [("get_weather", {"city": "NYC"}), ("get_weather", {"city": "LA"})]),
    Case("two-blocks", block(WEATHER) + "\n" + block(invoke("add", ("a", "1"), ("b", "2.5"))), "\n",
         [OSLO, ("add", {"a": 1, "b": 2.5})]),
    Case("no-arguments", block('<invoke name="now">\n</invoke>\n'), "", [("now", {})]),
    Case("unicode", block(invoke("get_weather", ("city", "Zürich 日本 🎉 \"Nord\" <b>"))), "",
         [("get_weather", {"city": 'Zürich 日本 🎉 "Nord" <b>'})]),
    Case("typed-and-nested", block(invoke("search", ("query", "true"), ("limit", "10"),
                                          ("filters", '{"lang": "no", "deep": [1, {"k": null}]}'),
                                          ("extra", "[1, 2]"))), "",
         [("search", {"query": "true", "limit": 10, "filters": {"lang": "no", "deep": [1, {"k": None}]},
                      "extra": [1, 2]})]),
    Case("multiline-value-kept-exactly", block(invoke("get_weather", ("city", "\nline 1\n  line 2\n"))), "",
         [("get_weather", {"city": "\nline 1\n  line 2\n"})]),
    Case("thinking-in-content-before", "<think>\nThe user wants Oslo.\n</think>\n\n" + block(WEATHER),
         "<think>\nThe user wants Oslo.\n</think>\n\n", [OSLO]),
    # A trailing invoke that never closes its head must not lose the call before it.
    Case("malformed-trailing-invoke", block(WEATHER + '<invoke name="broken_no_close'), "", [OSLO]),
    Case("unknown-tool-first-stays-text", "x" + block(invoke("launch", ("t", "moon"))) + "y",
         "x" + block(invoke("launch", ("t", "moon"))) + "y"),
    Case("garbage-in-invoke-ends-the-call", block('<invoke name="add">\n<parameter name="a">1</parameter>\noops\n'
                                                  '</invoke>\n') + "after", "after", [("add", {"a": 1})]),
    Case("no-block-end", "ok" + block(WEATHER, end=""), "ok", [OSLO]),
    Case("cut-off-mid-value", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Os', "",
         [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-name", '<minimax:tool_call>\n<invoke name="get_w', '<minimax:tool_call>\n<invoke name="get_w'),
    Case("partial-marker-text", "a <minimax:tool but no call", "a <minimax:tool but no call"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_minimax_m2(case):
    check_case("minimax_m2", case, tools=[*TOOLS, TYPED])


def test_a_long_string_value_streams_before_its_end():
    text = "line of code\n" * 200
    output = block(invoke("get_weather", ("city", text), ("days", "2")))
    streamed = streamed_before("minimax_m2", output, '</parameter>\n<parameter name="days"')
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
