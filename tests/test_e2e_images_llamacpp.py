"""llama.cpp with a multimodal projector: the embedded SmolLM2 and the tiny mmproj of tests/mmproj_gguf.py, served by
rostra (`--mmproj`) and by llama.cpp's own server (xllamacpp, in this process), give the same tokens at temperature
0 for the same image and prompt, on Chat, Responses and Messages; streamed equals non-streamed; a lossless WebP or
a BMP of the same pixels gives what the PNG gives."""

from __future__ import annotations

import base64
from pathlib import Path

import anthropic
import httpx
import pytest
from openai import OpenAI
from PIL import Image

from images import data_url, encoded, pattern
from mmproj_gguf import mmproj_path
from rostra.embedded import embedded_model_path
from servers import RunningServer
from wire import fold_chat_stream, stream

CACHE = Path(__file__).resolve().parent.parent / ".cache"
MAX_TOKENS = 24
PNG = encoded(pattern(40, 28), "PNG")
QUESTION = "Describe the picture."


@pytest.fixture(scope="module")
def mmproj() -> Path:
    return mmproj_path(CACHE)


@pytest.fixture(scope="module")
def server(mmproj):
    server = RunningServer(["--mmproj", str(mmproj), "--parallel", "1", "--max-model-len", "2048"],
                           startup_timeout=300)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reference(mmproj):
    """llama.cpp's own server on the same files, as rostra configures it (one slot, the same context)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(embedded_model_path())
    params.mmproj.path = str(mmproj)
    params.n_parallel = 1
    params.n_ctx = 2048
    params.kv_unified = False
    params.n_batch = params.n_ubatch
    server = xllamacpp.Server(params)
    yield server
    del server


def chat_messages(url: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


def reference_answer(reference, url: str) -> str:
    reply = reference.handle_chat_completions({"model": "x", "messages": chat_messages(url), "temperature": 0,
                                               "max_tokens": MAX_TOKENS})
    return reply["choices"][0]["message"]["content"]


def test_model_card_says_it_sees(server):
    client = OpenAI(base_url=server.v1, api_key="none")
    assert client.models.list().data[0].model_extra["input_modalities"] == ["text", "image"]


def test_chat_equals_llama_cpp_server(server, reference):
    url = data_url(PNG)
    expected = reference_answer(reference, url)
    assert expected
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    reply = client.chat.completions.create(model=model, messages=chat_messages(url), temperature=0,
                                           max_tokens=MAX_TOKENS)
    assert reply.choices[0].message.content == expected
    # usage counts the image's tokens as llama.cpp counts them, not the marker's text
    reference_usage = reference.handle_chat_completions({"model": "x", "messages": chat_messages(url),
                                                         "temperature": 0, "max_tokens": 1})["usage"]
    assert reply.usage.prompt_tokens == reference_usage["prompt_tokens"]
    chunks = stream(server.base_url, "/v1/chat/completions", {"model": model, "messages": chat_messages(url),
                                                               "temperature": 0, "max_tokens": MAX_TOKENS},
                    "chat_chunk")
    assert fold_chat_stream(chunks)[0]["content"] == expected
    # a different image gives a different answer: the image is read, not ignored
    other = reference_answer(reference, data_url(encoded(pattern(40, 28).rotate(90, expand=True), "PNG")))
    again = client.chat.completions.create(model=model, messages=chat_messages(
        data_url(encoded(pattern(40, 28).rotate(90, expand=True), "PNG"))), temperature=0, max_tokens=MAX_TOKENS)
    assert again.choices[0].message.content == other


@pytest.mark.parametrize("fmt, options, media_type", [("WEBP", {"lossless": True}, "image/webp"),
                                                      ("BMP", {}, "image/bmp")])
def test_other_formats_give_what_the_png_gives(server, reference, fmt, options, media_type):
    expected = reference_answer(reference, data_url(PNG))
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    url = data_url(encoded(pattern(40, 28), fmt, **options), media_type)
    reply = client.chat.completions.create(model=model, messages=chat_messages(url), temperature=0,
                                           max_tokens=MAX_TOKENS)
    assert reply.choices[0].message.content == expected


def test_responses_and_messages_equal_llama_cpp_server(server, reference):
    expected = reference_answer(reference, data_url(PNG))
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    response = client.responses.create(model=model, temperature=0, max_output_tokens=MAX_TOKENS, input=[
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                     {"type": "input_image", "image_url": data_url(PNG)}]}])
    assert response.output_text == expected
    messages = anthropic.Anthropic(base_url=server.base_url, api_key="none", max_retries=0)
    message = messages.messages.create(model=model, extra_body={"temperature": 0}, max_tokens=MAX_TOKENS, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}]}])
    assert message.content[0].text == expected


def test_llama_cpp_default_marker_in_text_is_just_text(server):
    """llama.cpp's default media marker typed into a message is text: the marker rostra gives llama.cpp is random."""
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    messages = chat_messages(data_url(PNG))
    messages[0]["content"][0]["text"] = "what is <__media__> here?"
    reply = client.chat.completions.create(model=model, messages=messages, max_tokens=4, temperature=0)
    assert reply.choices[0].finish_reason in ("length", "stop")


def test_counting_routes_count_images_as_llama_cpp_does(server, reference):
    """/v1/messages/count_tokens, /v1/responses/input_tokens and usage all give llama.cpp's own count of a prompt
    with images (the projector's 16 tokens per image, not the marker's text), before anything is generated."""
    url = data_url(PNG)
    expected = reference.handle_chat_completions({"model": "x", "messages": chat_messages(url), "temperature": 0,
                                                  "max_tokens": 1})["usage"]["prompt_tokens"]
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    inputs = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                           {"type": "input_image", "image_url": url}]}]
    counted = httpx.post(f"{server.v1}/responses/input_tokens", json={"model": model, "input": inputs}, timeout=60)
    assert counted.json()["input_tokens"] == expected
    messages = anthropic.Anthropic(base_url=server.base_url, api_key="none", max_retries=0)
    content = [{"type": "text", "text": QUESTION}, {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}]
    count = messages.messages.count_tokens(model=model, messages=[{"role": "user", "content": content}])
    message = messages.messages.create(model=model, max_tokens=2, messages=[{"role": "user", "content": content}])
    # (Anthropic's input_tokens leave out what was read from the prompt cache: an earlier test's turn may be there)
    assert count.input_tokens == expected == message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0)
    two = [{"role": "user", "content": [*content, content[1]]}]
    assert messages.messages.count_tokens(model=model, messages=two).input_tokens == count.input_tokens + 16


def test_a_conversation_repeating_an_image_reuses_its_prefix_as_llama_cpp_does(server, reference):
    """A second turn after an image (the same image again in it) reuses the first turn's prompt, the image's chunk
    included: rostra reports `cached_tokens` as llama.cpp's own server does for the same two requests. A turn whose
    first image differs reuses only what stands before that image."""
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0)
    model = client.models.list().data[0].id
    # `other`: an image no earlier request showed (llama.cpp's prompt cache keeps earlier prompts' states too)
    url, other = data_url(PNG), data_url(encoded(pattern(40, 28).transpose(Image.Transpose.FLIP_TOP_BOTTOM), "PNG"))
    first = chat_messages(url)
    answer = reference_answer(reference, url)
    second = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": [
        {"type": "text", "text": "And now?"}, {"type": "image_url", "image_url": {"url": url}}]}]

    def usage_of(body: dict) -> tuple[dict, dict]:
        mine = client.chat.completions.create(model=model, temperature=0, max_tokens=1, **body).usage
        theirs = reference.handle_chat_completions({"model": "x", "temperature": 0, "max_tokens": 1, **body})["usage"]
        return mine.model_dump(), theirs

    first_prompt, _ = usage_of({"messages": first})
    mine, theirs = usage_of({"messages": second})
    assert mine["prompt_tokens"] == theirs["prompt_tokens"]
    cached = mine["prompt_tokens_details"]["cached_tokens"]
    assert cached == theirs["prompt_tokens_details"]["cached_tokens"]
    assert cached >= first_prompt["prompt_tokens"] - 2  # the whole first turn, its image's 16 tokens among them
    changed = [{**second[0], "content": [second[0]["content"][0], {"type": "image_url", "image_url": {"url": other}}]},
               *second[1:]]
    mine, theirs = usage_of({"messages": changed})
    assert mine["prompt_tokens_details"]["cached_tokens"] == theirs["prompt_tokens_details"]["cached_tokens"]
    assert mine["prompt_tokens_details"]["cached_tokens"] < first_prompt["prompt_tokens"] - 16
