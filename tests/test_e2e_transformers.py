"""End to end: the `openai` SDK over HTTP against `rostra serve --engine transformers CHECKPOINT`."""

import asyncio
import json

import jsonschema
import pytest
from openai import AsyncOpenAI, OpenAI

from wire import check, fold_chat_stream, post, stream

MODEL = "smollm2-hf"
HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


@pytest.fixture(scope="module")
def client(transformers_server) -> OpenAI:
    return OpenAI(base_url=f"{transformers_server.base_url}/v1", api_key="unused", max_retries=0)


def test_models(client):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL]


def test_chat_stream_and_non_stream_agree(transformers_server):
    request = {"model": MODEL, "messages": HELLO, "max_tokens": 12, "temperature": 0, "logprobs": True,
               "top_logprobs": 2, "stream_options": {"include_usage": True}}
    whole = check("chat", post(transformers_server.base_url, "/v1/chat/completions", request).json())
    chunks = stream(transformers_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    folded = fold_chat_stream(chunks)[0]
    choice = whole["choices"][0]
    assert choice["message"]["content"] and folded["content"] == choice["message"]["content"]
    assert folded["finish_reason"] == choice["finish_reason"] in ("stop", "length")
    assert len(choice["logprobs"]["content"]) == whole["usage"]["completion_tokens"]
    assert all(len(t["top_logprobs"]) == 2 and t["logprob"] <= 0 for t in choice["logprobs"]["content"])
    assert chunks[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    assert len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) > 1  # per token


def test_sdk_stream_helper_and_concurrency(transformers_server, client):
    # Room to finish: the SDK's stream helper refuses a completion cut at max_tokens.
    request = dict(model=MODEL, messages=HELLO, max_tokens=32, temperature=0)
    whole = client.chat.completions.create(**request)
    with client.chat.completions.stream(**request) as events:
        for _ in events:
            pass
        final = events.get_final_completion()
    assert final.choices[0].message.content == whole.choices[0].message.content
    assert whole.choices[0].finish_reason == "stop"
    async_client = AsyncOpenAI(base_url=f"{transformers_server.base_url}/v1", api_key="unused", max_retries=0)

    async def together():
        replies = await asyncio.gather(*(async_client.chat.completions.create(**request) for _ in range(3)))
        return [r.choices[0].message.content for r in replies]

    # Batched with each other, greedy answers are the one the request gets alone.
    assert asyncio.run(together()) == [whole.choices[0].message.content] * 3


def test_response_format_json_schema(client):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Invent a person."}], max_tokens=60, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}})
    assert completion.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(completion.choices[0].message.content), schema)


def test_responses_api(client):
    created = client.responses.create(model=MODEL, input="Say hello.", max_output_tokens=40, temperature=0)
    assert created.status in ("completed", "incomplete") and created.output_text
    assert client.responses.retrieve(created.id).output_text == created.output_text
