"""VisionEngine, the vision side the transformers and vLLM engines share, over a real processor (the tiny LLaVA).

Each engine is made without loading a model (its __init__ loads one): only the attributes VisionEngine reads are set,
as each __init__ sets them for a text checkpoint (vision None) and for a vision one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from images import encoded, pattern
from llava_checkpoint import IMAGE_TOKEN, IMAGE_TOKENS, tiny_llava
from rostra.core import Prompt, PromptImage
from rostra.engines.transformers import TransformersEngine
from rostra.engines.vision_engine import VisionEngine
from rostra.engines.vllm import VllmEngine

CACHE = Path(__file__).resolve().parent.parent / ".cache"
IMAGE = PromptImage(encoded(pattern(40, 28), "PNG"), 40, 28)
ENGINES = pytest.mark.parametrize("engine_class", [TransformersEngine, VllmEngine])


@pytest.fixture(scope="module")
def processor(transformers_checkpoint):
    import torch

    from rostra.engines.transformers_vision import VisionProcessor

    return VisionProcessor.load(str(tiny_llava(transformers_checkpoint, CACHE / "tiny-llava")), torch.device("cpu"),
                                torch.float32)


@ENGINES
def test_a_text_model_takes_no_images_and_guards_every_added_token(engine_class: type[VisionEngine]):
    engine = engine_class.__new__(engine_class)
    assert not engine.takes_images("any")
    assert engine.guarded_texts(["<|im_start|>", IMAGE_TOKEN]) == ("<|im_start|>", IMAGE_TOKEN)
    assert asyncio.run(engine.prompt_length(Prompt([1, 2, 3]))) == 3


@ENGINES
def test_a_vision_model_marks_images_with_its_image_token_and_counts_them_expanded(engine_class, processor):
    engine = engine_class.__new__(engine_class)
    engine.vision = processor
    assert engine.takes_images("any") and engine.image_marker(IMAGE) == IMAGE_TOKEN
    # the image token is rostra's to write where an image stands: not guarded as special text
    assert engine.guarded_texts(["<|im_start|>", IMAGE_TOKEN, "<|im_end|>"]) == ("<|im_start|>", "<|im_end|>")
    ids = [1, processor.image_token_id, 2]
    assert asyncio.run(engine.prompt_length(Prompt(ids, images=(IMAGE,)))) == len(ids) - 1 + IMAGE_TOKENS
    engine.task = "embed"  # an embedding model is never sent images
    assert not engine.takes_images("any")
