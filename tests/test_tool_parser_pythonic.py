import pytest

from rostra.parsing.tools import REGISTRY
from toolparse import Case, check_case

REGISTRY.setdefault("pythonic", "pythonic:PythonicToolParser")

CASES = [
    Case("none", "Just text, no tools.", "Just text, no tools."),
    Case("empty", "", ""),
    Case("one", '[get_weather(city="Oslo")]', "", [("get_weather", {"city": "Oslo"})]),
    Case("parallel", '[get_weather(city="Oslo", days=3), add(a=1, b=2.5)]', "",
         [("get_weather", {"city": "Oslo", "days": 3}), ("add", {"a": 1, "b": 2.5})]),
    Case("whitespace-around", '\n  [\n  now(),\n  add(a = -1, b = 1e3)\n]\n', "", [("now", {}), ("add", {"a": -1, "b": 1000.0})]),
    Case("llama4-tags", "<|python_start|>[now()]<|python_end|>", "", [("now", {})]),
    Case("text-before-tag", "Checking. <|python_start|>[now()]<|python_end|>", "Checking. ", [("now", {})]),
    Case("text-after", "[now()]\nDone.", "\nDone.", [("now", {})]),
    Case("list-in-prose-is-text", 'Call [now()] please.', 'Call [now()] please.'),
    Case("empty-args", "[now()]", "", [("now", {})]),
    Case("literals", "[add(a=True, b=None), get_weather(city='x', days=[1, (2, 3)], extra={'k': {'n': False}})]", "",
         [("add", {"a": True, "b": None}), ("get_weather", {"city": "x", "days": [1, [2, 3]], "extra": {"k": {"n": False}}})]),
    Case("json-literals", "[add(a=true, b=null)]", "", [("add", {"a": True, "b": None})]),
    Case("unicode-escapes", '[get_weather(city="Zürich \\"Nord\\" 日本 ])(", days=\'it\\\'s\')]', "",
         [("get_weather", {"city": 'Zürich "Nord" 日本 ])(', "days": "it's"})]),
    Case("triple-quoted", "[get_weather(city='''a ' '' \"b\" ]''')]", "", [("get_weather", {"city": "a ' '' \"b\" ]"})]),
    Case("empty-strings", "[get_weather(city='', days=\"\")]", "", [("get_weather", {"city": "", "days": ""})]),
    Case("prose-in-brackets", "[Note: this is prose] and more", "[Note: this is prose] and more"),
    Case("number-list", "[1, 2, 3] are numbers", "[1, 2, 3] are numbers"),
    Case("empty-list", "[]", "[]"),
    Case("syntax-error", "[add(a=1,, b=2)] x", "[add(a=1,, b=2)] x"),
    Case("positional-arg", "[add(1, b=2)]", "[add(1, b=2)]"),
    Case("not-a-literal", "[add(a=x, b=2)]", "[add(a=x, b=2)]"),
    Case("expression", "[add(a=__import__('os').system('true'))]", "[add(a=__import__('os').system('true'))]"),
    Case("set-value", "[add(a={1, 2})]", "[add(a={1, 2})]"),
    Case("duplicate-keyword", "[add(a=1, a=2)]", "[add(a=1, a=2)]"),
    Case("attribute-call", "[math.add(a=1)]", "[math.add(a=1)]"),
    Case("unknown-tool", "[launch(a=1)]", "[launch(a=1)]"),
    Case("one-unknown-of-two", "[now(), launch()]", "[now(), launch()]"),
    Case("cut-off", '[get_weather(city="Os', '[get_weather(city="Os'),
    Case("cut-off-after-quote", "[get_weather(city=''", "[get_weather(city=''"),
    Case("partial-tag", "<|python_st", "<|python_st"),
    Case("tag-then-prose", "<|python_start|>print('hi')<|python_end|>", "<|python_start|>print('hi')<|python_end|>"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pythonic(case):
    check_case("pythonic", case)
