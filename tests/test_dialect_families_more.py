"""More families at zero configuration (issue 43), each with its real chat template (tests/data/templates, sources in
its README): the template selects the tool-call and reasoning parsers with no flag, the model's outputs come out
exactly on Chat, Responses and Messages (streamed = not), every split of an output into deltas gives the same
result, and a call cut at every token is never reported complete.

Apertus (swiss-ai): `<|tools_prefix|>[{"NAME": {arguments}}, …]<|tools_suffix|>`, thinking in
`<|inner_prefix|>…<|inner_suffix|>`. No parser of rostra knows the call format: it is derived from the template
(rostra/parsing/derive.py). Outputs as the template writes past turns and as vLLM's and SGLang's Apertus parser
tests have them (`<|tools_prefix|>[{"get_weather": {"location": "London"}}]<|tools_suffix|>`, several calls with
`, ` between them, text before and after).

OLMo 3 (Ai2): Python calls one per line in `<function_calls>…</function_calls>` (the olmo3 parser), no thinking in
the Instruct template; outputs as the template writes past calls and as vLLM's olmo3 parser tests have them."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest

from harness import MODEL, InProcessServer
from rostra.parsing.events import Reasoning, Text
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.reasoning.detect import detect_reasoning_parser
from rostra.parsing.tools.emitter import CallEmitter
from rostra.prompt.chat_template import ChatTemplate
from test_dialect_derived import renderer
from test_dialect_templates import ASK, Family, check_chat, check_messages, check_responses, tools_for
from test_truncation_matrix import answer, sse
from toolparse import TOOLS, fold_tool_calls, splits
from wire import fold_chat_stream

TEMPLATES = Path(__file__).parent / "data" / "templates"
OSLO = {"city": "Oslo ☀ \"Nord\"", "days": 3, "extra": {"units": ["°C", None]}}
OSLO_JSON = json.dumps(OSLO, ensure_ascii=False)
SUM = ("add", {"a": 1, "b": 2})

APERTUS = "Apertus-8B-Instruct.jinja"
OLMO = "allenai-Olmo-3.1-32B-Instruct.jinja"
AP_CALLS = f'<|tools_prefix|>[{{"get_weather": {OSLO_JSON}}}, {{"add": {{"a": 1, "b": 2}}}}]<|tools_suffix|>'

# (template, tool-call parser, reasoning parser, what `why` says)
DETECTED = {
    APERTUS: ("derived", "apertus", "derived from the template"),
    OLMO: ("olmo3", None, "the chat template renders a probe tool call that olmo3 reads back"),
}

FAMILIES = [
    Family("apertus-thinks-then-calls", APERTUS,
           "<|inner_prefix|>The user wants Oslo and a sum.<|inner_suffix|>Checking.\n" + AP_CALLS,
           "The user wants Oslo and a sum.", "Checking.\n", [("get_weather", OSLO), SUM]),
    # The template writes a turn's calls inside its open thoughts: the section ends the thinking.
    Family("apertus-section-inside-the-thinking", APERTUS,
           "<|inner_prefix|>The user wants Oslo and a sum." + AP_CALLS, "The user wants Oslo and a sum.", "",
           [("get_weather", OSLO), SUM]),
    Family("apertus-no-thinking", APERTUS, f'<|tools_prefix|>[{{"get_weather": {OSLO_JSON}}}]<|tools_suffix|>', "",
           "", [("get_weather", OSLO)]),
    Family("apertus-text-around", APERTUS, "before" + AP_CALLS + "after", "", "beforeafter",
           [("get_weather", OSLO), SUM]),
    Family("apertus-malformed-call-stays-text", APERTUS,
           '<|inner_prefix|>hm<|inner_suffix|><|tools_prefix|>[{"get_weather": city=Oslo}]<|tools_suffix|> Sorry.',
           "hm", '<|tools_prefix|>[{"get_weather": city=Oslo}]<|tools_suffix|> Sorry.'),
    Family("apertus-unknown-tool-stays-text", APERTUS,
           '<|tools_prefix|>[{"launch": {"target": "moon"}}]<|tools_suffix|>', "",
           '<|tools_prefix|>[{"launch": {"target": "moon"}}]<|tools_suffix|>'),
    Family("olmo3-calls", OLMO, f"Checking both.<function_calls>get_weather(city={json.dumps(OSLO['city'])}, days=3, "
           "extra={'units': ['°C', None]})\nadd(a=1, b=2)</function_calls>", "", "Checking both.",
           [("get_weather", OSLO), SUM]),
    Family("olmo3-malformed-call-stays-text", OLMO, "<function_calls>get_weather city=Oslo</function_calls> Sorry.",
           "", "<function_calls>get_weather city=Oslo</function_calls> Sorry."),
]


def source(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(DETECTED))
async def test_the_real_template_selects_the_parsers(tmp_path, name):
    tool_parser, reasoning, why = DETECTED[name]
    async with InProcessServer(tmp_path, [], chat_template=str(TEMPLATES / name)) as server:
        card = (await server.client.get(f"/v1/models/{MODEL}")).json()["parsers"]
    assert (card["tool_calls"], card["reasoning"]) == (tool_parser, reasoning), card
    assert card["why"].startswith(why)
    assert detect_reasoning_parser(source(name))[0] == reasoning


@functools.lru_cache(maxsize=None)
def detected(name: str):
    """The template and the parsers a server picks for it with no flag."""
    from rostra.config import Settings
    from rostra.models.bundle import chosen_parsers

    template = ChatTemplate(source(name))
    return template, chosen_parsers(template, Settings(), False)


def run_chain(family: Family, pieces: list[str]):
    """The server's pipeline as detected: the reasoning parser, the derived or registered tool parser, the
    emitter; (thinking, content, calls)."""
    from rostra.parsing.tools import tool_parser_class
    from rostra.parsing.tools.derived import derived_parser_class

    template, found = detected(family.template)
    prompt = template.render([{"role": "user", "content": ASK}], tools=tools_for("chat"), **family.variables)
    thinker = reasoning_parser_class(found.reasoning_parser)(prompt) if found.reasoning_parser else None
    caller = (derived_parser_class(found.derived) if found.derived else tool_parser_class(found.tool_parser))(TOOLS)
    emitter, events = CallEmitter(TOOLS), []
    for piece in pieces:
        text = thinker.feed([Text(piece)]) if thinker else [Text(piece)]
        events += emitter.feed(caller.feed(text))
    events += emitter.feed(caller.feed(thinker.finish() if thinker else []) + caller.finish()) + emitter.finish()
    thought = "".join(e.text for e in events if isinstance(e, Reasoning))
    content = "".join(e.text for e in events if isinstance(e, Text))
    return thought, content, fold_tool_calls(events)[0]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
def test_every_split_gives_the_same_result(family):
    whole = run_chain(family, [family.output])
    assert whole == (family.reasoning, family.content, family.calls)
    assert run_chain(family, list(family.output)) == whole
    rng = random.Random(family.id)
    for _ in range(40):
        assert run_chain(family, splits(family.output, rng)) == whole


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.id)
async def test_a_real_output_through_every_api_with_no_parser_flag(tmp_path, family):
    script = [{"match": "weather in Oslo", "output": family.output}]
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / family.template),
                               reasoning_field="reasoning_content") as server:
        await check_chat(server, family)
        await check_responses(server, family)
        await check_messages(server, family)


# Each family's thinking end, and its markup: none of it may reach the content, however the output is cut.
THINKING_ENDS = {APERTUS: ("<|inner_suffix|>", "<|tools_prefix|>"), OLMO: ("",)}
MARKUP = {APERTUS: ("<|inner_prefix|>", "<|inner_suffix|>", "<|tools_prefix|>", "<|tools_suffix|>", '[{"get_weather"'),
          OLMO: ("<function_calls>", "</function_calls>", "get_weather(")}


@pytest.mark.parametrize("family", [f for f in FAMILIES if "stays-text" not in f.id], ids=lambda f: f.id)
async def test_an_output_cut_at_every_token_folds_and_leaks_no_markup(tmp_path, family):
    """max_tokens at every token: streamed = not streamed, the thinking a prefix of the thinking, no markup in the
    content, and `length` until the whole output fits."""
    script = [{"match": "weather in Oslo", "output": family.output}]
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / family.template),
                               reasoning_field="reasoning_content") as server:
        tokens = len(server.engine.tokenizer.encode(family.output))
        for budget in range(1, tokens + 1):
            body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "tools": tools_for("chat"),
                    "max_tokens": budget}
            choice = (await answer(server, "/v1/chat/completions", body))["choices"][0]
            folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
            message, where = choice["message"], f"{family.id}, cut at token {budget} of {tokens}"
            assert (folded["content"], folded["reasoning"], folded["finish_reason"]) == (
                message["content"] or "", message.get("reasoning_content") or "", choice["finish_reason"]), where
            ends = THINKING_ENDS[family.template]
            assert any((family.reasoning + end).startswith(folded["reasoning"]) for end in ends), where
            assert not any(marker in folded["content"] for marker in MARKUP[family.template]), where
            assert choice["finish_reason"] == ("length" if budget < tokens else
                                               "tool_calls" if family.calls else "stop"), where


# The truncation matrix (tests/test_truncation_matrix.py) for each family's call, on its real template.
MATRIX = {APERTUS: '<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 3}}]<|tools_suffix|>',
          OLMO: '<function_calls>get_weather(city="Oslo", days=3)</function_calls>'}


@pytest.mark.parametrize("name", sorted(MATRIX))
async def test_a_call_cut_at_every_token_is_never_reported_complete(tmp_path, name):
    from test_truncation_matrix import ASK as CALL_ASK, PREFACE, chat, messages, responses

    output = f"{PREFACE}\n{MATRIX[name]}"
    async with InProcessServer(tmp_path, [{"match": CALL_ASK, "output": output}],
                               chat_template=str(TEMPLATES / name)) as server:
        tokens = len(server.engine.tokenizer.encode(output))
        for budget in range(1, tokens + 1):
            for api in (chat, responses, messages):
                try:
                    await api(server, output, budget, budget == tokens)
                except AssertionError as failure:
                    raise AssertionError(f"{name}, {api.__name__}, cut at token {budget} of {tokens}") from failure


def test_apertus_derivation_reads_the_template_as_written():
    from rostra.parsing.derive import derive_markup

    markup = derive_markup(renderer(source(APERTUS)))
    assert markup is not None
    assert (markup.section_start, markup.prefix, markup.name_sep, markup.suffix, markup.separator,
            markup.section_end) == ("<|tools_prefix|>[", '{"', '": ', "}", ",", "]<|tools_suffix|>")


def test_a_template_that_reads_a_tools_fields_at_the_top_renders():
    # Apertus's template writes `"// " + tool.description`: the OpenAI shape fails there, so the tools go in flat.
    template = ChatTemplate("{% for tool in tools %}{{ '// ' + tool.description + ' (' + tool.name + ')' }}{% endfor %}")
    rendered = template.render([{"role": "user", "content": "hi"}], tools=tools_for("chat"))
    assert rendered == "// The weather in a city. (get_weather)// Add two numbers. (add)"
    plain = ChatTemplate("{% for tool in tools %}{{ tool | tojson }}{% endfor %}")  # it reads the OpenAI shape
    assert json.loads(plain.render([], tools=tools_for("chat")[:1])) == tools_for("chat")[0]
