import json

import pytest

from rostra.parsing.events import Text, ToolCallArgs
from rostra.parsing.tools import REGISTRY, tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.qwen3_coder import convert
from toolparse import TOOLS, Case, check_case, streamed_before

REGISTRY.setdefault("qwen3_coder", "qwen3_coder:Qwen3CoderToolParser")

# A tool with every schema type, for the value conversions.
TYPED = ToolSpec("search", {"type": "object", "properties": {
    "query": {"type": "string"}, "limit": {"type": "integer"}, "score": {"type": "number"},
    "exact": {"type": "boolean"}, "filters": {"type": "object"}, "tags": {"type": "array"},
    "cursor": {"type": ["integer", "null"]}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}})


def call(name: str, *params: tuple[str, str], close_function: bool = True) -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in params)
    return f"<tool_call>\n<function={name}>\n{body}" + ("</function>\n" if close_function else "") + "</tool_call>"


WEATHER = call("get_weather", ("city", "Oslo"), ("days", "3"))

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", WEATHER, "", [("get_weather", {"city": "Oslo", "days": 3})]),
    Case("text-around", f"Let me check.\n{WEATHER}\nDone.", "Let me check.\n\nDone.",
         [("get_weather", {"city": "Oslo", "days": 3})]),
    Case("parallel", WEATHER + "\n" + call("add", ("a", "1"), ("b", "2.5")), "\n",
         [("get_weather", {"city": "Oslo", "days": 3}), ("add", {"a": 1, "b": 2.5})]),
    Case("two-functions-one-block", "<tool_call>\n<function=now>\n</function>\n<function=add>\n<parameter=a>\n1\n"
         "</parameter>\n</function>\n</tool_call>", "", [("now", {}), ("add", {"a": 1})]),
    Case("empty-args", "<tool_call>\n<function=now>\n</function>\n</tool_call>", "", [("now", {})]),
    Case("inline-values", "<tool_call><function=add><parameter=a>1</parameter><parameter=b>-2e1</parameter>"
         "</function></tool_call>", "", [("add", {"a": 1, "b": -20.0})]),
    Case("unicode-escapes-markup-in-string", call("get_weather", ("city", 'Zürich "Nord" \\n 日本 </x> </function>')), "",
         [("get_weather", {"city": 'Zürich "Nord" \\n 日本 </x> </function>'})]),
    Case("multiline-string-keeps-inner-newlines", call("get_weather", ("city", "\nline 1\n  line 2\n")), "",
         [("get_weather", {"city": "\nline 1\n  line 2\n"})]),
    Case("string-that-looks-like-json", call("get_weather", ("city", "42")), "", [("get_weather", {"city": "42"})]),
    Case("integer-as-float-and-junk", call("get_weather", ("city", "Oslo"), ("days", "3.0")) +
         call("get_weather", ("city", "Bergen"), ("days", "three")), "",
         [("get_weather", {"city": "Oslo", "days": 3}), ("get_weather", {"city": "Bergen", "days": "three"})]),
    Case("unknown-parameter-nested", call("get_weather", ("city", "Oslo"), ("extra", '{"deep": [1, {"k": null}]}'),
                                          ("plain", "not json")), "",
         [("get_weather", {"city": "Oslo", "extra": {"deep": [1, {"k": None}]}, "plain": "not json"})]),
    Case("typed", call("search", ("query", "true"), ("limit", "10"), ("score", "0.5"), ("exact", "True"),
                       ("filters", '{"lang": "no", "n": [1, 2]}'), ("tags", '["a", "b"]'), ("cursor", "null"),
                       ("note", "null")), "",
         [("search", {"query": "true", "limit": 10, "score": 0.5, "exact": True, "filters": {"lang": "no", "n": [1, 2]},
                      "tags": ["a", "b"], "cursor": None, "note": None})]),
    Case("typed-fallbacks", call("search", ("exact", "maybe"), ("filters", "{broken"), ("tags", '{"a": 1}'),
                                 ("cursor", "7"), ("score", "NaN")), "",
         [("search", {"exact": "maybe", "filters": "{broken", "tags": '{"a": 1}', "cursor": 7, "score": "NaN"})]),
    Case("absurdly-deep-value-stays-a-string", call("add", ("x", "[" * 3000 + "]" * 3000)), "",
         [("add", {"x": "[" * 3000 + "]" * 3000})]),
    Case("missing-function-close", call("get_weather", ("city", "Oslo"), close_function=False), "",
         [("get_weather", {"city": "Oslo"})]),
    Case("missing-parameter-close", "<tool_call>\n<function=add>\n<parameter=a>\n1\n<parameter=b>\n2\n</function>\n"
         "</tool_call>", "", [("add", {"a": 1, "b": 2})]),
    # A call streams from its <function=…> on, so it cannot be taken back: markup that breaks
    # (or is cut off) ends it with the parameters read so far.
    Case("garbage-in-function-ends-the-call", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\noops\n"
         "</function>\n</tool_call>after", "after", [("add", {"a": 1})]),
    Case("broken-no-function", "<tool_call>\n{\"name\": \"now\"}\n</tool_call>", "<tool_call>\n{\"name\": \"now\"}\n</tool_call>"),
    Case("broken-one-of-two-stays-text", call("now") + "<tool_call>\n<function=add\n</tool_call>",
         "<tool_call>\n<function=add\n</tool_call>", [("now", {})]),
    Case("unknown-tool", "x" + call("launch", ("target", "moon")), "x" + call("launch", ("target", "moon"))),
    Case("cut-off-after-function", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n", "",
         [("add", {"a": 1})]),
    Case("cut-off-mid-parameter", "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs", "",
         [("get_weather", {"city": "Os"})]),
    Case("cut-off-before-function-close", "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n", "",
         [("add", {"a": 1})]),
    # Qwen3-Coder writing a file (the shape of its chat template's example: a multi-line string
    # parameter, code with quotes, backslashes, tags and a blank last line).
    Case("file-write", call("get_weather", ("city", 'def f(x):\n    return "a\\b" < x </p>\n\n' * 40), ("days", "2")),
         "", [("get_weather", {"city": 'def f(x):\n    return "a\\b" < x </p>\n\n' * 40, "days": 2})]),
    Case("crlf-newlines", "<tool_call>\r\n<function=get_weather>\r\n<parameter=city>\r\nOslo\r\n</parameter>\r\n"
         "</function>\r\n</tool_call>", "", [("get_weather", {"city": "Oslo"})]),
    Case("function-close-inside-a-string-value", call("get_weather", ("city", "a </function> b")), "",
         [("get_weather", {"city": "a </function> b"})]),
    Case("cut-off-in-name", "<tool_call>\n<function=no", "<tool_call>\n<function=no"),
    Case("partial-marker-text", "a <tool_ but no call", "a <tool_ but no call"),
    Case("ends-with-partial-marker", "text <tool_c", "text <tool_c"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_qwen3_coder(case):
    check_case("qwen3_coder", case, tools=[*TOOLS, TYPED])


@pytest.mark.parametrize("raw, schema, value", [
    ("3", {"type": "integer"}, 3),
    ("3.5", {"type": "integer"}, 3.5),
    ("3", {"type": "string"}, "3"),
    ("3", None, 3),
    ("Oslo", None, "Oslo"),
    ("false", {"type": "boolean"}, False),
    ("1", {"type": "boolean"}, "1"),
    ("[1]", {"type": "array"}, [1]),
    ("Infinity", {"type": "number"}, "Infinity"),
    ("2", {"type": ["string", "integer"]}, 2),
    ("x", {"type": ["string", "integer"]}, "x"),
    ("null", {"type": "null"}, None),
])
def test_convert(raw, schema, value):
    assert convert(raw, schema) == value
    assert type(convert(raw, schema)) is type(value)


def test_parallel_tool_calls_false_keeps_the_first_call():
    parser = tool_parser_class("qwen3_coder")(TOOLS, max_calls=1)
    events = parser.feed([Text(call("now") + call("add", ("a", "1")))]) + parser.finish()
    # (the arguments stream: "{" when the call starts, "}" when it ends)
    assert [(type(e).__name__, getattr(e, "index", None)) for e in events] == [
        ("ToolCallStart", 0), ("ToolCallArgs", 0), ("ToolCallArgs", 0), ("ToolCallEnd", 0)]
    assert "".join(e.text for e in events if isinstance(e, ToolCallArgs)) == "{}"


def test_a_long_string_parameter_streams_before_its_end():
    # Qwen3-Coder writing a file: the content must be out before </parameter>, in multi-token deltas.
    text = "line of code\n" * 200
    output = call("get_weather", ("city", text), ("days", "2"))
    streamed = streamed_before("qwen3_coder", output, "\n</parameter>\n<parameter=days>")
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
