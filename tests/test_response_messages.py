"""vLLM's `enable_response_messages` on the Responses API: the response also carries `input_messages` (the
conversation the first model turn read) and `output_messages` (what the model turns wrote), as the chat messages
the chat template received; without it, neither field (the response stays exactly the spec's). In-process,
scripted engine."""

from __future__ import annotations

import json

import pytest
from openai import OpenAI

from harness import BASE_URL, MODEL, served
from spec import validate
from wire import check_error

SCRIPT = [{"match": "^hello", "output": "Hello there."}, {"match": "", "output": "Done."}]


@pytest.fixture
def http(tmp_path):
    with served(tmp_path, SCRIPT) as client:
        yield client


def respond(http, **body):
    answer = http.post("/v1/responses", json={"model": MODEL, **body})
    assert answer.status_code == 200, answer.text
    validate("Response", answer.json())
    return answer.json()


def test_without_it_the_response_has_no_messages(http):
    body = respond(http, input="hello")
    assert "input_messages" not in body and "output_messages" not in body


def test_the_messages_in_and_out(http):
    body = respond(http, input="hello", instructions="Be brief.", enable_response_messages=True)
    assert body["input_messages"] == [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "hello"}]
    assert body["output_messages"] == [{"role": "assistant", "content": "Hello there."}]
    stored = http.get(f"/v1/responses/{body['id']}").json()
    assert (stored["input_messages"], stored["output_messages"]) == (body["input_messages"], body["output_messages"])


def test_tool_calls_and_their_results_are_chat_messages(http):
    items = [{"role": "user", "content": "what is the weather?"},
             {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]
    tools = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]
    body = respond(http, input=items, tools=tools, enable_response_messages=True)
    assistant, tool = body["input_messages"][1:]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_1"
    assert assistant["tool_calls"][0]["function"]["name"] == "weather"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert tool == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert body["output_messages"] == [{"role": "assistant", "content": "Done."}]


def test_a_streams_completed_response_carries_them(http):
    with http.stream("POST", "/v1/responses", json={"model": MODEL, "input": "hello", "stream": True,
                                                     "enable_response_messages": True}) as stream:
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    completed = next(event for event in events if event["type"] == "response.completed")["response"]
    assert completed["output_messages"] == [{"role": "assistant", "content": "Hello there."}]
    assert completed["input_messages"] == [{"role": "user", "content": "hello"}]


def test_it_must_be_a_boolean(http):
    check_error(http.post("/v1/responses", json={"model": MODEL, "input": "hello", "enable_response_messages": "x"}),
                400, "enable_response_messages")


def test_the_models_thinking_and_tool_call_come_out_as_an_assistant_message(tmp_path):
    thinking = {"match": "Paris", "output": "<think>\nI call get_weather.\n</think>\n\n<tool_call>\n"
                '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'}
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    with served(tmp_path, [thinking], reasoning_parser="qwen3", tool_call_parser="hermes") as http:
        body = respond(http, input="weather in Paris?", tools=tools, enable_response_messages=True)
    [message] = body["output_messages"]
    assert message["role"] == "assistant" and message["reasoning_content"].strip() == "I call get_weather."
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert call["id"] == next(item["call_id"] for item in body["output"] if item["type"] == "function_call")


def test_the_openai_sdk_reads_them_from_extra_body(http):
    client = OpenAI(base_url=f"{BASE_URL}/v1", api_key="unused", max_retries=0, http_client=http)
    response = client.responses.create(model=MODEL, input="hello", extra_body={"enable_response_messages": True})
    assert response.output_text == "Hello there."
    extra = response.model_extra or {}
    assert extra["output_messages"] == [{"role": "assistant", "content": "Hello there."}]
    assert extra["input_messages"] == [{"role": "user", "content": "hello"}]
