"""The OpenAI Agents SDK's tool loop against `rostra serve`, unmodified: an agent with a function tool,
on the Chat Completions model and on the Responses model, with `Runner.run` and `Runner.run_streamed`.

The scripted model (tests/data/tools.jsonl, hermes format: `<tool_call>\\n{"name", "arguments"}\\n</tool_call>`
as Qwen2.5 and Hermes models write it) calls get_weather for "weather in Oslo"; the SDK runs the tool and
sends its result; the model answers from it ("sunny" in a tool message).
"""

import asyncio

import pytest
from agents import (
    Agent,
    MessageOutputItem,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    ToolCallItem,
    ToolCallOutputItem,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

MODEL = "scripted"
QUESTION = "What is the weather in Oslo?"

set_tracing_disabled(True)  # the SDK would upload traces to OpenAI otherwise


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21 degrees in {city}"


def agent_on(server, api: str) -> Agent:
    client = AsyncOpenAI(base_url=server.v1, api_key="unused", max_retries=0)
    model = (OpenAIChatCompletionsModel(model=MODEL, openai_client=client) if api == "chat"
             else OpenAIResponsesModel(model=MODEL, openai_client=client))
    return Agent(name="weather", instructions="Answer questions about the weather.", model=model,
                 tools=[get_weather])


def check_tool_loop(result) -> None:
    assert result.final_output == "It is sunny in Oslo."
    calls = [item for item in result.new_items if isinstance(item, ToolCallItem)]
    outputs = [item for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert [(c.raw_item.name, c.raw_item.arguments) for c in calls] == [("get_weather", '{"city": "Oslo"}')]
    assert [o.output for o in outputs] == ["sunny and 21 degrees in Oslo"]
    assert outputs[0].raw_item["call_id"] == calls[0].raw_item.call_id
    said = [item for item in result.new_items if isinstance(item, MessageOutputItem)]
    assert said, "the model's answer is a message item"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_run(tools_server, api):
    check_tool_loop(asyncio.run(Runner.run(agent_on(tools_server, api), QUESTION)))


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_run_streamed(tools_server, api):
    async def run():
        result = Runner.run_streamed(agent_on(tools_server, api), QUESTION)
        kinds = [event.type async for event in result.stream_events()]
        return result, kinds

    result, kinds = asyncio.run(run())
    check_tool_loop(result)
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds


def test_an_agent_on_the_embedded_model_gets_an_answer(real_server):
    """No sampling parameters from the SDK: the server's defaults make the answer end."""
    client = AsyncOpenAI(base_url=real_server.v1, api_key="unused", max_retries=0)
    agent = Agent(name="greeter", instructions="You are a friendly assistant.",
                  model=OpenAIChatCompletionsModel(model="SmolLM2-135M-Instruct", openai_client=client))
    result = asyncio.run(Runner.run(agent, "Hello"))
    assert isinstance(result.final_output, str) and result.final_output
