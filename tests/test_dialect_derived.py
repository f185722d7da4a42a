"""A template no parser knows still works (issue 43): the call markup is derived from what the template renders for
a probe call (rostra/parsing/derive.py) and a parser built from it (rostra/parsing/tools/derived.py) reads the
model's calls: arguments stream, every split of the output gives the same result, a malformed call stays text.

The templates here are invented (no model ships them) but written as real ones are: a system prompt listing the
tools, the calls after the assistant's text, the results in a turn of their own. Each writes its calls in a markup
no registered parser reads: a name then JSON, a JSON object with name and arguments keys, XML-like parameters in
a section, parameters with a newline around each value, and a JSON section with a separator between calls."""

from __future__ import annotations

import json
import random

import pytest

from harness import MODEL, InProcessServer
from rostra.parsing.derive import derive_markup
from rostra.parsing.dialect import detect_dialect
from rostra.parsing.events import Text
from rostra.parsing.tools.derived import DerivedMarkup, derived_parser_class
from rostra.parsing.tools.emitter import CallEmitter
from rostra.parsing.tools.layered import LayeredToolParser, LENIENT_LAYERS
from rostra.prompt.chat_template import ChatTemplate
from test_dialect_templates import Family, check_chat, check_messages, check_responses
from toolparse import TOOLS, fold_tool_calls, splits

HEAD = """{%- if tools -%}<|system|>You may call these tools:
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}<|end|>
{% endif -%}
{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>{{ m.content }}<|end|>
{% elif m.role == 'assistant' -%}<|assistant|>{{ m.content or '' }}"""
TAIL = """<|end|>
{% elif m.role == 'tool' -%}<|tool|>{{ m.content }}<|end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"""

CALLS = {
    # <|fn|>NAME\n{json}<|/fn|>, one block per call
    "fn": """{%- for c in m.tool_calls or [] -%}<|fn|>{{ c.function.name }}
{{ c.function.arguments | tojson }}<|/fn|>{%- endfor -%}""",
    # [[call]]{"name": …, "arguments": …}[[/call]]
    "call": """{%- for c in m.tool_calls or [] -%}
[[call]]{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}[[/call]]
{%- endfor -%}""",
    # <calls><call name="NAME"><arg name="KEY">VALUE</arg>…</call>…</calls>
    "xml": """{%- if m.tool_calls -%}
<calls>{%- for c in m.tool_calls %}
<call name="{{ c.function.name }}">
{%- for k, v in c.function.arguments.items() %}
<arg name="{{ k }}">{{ v if v is string else v | tojson }}</arg>
{%- endfor %}
</call>{%- endfor %}
</calls>{%- endif -%}""",
    # <invoke fn=NAME><p=KEY>\nVALUE\n</p>…</invoke>
    "xml-newlines": """{%- for c in m.tool_calls or [] -%}<invoke fn={{ c.function.name }}>
{%- for k, v in c.function.arguments.items() -%}<p={{ k }}>
{{ v if v is string else v | tojson }}
</p>{%- endfor -%}</invoke>{%- endfor -%}""",
    # <<calls>>[{"NAME": {json}}, …]<</calls>>: a section, a separator between calls
    "keyed-list": """{%- if m.tool_calls -%}<<calls>>[
{%- for c in m.tool_calls -%}{{ {c.function.name: c.function.arguments} | tojson }}
{%- if not loop.last %}, {% endif -%}{%- endfor -%}]<</calls>>{%- endif -%}""",
}
SOURCES = {name: HEAD + body + TAIL for name, body in CALLS.items()}

MARKUP = {
    "fn": DerivedMarkup("name_json", "<|fn|>", "<|/fn|>", name_sep="\n"),
    "call": DerivedMarkup("keyed_json", "[[call]]", "[[/call]]"),
    "xml": DerivedMarkup("xml", '<call name="', "</call>", section_start="<calls>", section_end="</calls>",
                         name_close='">', key_open='<arg name="', key_close='">', value_close="</arg>"),
    "xml-newlines": DerivedMarkup("xml", "<invoke fn=", "</invoke>", name_close=">", key_open="<p=", key_close=">",
                                  value_close="</p>", value_newlines=True),
    "keyed-list": DerivedMarkup("name_json", '{"', "}", section_start="<<calls>>[", section_end="]<</calls>>",
                                separator=",", name_sep='": '),
}

OSLO = {"city": "Zürich ☀ \"Nord\"", "days": 3, "extra": {"units": ["°C", None], "deep": [1, {"k": True}]}}
ADD = {"a": 1, "b": 2.5}


def write(name: str, calls: list[tuple[str, dict]]) -> str:
    """The calls as the template itself writes them (what the model was trained to write)."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{n}", "type": "function", "function": {"name": tool, "arguments": args}}
        for n, (tool, args) in enumerate(calls)]}]
    template = ChatTemplate(SOURCES[name])
    prompt = template.render(messages[:1], add_generation_prompt=True)
    text = template.render(messages, add_generation_prompt=False)
    return text[len(prompt): text.rindex("<|end|>")]


def renderer(source: str):
    template = ChatTemplate(source, "<s>", "</s>")
    return lambda messages, tools, add_generation_prompt=False: template.render(
        messages, add_generation_prompt=add_generation_prompt, tools=tools)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_markup_is_derived_from_the_template(name):
    assert derive_markup(renderer(SOURCES[name])) == MARKUP[name]
    found = detect_dialect(renderer(SOURCES[name]), SOURCES[name])
    assert (found.tool_parser, found.derived) == ("derived", MARKUP[name])
    assert found.reason.startswith("derived from the template") and MARKUP[name].describe() in found.reason


def run(parser_class, pieces: list[str], layered: bool = False):
    parser = parser_class(TOOLS)
    if layered:
        parser = LayeredToolParser([parser, *(layer(TOOLS) for layer in LENIENT_LAYERS)])
    emitter, events = CallEmitter(TOOLS), []
    for piece in pieces:
        events += emitter.feed(parser.feed([Text(piece)]))
    events += emitter.feed(parser.finish()) + emitter.finish()
    return "".join(e.text for e in events if isinstance(e, Text)), fold_tool_calls(events)[0]


def cases(name: str) -> list[tuple[str, str, str, list]]:
    """(id, output, content, calls) in the template's markup."""
    one, two = write(name, [("get_weather", OSLO)]), write(name, [("get_weather", OSLO), ("add", ADD)])
    unknown = write(name, [("launch", {"target": "moon"})])
    return [
        ("one", "Let me check.\n" + one, "Let me check.\n", [("get_weather", OSLO)]),
        ("two-and-text-after", "Both.\n" + two + "\nDone.", "Both.\n\nDone.", [("get_weather", OSLO), ("add", ADD)]),
        ("no-arguments", write(name, [("now", {})]), "", [("now", {})]),
        ("unknown-tool-stays-text", "x " + unknown + " y", "x " + unknown + " y", []),
        ("plain-text", "No tools needed: 2 < 3 and [a] {b}.", "No tools needed: 2 < 3 and [a] {b}.", []),
        ("cut-in-the-prefix", "Hm " + one[:3], "Hm " + one[:3], []),
    ]


ALL = [(name, *case) for name in sorted(SOURCES) for case in cases(name)]


@pytest.mark.parametrize("name,case,output,content,calls", ALL, ids=[f"{c[0]}-{c[1]}" for c in ALL])
def test_every_split_reads_the_same_calls(name, case, output, content, calls):
    parser = derived_parser_class(MARKUP[name])
    whole = run(parser, [output])
    assert whole == (content, calls)
    assert run(parser, list(output)) == whole
    rng = random.Random(f"{name}-{case}")
    for _ in range(40):
        assert run(parser, splits(output, rng)) == whole
    assert run(parser, [output], layered=True) == whole  # the server's default: lenient layers after it


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_a_malformed_call_stays_text(name):
    # The arguments are not JSON, or the XML head is not one: the block is not a call, and nothing of it is lost.
    # (An XML call, like MiniMax's or GLM's, streams from its head on: what breaks after it ends the call.)
    broken = {"fn": "<|fn|>get_weather\ncity=Oslo<|/fn|>", "call": '[[call]]{"name": "get_weather", city}[[/call]]',
              "xml": '<calls>\n<call get_weather>\n<arg name="city">Oslo</arg>\n</call>\n</calls>',
              "xml-newlines": "<invoke fn=get_weather city=Oslo></invoke>",
              "keyed-list": '<<calls>>[{"get_weather": city=Oslo}]<</calls>>'}[name]
    output = "Trying. " + broken + " Sorry."
    parser = derived_parser_class(MARKUP[name])
    assert run(parser, [output]) == run(parser, list(output)) == (output, [])


def test_arguments_stream_before_the_call_ends():
    parser = derived_parser_class(MARKUP["fn"])(TOOLS)
    output = write("fn", [("get_weather", {"city": "Oslo " * 300, "days": 2})])
    streamed = []
    for at in range(0, len(output) - 40, 7):
        streamed += [e for e in parser.feed([Text(output[at: at + 7])]) if hasattr(e, "text") and e.index == 0]
    assert len("".join(e.text for e in streamed)) > 1000


def test_a_template_that_renders_no_call_is_not_derived():
    plain = HEAD + TAIL  # it drops the calls
    assert derive_markup(renderer(plain)) is None
    assert detect_dialect(renderer(plain), plain).tool_parser == "json"


# -- over HTTP, at zero configuration ------------------------------------------------------------------------

ASK = "What is the weather in Oslo?"


@pytest.mark.parametrize("name", sorted(SOURCES))
async def test_a_derived_dialect_over_every_api(tmp_path, name):
    oslo = {"city": "Oslo ☀ \"Nord\"", "days": 3, "extra": {"units": ["°C", None]}}
    output = "Checking both.\n" + write(name, [("get_weather", oslo), ("add", {"a": 1, "b": 2})])
    family = Family(name, "", output, "", "Checking both.\n", [("get_weather", oslo), ("add", {"a": 1, "b": 2})])
    path = tmp_path / f"{name}.jinja"
    path.write_text(SOURCES[name])
    async with InProcessServer(tmp_path, [{"match": ASK, "output": output}], chat_template=str(path),
                               reasoning_field="reasoning_content") as server:
        card = (await server.client.get(f"/v1/models/{MODEL}")).json()["parsers"]
        assert card["tool_calls"] == "derived" and card["markup"] == MARKUP[name].describe()
        assert card["why"].startswith("derived from the template")
        await check_chat(server, family)
        await check_responses(server, family)
        await check_messages(server, family)


@pytest.mark.parametrize("name", ["fn", "call", "xml"])
async def test_a_derived_call_cut_at_every_token(tmp_path, name):
    from test_truncation_matrix import ASK as CALL_ASK, PREFACE, chat, messages, responses

    output = f"{PREFACE}\n" + write(name, [("get_weather", {"city": "Oslo", "days": 3})])
    path = tmp_path / f"{name}.jinja"
    path.write_text(SOURCES[name])
    async with InProcessServer(tmp_path, [{"match": CALL_ASK, "output": output}], chat_template=str(path)) as server:
        tokens = len(server.engine.tokenizer.encode(output))
        for budget in range(1, tokens + 1):
            for api in (chat, responses, messages):
                try:
                    await api(server, output, budget, budget == tokens)
                except AssertionError as failure:
                    raise AssertionError(f"{name}, {api.__name__}, cut at token {budget} of {tokens}") from failure


def test_describe_names_the_markup():
    assert json.loads(MARKUP["fn"].describe()) == "<|fn|>NAME\n{arguments}<|/fn|>"
