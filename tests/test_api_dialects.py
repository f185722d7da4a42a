"""GLM-4.5, MiniMax-M2 and Seed-OSS over HTTP at zero configuration: the scripted engine stands in for the model,
the server runs with the family's real chat template (tests/data/templates) and no --tool-call-parser or
--reasoning-parser, and Chat, Responses and Messages answer with the model's calls and thinking, streamed and
not (each stream folds to its non-streamed answer). /v1/models says which parsers were chosen and why."""

import json
from pathlib import Path

import pytest

from harness import MODEL, InProcessServer
from test_truncation_matrix import answer, fold_message, sse, without_ids
from wire import fold_chat_stream

TEMPLATES = Path(__file__).parent / "data" / "templates"
ASK = "What is the weather in Zürich and in Oslo?"
TOOL = {"name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}
CALLS = [{"city": "Zürich \"Nord\"", "days": 3}, {"city": "Oslo", "days": 1}]

GLM = ("\n<think>Two cities, two calls.</think>\nChecking both.\n"
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich \"Nord\"</arg_value>\n<arg_key>days</arg_key>\n"
       "<arg_value>3</arg_value>\n</tool_call>"
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value><arg_key>days</arg_key>"
       "<arg_value>1</arg_value></tool_call>")
# MiniMax-M2's generation prompt opened <think>: its output starts inside the thinking.
MINIMAX = ("Two cities, two calls.\n</think>\n\nChecking both.\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
           "<parameter name=\"city\">Zürich \"Nord\"</parameter>\n<parameter name=\"days\">3</parameter>\n</invoke>\n"
           "<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo</parameter>\n<parameter name=\"days\">1"
           "</parameter>\n</invoke>\n</minimax:tool_call>")
SEED = ("<seed:think>Two cities, two calls.</seed:think>Checking both.\n<seed:tool_call>\n<function=get_weather>\n"
        "<parameter=city>Zürich \"Nord\"</parameter>\n<parameter=days>3</parameter>\n</function>\n</seed:tool_call>"
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n<parameter=days>1</parameter>\n"
        "</function>\n</seed:tool_call>")

# (template, output, tool parser, reasoning parser, the thinking, the content)
FAMILIES = {
    "glm45": ("GLM-4.6.jinja", GLM, "glm45", "Two cities, two calls.", "Checking both.\n"),
    "minimax_m2": ("unsloth-MiniMax-M2.jinja", MINIMAX, "minimax_m2_append_think", None,
                   "<think>\nTwo cities, two calls.\n</think>\n\nChecking both.\n"),
    "seed_oss": ("ByteDance-Seed-OSS.jinja", SEED, "seed_oss", "Two cities, two calls.", "Checking both.\n"),
}

# Issue 43, second round: Command R7B (thinking, then its action list), Functionary v3.1 and v3.2 (whose prompt ends
# with `>>>`: the output starts with its recipient).
COMMAND_R = ('<|START_THINKING|>Two cities, two calls.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", '
             '"tool_name": "get_weather", "parameters": {"city": "Zürich \\"Nord\\"", "days": 3}},\n    '
             '{"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city": "Oslo", "days": 1}}\n]'
             "<|END_ACTION|>")
FUNCTIONARY_V31 = ('Checking both.\n<function=get_weather>{"city": "Zürich \\"Nord\\"", "days": 3}</function>'
                   '<function=get_weather>{"city": "Oslo", "days": 1}</function>')
FUNCTIONARY_V32 = ('all\nChecking both.\n>>>get_weather\n{"city": "Zürich \\"Nord\\"", "days": 3}>>>get_weather\n'
                   '{"city": "Oslo", "days": 1}')
HUNYUAN = ('<think>\nTwo cities, two calls.\n</think>\n<answer>\nChecking both.\n<tool_calls>[{"name": "get_weather", '
           '"arguments": {"city": "Zürich \\"Nord\\"", "days": 3}}, {"name": "get_weather", "arguments": {"city": "Oslo", '
           '"days": 1}}]</tool_calls>\n</answer>')
INTERNLM2 = ('Checking both.\n<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": '
             '"Zürich \\"Nord\\"", "days": 3}}<|action_end|><|action_start|><|plugin|>\n{"name": "get_weather", '
             '"parameters": {"city": "Oslo", "days": 1}}<|action_end|>')
XLAM = ('[{"name": "get_weather", "arguments": {"city": "Zürich \\"Nord\\"", "days": 3}}, {"name": "get_weather", '
        '"arguments": {"city": "Oslo", "days": 1}}]')
FAMILIES.update({
    "xlam": ("vllm-tool_chat_template_xlam_llama.jinja", XLAM, None, None, ""),
    "internlm2": ("vllm-tool_chat_template_internlm2_tool.jinja", INTERNLM2, None, None, "Checking both.\n"),
    "hunyuan_a13b": ("vllm-tool_chat_template_hunyuan_a13b.jinja", HUNYUAN, "hunyuan_a13b",
                     "\nTwo cities, two calls.\n", "Checking both.\n"),
    "command_r": ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", COMMAND_R, "command_r",
                  "Two cities, two calls.", ""),
    "functionary_v31": ("meetkai-functionary-medium-v3.1.jinja", FUNCTIONARY_V31, None, None, "Checking both.\n"),
    "functionary_v32": ("meetkai-functionary-medium-v3.2.jinja", FUNCTIONARY_V32, None, None, "Checking both.\n"),
})


async def check_chat(server: InProcessServer, thinking: str | None, content: str) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "tools": [{"type": "function",
                                                                                       "function": TOOL}]}
    whole = (await answer(server, "/v1/chat/completions", body))["choices"][0]
    message = whole["message"]
    assert whole["finish_reason"] == "tool_calls"
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == CALLS
    assert message.get("reasoning_content") == thinking and (message["content"] or "") == content
    folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
    assert (folded["reasoning"], folded["content"], folded["finish_reason"]) == (thinking or "", content, "tool_calls")
    assert [(c["name"], c["arguments"]) for c in folded["tool_calls"]] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]


async def check_responses(server: InProcessServer, thinking: str | None) -> None:
    body = {"model": MODEL, "input": ASK, "store": False, "tools": [{"type": "function", **TOOL}]}
    response = await answer(server, "/v1/responses", body)
    events = await sse(server, "/v1/responses", body)
    assert without_ids(events[-1]["response"]) == without_ids(response)
    assert [json.loads(i["arguments"]) for i in response["output"] if i["type"] == "function_call"] == CALLS
    assert any(i["type"] == "reasoning" for i in response["output"]) is (thinking is not None)


async def check_messages(server: InProcessServer, thinking: str | None) -> None:
    body = {"model": MODEL, "max_tokens": 500, "messages": [{"role": "user", "content": ASK}],
            "tools": [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]}
    message = await answer(server, "/v1/messages", body)
    folded = fold_message(await sse(server, "/v1/messages", body))
    message.pop("usage"), folded.pop("usage", None)
    for block in message["content"] + folded["content"]:
        block.pop("signature", None)  # a thinking block's signature is new on every answer
    assert without_ids(folded) == without_ids({k: v for k, v in message.items() if v is not None})
    assert message["stop_reason"] == "tool_use"
    assert [b["input"] for b in message["content"] if b["type"] == "tool_use"] == CALLS
    assert [b["thinking"] for b in message["content"] if b["type"] == "thinking"] == ([thinking] if thinking else [])


@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_a_family_works_at_zero_configuration(tmp_path, family):
    template, output, reasoning, thinking, content = FAMILIES[family]
    script = [{"match": ASK, "output": output}]
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / template)) as server:
        card = (await server.client.get(f"/v1/models/{MODEL}")).json()
        assert card["parsers"]["tool_calls"] == family and card["parsers"]["reasoning"] == reasoning
        assert "reads back" in card["parsers"]["why"]
        await check_chat(server, thinking, content)
        await check_responses(server, thinking)
        await check_messages(server, thinking)


async def test_a_malformed_call_stays_text_and_the_stream_ends(tmp_path):
    # GLM: a call to a tool the request does not have, then a good one. The first stays text (logged), the
    # second is a call, and the stream ends properly with the same answer as the non-streamed one.
    bad = "<tool_call>launch_rocket\n<arg_key>target</arg_key>\n<arg_value>moon</arg_value>\n</tool_call>"
    good = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
    script = [{"match": ASK, "output": "<think>hm</think>" + bad + good}]
    body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}],
            "tools": [{"type": "function", "function": TOOL}]}
    async with InProcessServer(tmp_path, script, chat_template=str(TEMPLATES / "GLM-4.6.jinja")) as server:
        message = (await answer(server, "/v1/chat/completions", body))["choices"][0]["message"]
        assert message["content"] == bad
        assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Oslo"}]
        folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
        assert (folded["content"], folded["finish_reason"], len(folded["tool_calls"])) == (bad, "tool_calls", 1)
