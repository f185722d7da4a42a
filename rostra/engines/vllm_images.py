"""The vLLM engine's images: a prompt with images as vLLM's multimodal input.

vLLM takes a prompt's images beside its token ids: a `TokensPrompt` (a TypedDict: a plain dict at runtime) with
`multi_modal_data={"image": [PIL images]}`, its token ids holding the model's image token once per image, as
rostra renders them. vLLM's multimodal processor runs the checkpoint's image processor and expands each image
token into the image's tokens itself (its "prompt updates" work on token ids too), so rostra's template, its
special-text guard and its token ids stay as they are for text. `mm_processor_kwargs` go to that processor as
given (vLLM's request field: e.g. a Qwen2-VL `max_pixels`), where the server trusts them (--trust-request-mm-kwargs,
checked in serving/extensions.py), and rostra's count before generation follows them (transformers_vision.py).
"""

from __future__ import annotations

import io
from typing import Any, Sequence

from PIL import Image

from rostra.core import PromptImage


def pil_images(images: Sequence[PromptImage]) -> list[Image.Image]:
    """The prompt's images decoded (RGB, as rostra checked them): CPU work, for a worker thread."""
    decoded = []
    for image in images:
        with Image.open(io.BytesIO(image.data)) as opened:
            decoded.append(opened.convert("RGB"))
    return decoded


def image_prompt(token_ids: list[int], images: list[Image.Image],
                 mm_processor_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """vLLM's TokensPrompt for a prompt with images."""
    prompt: dict[str, Any] = {"prompt_token_ids": token_ids, "multi_modal_data": {"image": images}}
    if mm_processor_kwargs:
        prompt["mm_processor_kwargs"] = dict(mm_processor_kwargs)
    return prompt
