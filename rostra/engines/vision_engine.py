"""An engine whose checkpoint may read images through its Hugging Face processor (transformers, vLLM).

Both engines render the prompt with one image token per image and let the checkpoint's processor
(transformers_vision.VisionProcessor) say how many tokens each image becomes, so what a vision model reports
(whether it takes images, its marker, a prompt's length) is the same code over `vision`. A base between Engine
and the two engines rather than a free-standing mixin: mypy then knows `task` and the overridden signatures.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Iterable

from rostra.core import Prompt, PromptImage
from rostra.engines.base import Engine

if TYPE_CHECKING:  # (transformers_vision imports torch: vllm.py must import without it)
    from rostra.engines.transformers_vision import VisionProcessor


class VisionEngine(Engine):
    # The checkpoint's processor when the model reads images, else None (a text model).
    vision: VisionProcessor | None = None
    # The checkpoint's own template places its image token for an {"type": "image"} part: with spacing of its own
    # ("<image>\n" before the text, LLaVA 1.5's), which a marker given as a text part would not get.
    template_writes_image_marker = True

    def takes_images(self, model: str) -> bool:
        return self.vision is not None and self.task == "generate"

    def image_marker(self, image: PromptImage) -> str:
        assert self.vision is not None
        return self.vision.image_token

    async def prompt_length(self, prompt: Prompt) -> int:
        """With images, as the checkpoint's processor expands them (vLLM's processor follows it; vLLM's own count
        is reported when its generation ends)."""
        if self.vision is None:
            return len(prompt.token_ids)
        return await asyncio.to_thread(self.vision.count, prompt)

    def guarded_texts(self, added_tokens: Iterable[str]) -> tuple[str, ...]:
        """The special and added tokens' texts a message may not hold, less the image token: rostra writes it
        where each image stands, and a message that holds it is refused when the images do not pair up."""
        image_token = self.vision.image_token if self.vision is not None else None
        return tuple(text for text in added_tokens if text != image_token)
