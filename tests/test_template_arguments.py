"""A past call's arguments as the real templates need them (issue 43). rostra hands a template a call's arguments
as a mapping (most templates write `arguments | tojson` or loop over `arguments.items()`); some are written for the
JSON text a client sends: Functionary v3.1 / v3.2 and DeepSeek R1 concatenate it (`'>' + arguments`, a TypeError on
a mapping: they rendered no history with a tool call before), InternLM2's tool template prints it
(`arguments | string`, which wrote a Python dict). Each real template now writes the arguments as JSON, and a
second turn after a tool call is served."""

import json
from pathlib import Path

import pytest

from harness import MODEL, InProcessServer
from rostra.prompt.chat_template import ChatTemplate

TEMPLATES = Path(__file__).parent / "data" / "templates"
ARGUMENTS = {"city": "Zürich \"Nord\"", "days": 3, "extra": {"units": ["°C", None]}}
JSON = json.dumps(ARGUMENTS, ensure_ascii=False)
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
HISTORY = [{"role": "user", "content": "Weather in Zürich?"},
           {"role": "assistant", "content": "", "tool_calls": [
               {"id": "call0abc1", "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}]},
           {"role": "tool", "tool_call_id": "call0abc1", "name": "get_weather", "content": "Sunny, 21 degrees"}]


@pytest.mark.parametrize("file,written", [
    ("meetkai-functionary-medium-v3.1.jinja", f"<function=get_weather>{JSON}</function>"),  # concatenates
    ("meetkai-functionary-medium-v3.2.jinja", f">>>get_weather\n{JSON}"),  # concatenates
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", f"get_weather\n```json\n{JSON}\n```"),  # concatenates
    ("vllm-tool_chat_template_internlm2_tool.jinja", f'{{"name": "get_weather", "arguments": {JSON}}}'),  # | string
    ("vllm-tool_chat_template_hunyuan_a13b.jinja", f'"arguments": {JSON}}}'),  # | tojson, as before
    ("GLM-4.6.jinja", "<arg_key>days</arg_key>\n<arg_value>3</arg_value>"),  # .items(), as before
])
def test_a_template_writes_past_arguments_as_json(file, written):
    template = ChatTemplate((TEMPLATES / file).read_text(encoding="utf-8"), "<s>", "</s>")
    assert written in template.render(HISTORY, tools=[TOOL])


def test_the_caller_s_messages_are_left_as_they_were():
    template = ChatTemplate((TEMPLATES / "meetkai-functionary-medium-v3.2.jinja").read_text(), "<s>", "</s>")
    template.render(HISTORY, tools=[TOOL])
    assert type(HISTORY[1]["tool_calls"][0]["function"]["arguments"]) is dict


async def test_a_second_turn_after_a_call_is_served(tmp_path):
    # Before, Functionary's template failed on the history (a 400); now the turn after the tool's result is served.
    script = [{"match": "Sunny", "output": "all\nIt is sunny in Zürich."}]
    body = {"model": MODEL, "tools": [TOOL], "messages": [
        HISTORY[0], {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call0abc1", "type": "function", "function": {"name": "get_weather", "arguments": JSON}}]},
        HISTORY[2]]}
    async with InProcessServer(tmp_path, script,
                               chat_template=str(TEMPLATES / "meetkai-functionary-medium-v3.2.jinja")) as server:
        response = await server.client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "It is sunny in Zürich."
