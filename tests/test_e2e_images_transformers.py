"""The transformers engine with a vision checkpoint (the tiny LLaVA of tests/llava_checkpoint.py): rostra's tokens at
temperature 0 are transformers' own `generate` on the same files and inputs, on Chat (streamed and not), Responses
and Messages, through the openai and anthropic SDKs; usage and the counting routes count the image as the processor
expands it; the image token's text typed into a message is a 400."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import anthropic
import httpx
import pytest
from openai import AsyncOpenAI, OpenAI

from images import data_url, encoded, pattern
from llava_checkpoint import IMAGE_TOKENS, tiny_llava
from servers import RunningServer
from vision_reference import GreedyReference
from wire import check, fold_chat_stream, stream

CACHE = Path(__file__).resolve().parent.parent / ".cache"
MODEL = "tiny-llava"
MAX_TOKENS = 12
QUESTION = "Describe the picture."
PNG = encoded(pattern(40, 28), "PNG")
ROTATED = encoded(pattern(40, 28).rotate(90, expand=True), "PNG")


@pytest.fixture(scope="module")
def checkpoint(transformers_checkpoint) -> Path:
    return tiny_llava(transformers_checkpoint, CACHE / "tiny-llava")


@pytest.fixture(scope="module")
def server(checkpoint):
    server = RunningServer(["--engine", "transformers", str(checkpoint), "--served-model-name", MODEL,
                            "--parallel", "2", "--max-model-len", "2048"], startup_timeout=300)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reference(checkpoint) -> GreedyReference:
    """transformers' own generate on the checkpoint: (prompt length, greedy token ids) for one image and the question."""
    return GreedyReference(checkpoint, QUESTION, MAX_TOKENS)


def chat_messages(png: bytes) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                         {"type": "image_url", "image_url": {"url": data_url(png)}}]}]


def chat_body(png: bytes, **extra) -> dict:
    return {"model": MODEL, "messages": chat_messages(png), "temperature": 0, "max_tokens": MAX_TOKENS, **extra}


def test_model_card_says_it_sees(server):
    client = OpenAI(base_url=server.v1, api_key="none")
    assert client.models.list().data[0].model_extra["input_modalities"] == ["text", "image"]


def test_chat_equals_transformers_generate(server, reference):
    length, expected = reference(PNG)
    assert length > IMAGE_TOKENS  # the processor expanded the image token
    body = chat_body(PNG, logprobs=True, top_logprobs=2, return_token_ids=True)
    whole = check("chat", httpx.post(f"{server.v1}/chat/completions", json=body, timeout=120).json())
    choice = whole["choices"][0]
    assert choice["token_ids"] == expected
    assert whole["usage"]["prompt_tokens"] == length  # the image counted as the processor expands it
    chunks = stream(server.base_url, "/v1/chat/completions", {**body, "stream_options": {"include_usage": True}},
                    "chat_chunk")
    folded = fold_chat_stream(chunks)[0]
    assert folded["content"] == choice["message"]["content"]
    assert chunks[-1]["usage"]["prompt_tokens"] == length
    # another image, another answer: the image is read, not ignored
    other_length, other = reference(ROTATED)
    again = httpx.post(f"{server.v1}/chat/completions", json=chat_body(ROTATED, return_token_ids=True),
                       timeout=120).json()
    assert other != expected and again["choices"][0]["token_ids"] == other


def test_images_batched_with_other_requests(server):
    """Concurrent requests (images prefilled alone, then decoded in one batch) answer what each does alone."""
    client = AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0)
    text_only = [{"role": "user", "content": QUESTION}]

    async def ask(messages: list[dict]) -> str | None:
        reply = await client.chat.completions.create(model=MODEL, messages=messages, temperature=0,
                                                     max_tokens=MAX_TOKENS)
        return reply.choices[0].message.content

    async def run() -> tuple[list, list]:
        requests = [chat_messages(PNG), text_only, chat_messages(ROTATED), chat_messages(PNG)]
        alone = [await ask(messages) for messages in requests]
        together = await asyncio.gather(*(ask(messages) for messages in requests))
        return alone, list(together)

    alone, together = asyncio.run(run())
    assert together == alone and alone[0] == alone[3] != alone[2]


def test_responses_and_messages_equal_chat_and_count_as_usage(server):
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    expected = client.chat.completions.create(**chat_body(PNG)).choices[0].message.content
    inputs = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                           {"type": "input_image", "image_url": data_url(PNG)}]}]
    response = client.responses.create(model=MODEL, temperature=0, max_output_tokens=MAX_TOKENS, input=inputs)
    assert response.output_text == expected
    counted = httpx.post(f"{server.v1}/responses/input_tokens", json={"model": MODEL, "input": inputs}).json()
    assert counted["input_tokens"] == response.usage.input_tokens
    messages = anthropic.Anthropic(base_url=server.base_url, api_key="none", max_retries=0)
    content = [{"type": "text", "text": QUESTION}, {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}]
    message = messages.messages.create(model=MODEL, extra_body={"temperature": 0}, max_tokens=MAX_TOKENS,
                                       messages=[{"role": "user", "content": content}])
    assert message.content[0].text == expected
    count = messages.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": content}])
    assert count.input_tokens == message.usage.input_tokens > IMAGE_TOKENS


def test_image_token_text_in_a_message_is_a_400(server):
    messages = chat_messages(PNG)
    messages[0]["content"][0]["text"] = "What is <image> here?"
    reply = httpx.post(f"{server.v1}/chat/completions", json={**chat_body(PNG), "messages": messages}, timeout=60)
    assert reply.status_code == 400 and "<image>" in reply.json()["error"]["message"]
    scored = httpx.post(f"{server.v1}/chat/completions", json=chat_body(PNG, prompt_logprobs=1), timeout=60)
    assert scored.status_code == 400 and scored.json()["error"]["param"] == "prompt_logprobs"
    assert httpx.post(f"{server.v1}/chat/completions", json=chat_body(PNG), timeout=60).status_code == 200


def test_constraints_hold_with_an_image(server):
    """A grammar (vLLM's guided_choice) masks the sampling of a prompt with images as of a text prompt."""
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    choices = ["red", "green", "blue"]
    reply = client.chat.completions.create(**chat_body(PNG), extra_body={"guided_choice": choices})
    assert reply.choices[0].message.content in choices and reply.choices[0].finish_reason == "stop"
