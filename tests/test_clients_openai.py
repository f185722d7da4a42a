"""The `openai` SDK's stream helpers against `rostra serve`: `client.chat.completions.stream()` and
`client.responses.stream()`, for text, tool calls and structured output, events and the final object
the helper assembles (`get_final_completion()`, `get_final_response()`).

The scripted model (tests/data/clients.jsonl) answers as a hermes-format tool-calling model would
(`<tool_call>\\n{"name", "arguments"}\\n</tool_call>`, as Qwen2.5 and Hermes models write it).
"""

import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from rostra.generation_defaults import EMBEDDED_DEFAULTS
from servers import DATA, RunningServer

MODEL = "scripted"
WEATHER_QUESTION = "What is the weather in San Francisco, CA?"


class Joke(BaseModel):
    setup: str
    punchline: str


class GetWeather(BaseModel):
    """The weather at a location."""

    location: str


@pytest.fixture(scope="module")
def client():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "clients.jsonl"),
                            "--tool-call-parser", "hermes"])
    yield OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
    server.stop()


def test_chat_stream_text(client):
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "Hello"}]) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(deltas) == final.choices[0].message.content == "Hello! How can I help you today?"
    assert final.choices[0].finish_reason == "stop"


def test_chat_stream_tool_call(client):
    with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": WEATHER_QUESTION}],
                                        tools=[openai.pydantic_function_tool(GetWeather, name="get_weather")]) as stream:
        done = [event for event in stream if event.type == "tool_calls.function.arguments.done"]
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert [(c.function.name, c.function.parsed_arguments) for c in calls] == \
        [("get_weather", GetWeather(location="San Francisco, CA"))]
    assert [(event.name, event.arguments) for event in done] == [("get_weather", calls[0].function.arguments)]
    assert final.choices[0].finish_reason == "tool_calls"


def test_chat_stream_structured_output(client):
    with client.chat.completions.stream(model=MODEL, response_format=Joke,
                                        messages=[{"role": "user", "content": "Tell me a joke about cats."}]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Joke(setup="Why did the cat sit on the computer?",
                                                   punchline="To keep an eye on the mouse.")


def test_responses_stream_text(client):
    with client.responses.stream(model=MODEL, input="Hello") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Hello! How can I help you today?"
    assert final.status == "completed"


def test_responses_stream_tool_call(client):
    tool = {"type": "function", "name": "get_weather", "description": "The weather at a location.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                           "required": ["location"]}}
    with client.responses.stream(model=MODEL, input=WEATHER_QUESTION, tools=[tool]) as stream:
        done = [event for event in stream if event.type == "response.function_call_arguments.done"]
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"location": "San Francisco, CA"}')]
    assert [event.arguments for event in done] == [calls[0].arguments]


def test_responses_stream_structured_output(client):
    with client.responses.stream(model=MODEL, input="Tell me a joke about cats.", text_format=Joke) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_parsed == Joke(setup="Why did the cat sit on the computer?",
                                       punchline="To keep an eye on the mouse.")


def test_no_parameters_on_the_embedded_model_end_in_an_answer(real_server):
    """A bare create() (no temperature, no max_tokens): the server's defaults make the answer end."""
    client = OpenAI(base_url=real_server.v1, api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model="SmolLM2-135M-Instruct",
                                           messages=[{"role": "user", "content": "Hello"}])
    assert reply.choices[0].message.content and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage.completion_tokens <= EMBEDDED_DEFAULTS["max_tokens"]
