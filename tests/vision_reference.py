"""transformers' own `generate` on a tiny vision checkpoint (tests/llava_checkpoint.py, tests/idefics3_checkpoint.py):
what rostra's transformers engine must give for the same files, image and question at temperature 0."""

from __future__ import annotations

import io
from pathlib import Path


class GreedyReference:
    """One image after a question in a user turn, through the checkpoint's own chat template and processor, greedy."""

    def __init__(self, checkpoint: Path, question: str, max_tokens: int):
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.processor = AutoProcessor.from_pretrained(checkpoint)
        self.model = AutoModelForImageTextToText.from_pretrained(checkpoint, dtype=torch.float32).eval()
        self.max_tokens = max_tokens
        messages = [{"role": "user", "content": [{"type": "text", "text": question}, {"type": "image"}]}]
        self.text = self.processor.apply_chat_template(messages, add_generation_prompt=True)

    def __call__(self, png: bytes) -> tuple[int, list[int]]:
        """(prompt length as the processor expands the image, the generated token ids)."""
        import torch
        from PIL import Image

        inputs = self.processor(text=self.text, images=[Image.open(io.BytesIO(png)).convert("RGB")],
                                return_tensors="pt")
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_tokens, do_sample=False)
        length = inputs["input_ids"].shape[1]
        return length, out[0, length:].tolist()

    def decoded(self, token_ids: list[int]) -> str:
        return self.processor.tokenizer.decode(token_ids, skip_special_tokens=True)
