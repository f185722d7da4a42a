import pytest

from rostra.parsing.tools import REGISTRY
from toolparse import Case, check_case, streamed_before

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
    # A call streams from its first argument on, so it cannot be taken back: what breaks after
    # that ends it with the arguments read so far, and the rest of the list is dropped.
    Case("syntax-error-first-is-text", "[add(,a=1, b=2)] x", "[add(,a=1, b=2)] x"),
    Case("syntax-error-after-an-argument", "[add(a=1,, b=2)] x", " x", [("add", {"a": 1})]),
    Case("positional-arg", "[add(1, b=2)]", "[add(1, b=2)]"),
    Case("not-a-literal", "[add(a=x, b=2)]", "[add(a=x, b=2)]"),
    Case("expression", "[add(a=__import__('os').system('true'))]", "[add(a=__import__('os').system('true'))]"),
    Case("set-value", "[add(a={1, 2})]", "[add(a={1, 2})]"),
    Case("duplicate-keyword-ends-the-call", "[add(a=1, a=2)]", "", [("add", {"a": 1})]),
    Case("attribute-call", "[math.add(a=1)]", "[math.add(a=1)]"),
    Case("unknown-tool", "[launch(a=1)]", "[launch(a=1)]"),
    Case("unknown-first-of-two", "[launch(), now()]", "[launch(), now()]"),
    Case("unknown-after-a-call-is-dropped", "[now(), launch()]", "", [("now", {})]),
    Case("cut-off", '[get_weather(city="Os', "", [("get_weather", {"city": "Os"})]),
    # Llama 4 writing a file (pythonic format of its model card): a long triple-quoted string
    # with escapes, quotes and newlines.
    Case("file-write", '[get_weather(city="""def f():\n    return \'a\\tb\' "x"\n""" * 1, days=2)]'.replace(" * 1", ""),
         "", [("get_weather", {"city": "def f():\n    return 'a\tb' \"x\"\n", "days": 2})]),
    Case("cut-off-after-quote", "[get_weather(city=''", "[get_weather(city=''"),
    Case("partial-tag", "<|python_st", "<|python_st"),
    Case("tag-then-prose", "<|python_start|>print('hi')<|python_end|>", "<|python_start|>print('hi')<|python_end|>"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pythonic(case):
    check_case("pythonic", case)


def test_a_long_call_streams_before_its_end():
    # A long string argument: out before the call closes, in multi-token deltas, escapes decoded.
    text = "line of code\\n" * 200
    output = f'[now(), get_weather(city="{text}", days=2)]'
    streamed = streamed_before("pythonic", output, '", days=2)]')
    assert streamed.startswith('{}{"city": "line of code\\n') and len(streamed) > 2500
