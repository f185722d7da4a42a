"""gpt-oss under a constraint: its analysis channel first, then the constrained answer or call in harmony's
channels (rostra/serving/harmony_answer.py), on the scripted engine made to enforce constraints as llama.cpp,
transformers and vLLM do.

The model is recognised from its real chat template (tests/data/templates/openai-gpt-oss-120b.jinja: llama.cpp's
models/templates copy of openai/gpt-oss-120b's, kept in the ye-NX/llama.cpp mirror at b354d7c9), beside the
embedded vocabulary with harmony's special tokens (tests/gpt_oss_tokenizer.py). The outputs are gpt-oss's as
OpenAI's harmony guide writes them: `<|channel|>analysis<|message|>…<|end|>`, then
`<|start|>assistant<|channel|>final<|message|>…<|return|>` or
`<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`. The engine
records each generation it is asked for; a script line that obeys the constraint stands for the constrained part.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpt_oss_tokenizer import gpt_oss_tokenizer
from harness import MODEL, InProcessServer
from test_think_first import CITY, CITY_FORMAT, Recording
from test_truncation_matrix import answer, fold_message, sse, without_ids
from wire import check, fold_chat_stream

TEMPLATE = Path(__file__).parent / "data" / "templates" / "openai-gpt-oss-120b.jinja"
ANALYSIS = "<|channel|>analysis<|message|>"
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
TIME = {"name": "get_time", "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SCRIPT = [
    # Free, the model would answer outside the schema: only its analysis is kept.
    {"match": "Name a city", "output": f"{ANALYSIS}The user wants a city. Paris is one.<|end|>"
                                       "<|start|>assistant<|channel|>final<|message|>Paris, of course!<|return|>"},
    {"match": "Name a city", "output": '{"city": "Paris"}'},
    {"match": "Ponder", "output": ANALYSIS + "I keep thinking about it. " * 40},
    {"match": "Ponder", "output": '{"city": "Oslo"}'},
    {"match": "Quick", "output": "<|channel|>final<|message|>Rome!<|return|>"},  # no analysis at all
    {"match": "Quick", "output": '{"city": "Rome"}'},
    {"match": "Weather", "output": f"{ANALYSIS}Need the weather tool.<|end|><|start|>assistant<|channel|>final"
                                   "<|message|>I cannot look that up.<|return|>"},
    {"match": "Weather", "output": "get_weather"},  # the name, where the model chooses among several tools
    {"match": "Weather", "output": '{"city": "Oslo"}'},
]


@pytest.fixture
def gpt_oss_directory(tmp_path) -> Path:
    """A checkpoint's tokenizer directory whose only sign of gpt-oss is its real chat template."""
    directory = tmp_path / "gpt-oss"
    directory.mkdir()
    shutil.copy(gpt_oss_tokenizer(), directory / "tokenizer.json")
    shutil.copy(TEMPLATE, directory / "chat_template.jinja")
    return directory


def server_for(tmp_path: Path, directory: Path) -> InProcessServer:
    return InProcessServer(tmp_path, SCRIPT, tokenizer=str(directory / "tokenizer.json"))


def chat(content: str, **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0, **extra}


async def both(server: InProcessServer, body: dict) -> dict:
    """The whole answer, checked against the stream as a client folds it."""
    whole = check("chat", await answer(server, "/v1/chat/completions", body))
    folded = fold_chat_stream(await sse(server, "/v1/chat/completions", body))[0]
    message = whole["choices"][0]["message"]
    assert (folded["reasoning"], folded["content"]) == (message.get("reasoning_content") or "",
                                                        message["content"] or "")
    assert [(c["name"], c["arguments"]) for c in folded["tool_calls"]] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return whole


def written_after(server: InProcessServer, prompt: list[int], continued: list[int]) -> str:
    assert continued[: len(prompt)] == prompt
    return "".join(server.engine.token_bytes(token).decode() for token in continued[len(prompt):])


def function_tools(*tools: dict) -> list[dict]:
    return [{"type": "function", "function": tool} for tool in tools]


async def test_the_analysis_comes_first_then_the_final_answer_in_schema(tmp_path, gpt_oss_directory):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"] == "The user wants a city. Paris is one."
        assert json.loads(message["content"]) == {"city": "Paris"}
        (prompt, free), (continued, constrained) = engine.calls[:2]
        assert free.json_schema is None and constrained.json_schema == CITY
        assert written_after(server, prompt, continued) == (
            f"{ANALYSIS}The user wants a city. Paris is one.<|end|><|start|>assistant<|channel|>final<|message|>")
        assert whole["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


async def test_an_analysis_that_runs_too_long_is_closed_for_the_model(tmp_path, gpt_oss_directory):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Ponder a city.", response_format=CITY_FORMAT, max_tokens=60))
        message = whole["choices"][0]["message"]
        assert message["reasoning_content"].startswith("I keep thinking about it.")
        assert json.loads(message["content"]) == {"city": "Oslo"}
        (prompt, free), (continued, _) = engine.calls[:2]
        assert free.max_tokens == 45 - 1  # three quarters of the budget, less <|end|> (one token)
        assert written_after(server, prompt, continued).endswith(
            "about it<|end|><|start|>assistant<|channel|>final<|message|>")
        assert whole["usage"]["completion_tokens"] <= 60


async def test_a_model_that_skips_its_analysis_gets_the_final_header_written(tmp_path, gpt_oss_directory):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Quick, a city.", response_format=CITY_FORMAT, max_tokens=100))
        message = whole["choices"][0]["message"]
        assert "reasoning_content" not in message and json.loads(message["content"]) == {"city": "Rome"}
        (prompt, _), (continued, _) = engine.calls[:2]
        assert written_after(server, prompt, continued) == "<|channel|>final<|message|>"  # the prompt has the start


@pytest.mark.parametrize("tools,choice", [
    ((WEATHER,), {"type": "function", "function": {"name": "get_weather"}}),
    ((WEATHER,), "required"),
    ((TIME, WEATHER), "required"),  # the model chooses the name, constrained to the tools'
])
async def test_a_forced_call_comes_after_the_analysis_in_its_commentary_header(tmp_path, gpt_oss_directory,
                                                                               tools, choice):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        engine = Recording(server.engine)
        whole = await both(server, chat("Weather in Oslo?", tools=function_tools(*tools), tool_choice=choice,
                                        max_tokens=200))
        choice_out = whole["choices"][0]
        assert choice_out["message"]["reasoning_content"] == "Need the weather tool."
        assert choice_out["finish_reason"] == "tool_calls" and not choice_out["message"]["content"]
        (call,) = choice_out["message"]["tool_calls"]
        assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("get_weather", {"city": "Oslo"})
        prompt, continued, arguments = engine.calls[0][0], engine.calls[-1][0], engine.calls[-1][1]
        assert written_after(server, prompt, continued).endswith(
            "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>")
        assert arguments.json_schema["properties"] == WEATHER["parameters"]["properties"]
        if len(tools) > 1:  # free, the name, the arguments
            assert engine.calls[1][1].grammar == 'root ::= "get_time" | "get_weather"'


async def test_responses_text_format_after_the_analysis(tmp_path, gpt_oss_directory):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        Recording(server.engine)
        body = {"model": MODEL, "input": "Name a city.", "max_output_tokens": 200, "store": False,
                "text": {"format": {"type": "json_schema", "name": "city", "schema": CITY}}}
        response = await answer(server, "/v1/responses", body)
        events = await sse(server, "/v1/responses", body)
        assert without_ids(events[-1]["response"]) == without_ids(response)
        kinds = [item["type"] for item in response["output"]]
        assert kinds == ["reasoning", "message"], response
        assert response["output"][0]["content"][0]["text"] == "The user wants a city. Paris is one."
        assert json.loads(response["output"][1]["content"][0]["text"]) == {"city": "Paris"}


async def test_responses_forced_function_after_the_analysis(tmp_path, gpt_oss_directory):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        Recording(server.engine)
        body = {"model": MODEL, "input": "Weather in Oslo?", "store": False, "max_output_tokens": 200,
                "tools": [{"type": "function", **WEATHER}, {"type": "function", **TIME}], "tool_choice": "required"}
        response = await answer(server, "/v1/responses", body)
        events = await sse(server, "/v1/responses", body)
        assert without_ids(events[-1]["response"]) == without_ids(response)
        calls = [(item["name"], json.loads(item["arguments"])) for item in response["output"]
                 if item["type"] == "function_call"]
        assert [item["type"] for item in response["output"]][0] == "reasoning"
        assert calls == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("choice", [{"type": "tool", "name": "get_weather"}, {"type": "any"}])
async def test_messages_forced_tool_after_the_analysis(tmp_path, gpt_oss_directory, choice):
    async with server_for(tmp_path, gpt_oss_directory) as server:
        Recording(server.engine)
        tools = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                 for t in (WEATHER, TIME)]
        body = {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": "Weather in Oslo?"}],
                "tools": tools, "tool_choice": choice}
        message = await answer(server, "/v1/messages", body)
        folded = fold_message(await sse(server, "/v1/messages", body))
        assert [block["type"] for block in folded["content"]] == [block["type"] for block in message["content"]]
        thinking = [block["thinking"] for block in message["content"] if block["type"] == "thinking"]
        uses = [(block["name"], block["input"]) for block in message["content"] if block["type"] == "tool_use"]
        assert (thinking, uses) == (["Need the weather tool."], [("get_weather", {"city": "Oslo"})])
        assert message["stop_reason"] == "tool_use"


async def test_one_scripted_line_gives_the_analysis_and_the_constrained_body(tmp_path, gpt_oss_directory):
    """A line whose final message obeys the schema stands for both parts: its analysis free, its body constrained."""
    script = [{"match": "Name a city", "output": f"{ANALYSIS}A city as JSON.<|end|><|start|>assistant<|channel|>"
                                                 'final<|message|>{"city": "Paris"}<|return|>'}]
    async with InProcessServer(tmp_path, script, tokenizer=str(gpt_oss_directory / "tokenizer.json")) as server:
        Recording(server.engine)
        whole = await both(server, chat("Name a city.", response_format=CITY_FORMAT, max_tokens=200))
        message = whole["choices"][0]["message"]
        assert (message["reasoning_content"], json.loads(message["content"])) == ("A city as JSON.", {"city": "Paris"})
