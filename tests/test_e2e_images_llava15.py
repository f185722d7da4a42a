"""An image where the checkpoint's own template places it: LLaVA 1.5's template writes "<image>\\n" before the text
(whatever the order of the parts), so rostra's prompt must be the one the checkpoint's processor renders, token for
token (a marker given to the template as a text part came out as "Describe the picture. <image> ": one token short),
and the answer transformers' own `generate` gives."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from images import data_url, encoded, pattern
from llava_checkpoint import LLAVA_15_TEMPLATE, tiny_llava
from servers import RunningServer
from vision_reference import GreedyReference

CACHE = Path(__file__).resolve().parent.parent / ".cache"
MODEL = "tiny-llava-1.5"
QUESTION = "Describe the picture."
MAX_TOKENS = 8
PNG = encoded(pattern(40, 28), "PNG")


@pytest.fixture(scope="module")
def checkpoint(transformers_checkpoint) -> Path:
    return tiny_llava(transformers_checkpoint, CACHE / "tiny-llava-1.5", LLAVA_15_TEMPLATE)


@pytest.fixture(scope="module")
def server(checkpoint):
    server = RunningServer(["--engine", "transformers", str(checkpoint), "--served-model-name", MODEL,
                            "--parallel", "1", "--max-model-len", "2048"], startup_timeout=300)
    yield server
    server.stop()


@pytest.mark.parametrize("image_first", [False, True])
def test_the_prompt_and_answer_are_the_processors(server, checkpoint, image_first):
    length, expected = GreedyReference(checkpoint, QUESTION, MAX_TOKENS)(PNG)
    content = [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": data_url(PNG)}}]
    if image_first:
        content.reverse()
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": MAX_TOKENS, "return_token_ids": True}
    answer = httpx.post(f"{server.v1}/chat/completions", json=body, timeout=120).json()
    assert "usage" in answer, answer
    assert answer["usage"]["prompt_tokens"] == length
    assert answer["choices"][0]["token_ids"] == expected

