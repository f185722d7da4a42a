"""The transformers engine's images: a vision checkpoint's processor turns each image into the model's inputs.

A vision checkpoint (LLaVA, Qwen2-VL, Gemma 3, SmolVLM...) ships a processor: an image processor (resize,
normalize -> `pixel_values`, and whatever else the model reads: `image_sizes`, `image_grid_thw`) and a tokenizer
whose image token stands for the image in the prompt. The model needs that token repeated once per embedding the
image becomes, a count only the processor knows (LLaVA: the patches; Qwen2-VL: the merged grid). rostra renders
and tokenizes the conversation itself (its template, its special-text guard), each image as one image token, and
here each image's token is replaced by the processor's expansion of it, with the processor's tensors for the image
beside. An image is processed once: the result is kept (a few, by content) for the count, then the generation.
All of it is CPU work: callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image

from rostra.core import Prompt, PromptImage, SamplingParams
from rostra.errors import InvalidRequest

# Processed images kept for reuse: a request is counted (its budget, count_tokens) before it is generated, and a
# conversation sends its images again every turn.
_KEPT_IMAGES = 32


@dataclass(frozen=True)
class ProcessedImage:
    token_ids: tuple[int, ...]  # what the image's one token becomes in the prompt
    tensors: dict[str, torch.Tensor]  # the processor's model inputs for this image (batch dimension first)


@dataclass(frozen=True)
class VisionInputs:
    token_ids: list[int]  # the prompt, each image token expanded
    tensors: dict[str, torch.Tensor]  # every image's tensors, concatenated in prompt order, for the prefill


def has_vision(config: Any) -> bool:
    """Whether a checkpoint's config describes a model that reads images (a vision tower beside the text model)."""
    return getattr(config, "vision_config", None) is not None


class VisionProcessor:
    def __init__(self, processor: Any, device: torch.device, dtype: torch.dtype):
        self.processor = processor
        self.image_token: str = processor.image_token
        self.image_token_id: int = processor.tokenizer.convert_tokens_to_ids(self.image_token)
        self.device, self.dtype = device, dtype
        self._kept: OrderedDict[bytes, ProcessedImage] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def load(cls, source: str, device: torch.device, dtype: torch.dtype) -> "VisionProcessor":
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(source)
        if getattr(processor, "image_token", None) is None or getattr(processor, "image_processor", None) is None:
            raise ValueError(f"{source}: its processor has no image processor and image token: rostra cannot "
                             "give the model images")
        return cls(processor, device, dtype)

    def expand(self, prompt: Prompt) -> VisionInputs:
        """The prompt with each image token replaced by its image's tokens, and the images' tensors; a 400 when
        the image tokens and the images do not pair up (a message that holds the image token's text)."""
        positions = self.image_positions(prompt)
        processed = [self.process(image, prompt.mm_processor_kwargs) for image in prompt.images]
        token_ids: list[int] = []
        start = 0
        for position, image in zip(positions, processed):
            token_ids += prompt.token_ids[start:position]
            token_ids += image.token_ids
            start = position + 1
        token_ids += prompt.token_ids[start:]
        names = processed[0].tensors if processed else {}
        tensors = {name: torch.cat([image.tensors[name] for image in processed]) for name in names}
        return VisionInputs(token_ids, tensors)

    @staticmethod
    def check_params(prompt: Prompt, params: SamplingParams) -> None:
        """What a prompt with images cannot have: prompt_logprobs (the model scores the expanded prompt, whose
        image tokens are not the request's)."""
        if prompt.images and params.prompt_logprobs is not None:
            raise InvalidRequest("prompt_logprobs cannot be combined with images on this engine",
                                 param="prompt_logprobs")

    def image_positions(self, prompt: Prompt) -> list[int]:
        """Where the prompt's image tokens are; a 400 when they do not pair up with its images."""
        positions = [index for index, token in enumerate(prompt.token_ids) if token == self.image_token_id]
        if len(positions) != len(prompt.images):
            raise InvalidRequest(f"the messages hold the text {self.image_token}, which this model reads as an "
                                 "image", param="messages")
        return positions

    def count(self, prompt: Prompt) -> int:
        """The prompt's length once its images are expanded (what the model evaluates)."""
        return len(self.expand(prompt).token_ids)

    def process(self, image: PromptImage, options: dict[str, Any] | None = None) -> ProcessedImage:
        """The image's tokens and tensors; `options` are the request's mm_processor_kwargs (vLLM's engine hands
        them to its own processor, so its count follows them)."""
        key = hashlib.sha256(image.data).digest() + json.dumps(options or {}, sort_keys=True).encode()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                return kept
        processed = self._process(image, options or {})
        with self._lock:
            self._kept[key] = processed
            while len(self._kept) > _KEPT_IMAGES:
                self._kept.popitem(last=False)
        return processed

    def _process(self, image: PromptImage, options: dict[str, Any]) -> ProcessedImage:
        with Image.open(io.BytesIO(image.data)) as opened:
            rgb = opened.convert("RGB")
        # The processor expands the image token of a one-image text: that expansion is the image's tokens.
        try:
            inputs = self.processor(text=self.image_token, images=[rgb], return_tensors="pt",
                                    add_special_tokens=False, **options)
        except Exception as exc:  # processors validate their options each their own way (hub's strict dataclasses...)
            if not options:
                raise
            raise InvalidRequest(f"mm_processor_kwargs: the model's processor refused them: {exc}",
                                 param="mm_processor_kwargs") from exc
        token_ids = tuple(int(token) for token in inputs["input_ids"][0])
        tensors = {name: value.to(self.device, self.dtype if value.is_floating_point() else value.dtype)
                   for name, value in inputs.items()
                   if name not in ("input_ids", "attention_mask", "token_type_ids") and isinstance(value, torch.Tensor)}
        return ProcessedImage(token_ids, tensors)
