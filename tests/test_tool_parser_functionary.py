"""functionary_v31 (`<function=NAME>{json}</function>`) and functionary_v32 (`>>>NAME\\n{json}`, the prompt ending
in `>>>`). Outputs as the models write them: their chat templates' own rendering of past calls
(meetkai-functionary-medium-v3.1.jinja, meetkai-functionary-medium-v3.2.jinja) and llama.cpp's
tests/test-chat.cpp (v3.1: `<function=special_function>{"arg1": 1}</function>`; v3.2: `all\\nHello, world!\\nnono\\n
What's up?>>>special_function\\n{"arg1": 1}\\n`, `special_function\\n{"arg1": 1} \\n   `, `python\\nCODE`)."""

import json

import pytest

from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

OSLO = ("get_weather", {"city": "Oslo", "days": 3})
SUM = ("add", {"a": 1, "b": 2.5})
NESTED = {"city": "Zürich 日本 🎉 \"Nord\" </b>", "days": 1, "extra": {"units": ["°C", None]}}
NESTED_JSON = json.dumps(NESTED, ensure_ascii=False)
PYTHON = ToolSpec("python", {"type": "object", "properties": {"code": {"type": "string"}}})

V31 = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("one", '<function=get_weather>{"city": "Oslo", "days": 3}</function>', "", [OSLO]),
    Case("two", '<function=get_weather>{"city": "Oslo", "days": 3}</function><function=add>{"a": 1, "b": 2.5}'
         "</function>", "", [OSLO, SUM]),
    Case("nested-and-unicode", f"<function=get_weather>{NESTED_JSON}</function>", "", [("get_weather", NESTED)]),
    Case("text-before", 'Let me check.\n<function=get_weather>{"city": "Oslo", "days": 3}</function>',
         "Let me check.\n", [OSLO]),
    Case("no-end-marker", '<function=get_weather>{"city": "Oslo", "days": 3}', "", [OSLO]),
    Case("empty-arguments", "<function=now>{}</function>", "", [("now", {})]),
    Case("unknown-tool-stays-text", '<function=launch>{"t": 1}</function> ok', '<function=launch>{"t": 1}</function> ok'),
    Case("qwen3-coder-body-stays-text", "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>",
         "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>"),
    Case("cut-off-mid-arguments", '<function=get_weather>{"city": "Os', "", [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-the-name", "<function=get_wea", "<function=get_wea"),
]

V32 = [
    Case("text", "all\nHello, world!\nWhat's up?", "Hello, world!\nWhat's up?"),
    Case("text-then-call", 'all\nHello, world!\nnono\nWhat\'s up?>>>get_weather\n{"city": "Oslo", "days": 3}\n',
         "Hello, world!\nnono\nWhat's up?", [OSLO]),
    Case("call-first-trailing-space", 'get_weather\n{"city": "Oslo", "days": 3} \n                    ', "", [OSLO]),
    Case("two-calls", 'get_weather\n{"city": "Oslo", "days": 3}>>>add\n{"a": 1, "b": 2.5}', "", [OSLO, SUM]),
    Case("nested-and-unicode", f"get_weather\n{NESTED_JSON}", "", [("get_weather", NESTED)]),
    Case("call-then-text", 'get_weather\n{"city": "Oslo", "days": 3}>>>all\nChecking.', "Checking.", [OSLO]),
    Case("no-recipient-is-text", "Hello there, no recipient.", "Hello there, no recipient."),
    Case("a-prompt-like-gt-in-text-stays", "all\nIn Python:\n>>> print(1)\n1", "In Python:\n>>> print(1)\n1"),
    Case("unknown-tool-stays-text", 'all\nOk.>>>launch\n{"t": 1}', 'Ok.>>>launch\n{"t": 1}'),
    Case("unknown-tool-first-stays-text", 'launch\n{"t": 1}', 'launch\n{"t": 1}'),
    Case("not-json-stays-text", "all\nOk.>>>get_weather\nOslo please", "Ok.>>>get_weather\nOslo please"),
    Case("cut-off-mid-arguments", 'get_weather\n{"city": "Os', "", [("get_weather", {"city": "Os"})]),
    Case("cut-off-in-the-recipient", "all\nOk.>>>get_wea", "Ok.>>>get_wea"),
    Case("empty", "", ""),
]


@pytest.mark.parametrize("case", V31, ids=lambda c: c.id)
def test_functionary_v31(case):
    check_case("functionary_v31", case)


@pytest.mark.parametrize("case", V32, ids=lambda c: c.id)
def test_functionary_v32(case):
    check_case("functionary_v32", case)


def test_v32_python_code_is_a_code_call():
    # llama.cpp's test: `python\n# This is a program:\nprint('hey')` calls the code interpreter with that code.
    check_case("functionary_v32", Case("python", "python\n# This is a program:\nprint('hey')", "",
                                       [("python", {"code": "# This is a program:\nprint('hey')"})]),
               tools=[*TOOLS, PYTHON])


@pytest.mark.parametrize("parser,output,marker", [
    ("functionary_v31", '<function=get_weather>{"city": %s, "days": 2}</function>', ', "days"'),
    ("functionary_v32", 'all\nOk.>>>get_weather\n{"city": %s, "days": 2}', ', "days"'),
])
def test_a_long_string_argument_streams_before_its_end(parser, output, marker):
    text = "line of code\n" * 200
    streamed = streamed_before(parser, output % json.dumps(text), marker)
    assert streamed.startswith('{"city": "line of code\\n') and len(streamed) > len(json.dumps(text)) - 20
