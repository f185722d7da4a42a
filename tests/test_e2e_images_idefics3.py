"""The transformers engine with the tiny Idefics3 (SmolVLM's architecture, tests/idefics3_checkpoint.py: its images
are split into tiles plus a global view, each with its own `pixel_attention_mask`): rostra's tokens at temperature 0
are transformers' own `generate` on the same files, and usage counts the image as the processor expands it. The
same checkpoint is served by vLLM in tests/test_engine_vllm_images.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import OpenAI

from idefics3_checkpoint import tiny_idefics3
from images import data_url, encoded, pattern
from servers import RunningServer
from vision_reference import GreedyReference

CACHE = Path(__file__).resolve().parent.parent / ".cache"
MODEL = "tiny-idefics3"
MAX_TOKENS = 12
QUESTION = "Describe the picture."
PNG = encoded(pattern(40, 28), "PNG")
ROTATED = encoded(pattern(40, 28).rotate(90, expand=True), "PNG")


@pytest.fixture(scope="module")
def checkpoint(transformers_checkpoint) -> Path:
    return tiny_idefics3(transformers_checkpoint, CACHE / "tiny-idefics3")


@pytest.fixture(scope="module")
def server(checkpoint):
    server = RunningServer(["--engine", "transformers", str(checkpoint), "--served-model-name", MODEL,
                            "--max-model-len", "2048"], startup_timeout=300)
    yield server
    server.stop()


def generate(checkpoint: Path, pngs: list[bytes]) -> list[tuple[int, str]]:
    """transformers' own greedy generate for each image and the question: (prompt length, answer text)."""
    reference = GreedyReference(checkpoint, QUESTION, MAX_TOKENS)
    return [(length, reference.decoded(token_ids)) for length, token_ids in map(reference, pngs)]


def test_chat_with_an_image_is_transformers_generate(server, checkpoint):
    expected = generate(checkpoint, [PNG, ROTATED])
    assert expected[0][1] != expected[1][1]  # the image is read, not ignored
    client = OpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=300)
    assert client.models.list().data[0].model_extra["input_modalities"] == ["text", "image"]
    for png, (length, answer) in zip([PNG, ROTATED], expected):
        reply = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=MAX_TOKENS, messages=[
            {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                         {"type": "image_url", "image_url": {"url": data_url(png)}}]}])
        assert reply.choices[0].message.content == answer
        assert reply.usage.prompt_tokens == length
