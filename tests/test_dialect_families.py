"""GLM-4.5, MiniMax-M2 and Seed-OSS end to end through their parsers: the reasoning parser and then the tool
parser the chat template selects, on outputs in the models' shapes (thinking, then text and calls), whole, one
character at a time and under random splits; every split gives the non-streamed result. The prompt each output
follows is the real template's own generation prompt (tests/data/templates)."""

import random
from pathlib import Path

import pytest

from rostra.parsing.events import Reasoning, Text
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools import tool_parser_class
from rostra.parsing.tools.emitter import CallEmitter
from rostra.prompt.chat_template import ChatTemplate
from toolparse import TOOLS, fold_tool_calls, run_reasoning_parser, splits

TEMPLATES = Path(__file__).parent / "data" / "templates"
OSLO = ("get_weather", {"city": "Oslo", "days": 3})
BERGEN = ("get_weather", {"city": "Bergen", "days": 1})


def generation_prompt(template_file: str, **variables) -> str:
    template = ChatTemplate((TEMPLATES / template_file).read_text())
    return template.render([{"role": "user", "content": "Weather in Oslo?"}], add_generation_prompt=True,
                           **variables)


def run_chain(tool_parser: str, reasoning: str, prompt: str, pieces: list[str]):
    thinker = reasoning_parser_class(reasoning)(prompt)
    caller, emitter = tool_parser_class(tool_parser)(TOOLS), CallEmitter(TOOLS)
    events = []
    for piece in pieces:
        events += emitter.feed(caller.feed(thinker.feed([Text(piece)])))
    events += emitter.feed(caller.feed(thinker.finish()) + caller.finish()) + emitter.finish()
    thought = "".join(e.text for e in events if isinstance(e, Reasoning))
    content = "".join(e.text for e in events if isinstance(e, Text))
    return thought, content, fold_tool_calls(events)[0]


GLM_CALLS = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n"
             "<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
             "<arg_value>Bergen</arg_value>\n<arg_key>days</arg_key>\n<arg_value>1</arg_value>\n</tool_call>")
MINIMAX_CALLS = ('<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
                 '<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_weather">\n'
                 '<parameter name="city">Bergen</parameter>\n<parameter name="days">1</parameter>\n</invoke>\n'
                 '</minimax:tool_call>')
SEED_CALLS = ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n<parameter=days>3"
              "</parameter>\n</function>\n</seed:tool_call><seed:tool_call>\n<function=get_weather>\n"
              "<parameter=city>Bergen</parameter>\n<parameter=days>1</parameter>\n</function>\n</seed:tool_call>")

# (id, template, tool parser, reasoning parser, template variables, output, thinking, content, calls)
CASES = [
    ("glm-thinks-then-calls", "GLM-4.6.jinja", "glm45", "glm45", {},
     "\n<think>Two cities: Oslo, then Bergen. 日本</think>\nI'll check both.\n" + GLM_CALLS,
     "Two cities: Oslo, then Bergen. 日本", "I'll check both.\n\n", [OSLO, BERGEN]),  # (the newline between calls)
    ("glm-thinking-off", "GLM-4.6.jinja", "glm45", "glm45", {"enable_thinking": False},
     "Checking.\n" + GLM_CALLS, "", "Checking.\n\n", [OSLO, BERGEN]),
    ("glm-malformed-call-stays-text", "GLM-4.6.jinja", "glm45", "glm45", {},
     "<think>hm</think>Calling <tool_call>launch\n<arg_key>t</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
     "hm", "Calling <tool_call>launch\n<arg_key>t</arg_key>\n<arg_value>x</arg_value>\n</tool_call>", []),
    # MiniMax-M2's prompt opens <think>: the thinking, kept in the content (the default), or split out.
    ("minimax-append-think", "unsloth-MiniMax-M2.jinja", "minimax_m2", "minimax_m2_append_think", {},
     "Two cities.\n</think>\n\nChecking both.\n" + MINIMAX_CALLS,
     "", "<think>\nTwo cities.\n</think>\n\nChecking both.\n", [OSLO, BERGEN]),
    ("minimax-split", "unsloth-MiniMax-M2.jinja", "minimax_m2", "minimax_m2", {},
     "Two cities.\n</think>\n\nChecking both.\n" + MINIMAX_CALLS, "Two cities.\n", "Checking both.\n",
     [OSLO, BERGEN]),
    ("seed-thinks-then-calls", "ByteDance-Seed-OSS.jinja", "seed_oss", "seed_oss", {},
     "<seed:think>Oslo and Bergen.<seed:cot_budget_reflect>used 10</seed:cot_budget_reflect></seed:think>"
     "Checking.\n" + SEED_CALLS,
     "Oslo and Bergen.<seed:cot_budget_reflect>used 10</seed:cot_budget_reflect>", "Checking.\n", [OSLO, BERGEN]),
    ("seed-no-thinking", "ByteDance-Seed-OSS.jinja", "seed_oss", "seed_oss", {}, SEED_CALLS, "", "", [OSLO, BERGEN]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_family_output(case):
    name, template, tool_parser, reasoning, variables, output, thought, content, calls = case
    prompt = generation_prompt(template, **variables)
    whole = run_chain(tool_parser, reasoning, prompt, [output])
    assert whole == (thought, content, calls)
    assert run_chain(tool_parser, reasoning, prompt, list(output)) == whole
    rng = random.Random(name)
    for _ in range(60):
        assert run_chain(tool_parser, reasoning, prompt, splits(output, rng)) == whole


@pytest.mark.parametrize("name,prompt,output,thought,answer", [
    ("glm45", "<|assistant|>", "\n<think>hm</think>\nok", "hm", "ok"),
    ("glm45", "<|assistant|>\n<think></think>", "ok", "", "ok"),
    ("seed_oss", "<seed:bos>assistant\n", "<seed:think>a < b</seed:think>ok", "a < b", "ok"),
    ("seed_oss", "<seed:bos>assistant\n", "no thinking", "", "no thinking"),
    ("seed_oss", "<seed:bos>assistant\n", "<seed:think>cut off", "cut off", ""),
    ("minimax_m2", "]~b]ai\n<think>\n", "plan\n</think>\n\nHi!", "plan\n", "Hi!"),
    ("minimax_m2", "]~b]ai\n<think>\n", "cut off", "cut off", ""),
    ("minimax_m2_append_think", "]~b]ai\n<think>\n", "plan\n</think>\n\nHi!", "", "<think>\nplan\n</think>\n\nHi!"),
    ("minimax_m2_append_think", "]~b]ai\n", "Hi!", "", "Hi!"),
])
def test_family_reasoning(name, prompt, output, thought, answer):
    results = {run_reasoning_parser(reasoning_parser_class(name)(prompt), pieces)[:2]
               for pieces in ([output], list(output))}
    assert results == {(thought, answer)}


def test_append_think_is_never_in_reasoning():
    # Token accounting and think-first constraints ask the parser whether it is thinking: never, here.
    parser = reasoning_parser_class("minimax_m2_append_think")("]~b]ai\n<think>\n")
    parser.feed([Text("plan")])
    assert parser.in_reasoning is False
