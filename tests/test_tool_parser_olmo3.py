"""olmo3: OLMo 3's `<function_calls>NAME(key=value, …)\\n…</function_calls>`. Outputs as its chat template writes past
calls (tests/data/templates/allenai-Olmo-3.1-32B-Instruct.jinja: JSON values, one call a line) and as vLLM's
tests/tool_parsers/test_olmo3_tool_parser.py has them (Python literals, JSON literals, no arguments, empty dict and
list, escaped quotes, parallel calls, a bad sibling call)."""

import pytest

from rostra.parsing.tools.base import ToolSpec
from toolparse import TOOLS, Case, check_case, streamed_before

REGISTER = ToolSpec("register_user", {"type": "object", "properties": {}})
COOL = ToolSpec("do_something_cool", {"type": "object", "properties": {}})
ALL = [*TOOLS, REGISTER, COOL]

USER = {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": None,
        "passed_test": True, "aliases": ["John", "Johnny"]}
MORE_TYPES = ("register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, "
              "passed_test=True, aliases=['John', 'Johnny'])")
JSON_LITERALS = MORE_TYPES.replace("None", "null").replace("True", "true")
TEMPLATE_WRITES = ('<function_calls>get_weather(city="Oslo ☀ \\"Nord\\"", days=3)\n'
                   'add(a=1, b=2.5)</function_calls>')


def block(body: str) -> str:
    return f"<function_calls>{body}</function_calls>"


CASES = [
    Case("none", "How can I help you today?", "How can I help you today?"),
    Case("simple", block("get_weather(city='San Francisco', days=2)"), "",
         [("get_weather", {"city": "San Francisco", "days": 2})]),
    Case("more-types", block(MORE_TYPES), "", [("register_user", USER)]),
    Case("json-literals", block(JSON_LITERALS), "", [("register_user", USER)]),
    Case("parameterless", block("now()"), "", [("now", {})]),
    Case("empty-dict", block("do_something_cool(additional_data={})"), "",
         [("do_something_cool", {"additional_data": {}})]),
    Case("empty-list", block("do_something_cool(steps=[])"), "", [("do_something_cool", {"steps": []})]),
    Case("escaped", block(r"get_weather(city='Martha\'s Vineyard', days=1)"), "",
         [("get_weather", {"city": "Martha's Vineyard", "days": 1})]),
    Case("parallel", block("get_weather(city='San Francisco', days=2)\n" + MORE_TYPES), "",
         [("get_weather", {"city": "San Francisco", "days": 2}), ("register_user", USER)]),
    Case("as-the-template-writes", "Checking both.\n" + TEMPLATE_WRITES + " Done.", "Checking both.\n Done.",
         [("get_weather", {"city": 'Oslo ☀ "Nord"', "days": 3}), ("add", {"a": 1, "b": 2.5})]),
    Case("unknown-tool-stays-text", block("launch(target='moon')"), block("launch(target='moon')")),
    Case("not-python-stays-text", "x " + block("get_weather city=Oslo") + " y", "x " + block("get_weather city=Oslo") + " y"),
    Case("mismatched-brackets-stay-text", block("now(x=1])"), block("now(x=1])")),
    Case("cut-off-in-a-value", "<function_calls>get_weather(city='Os", "", [("get_weather", {"city": "Os"})]),
    Case("partial-marker-text", "a <function_ca but no call", "a <function_ca but no call"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_olmo3(case):
    check_case("olmo3", case, tools=ALL)


@pytest.mark.parametrize("case", CASES[:10], ids=lambda c: c.id)
def test_olmo3_layered_reads_the_same(case):
    check_case("olmo3", case, tools=ALL, rounds=20, layered=True)


def test_a_long_string_streams_before_the_call_ends():
    output = block("get_weather(city='" + "Oslo " * 600 + "', days=2)")
    assert len(streamed_before("olmo3", output, "', days=2)")) > 2500
