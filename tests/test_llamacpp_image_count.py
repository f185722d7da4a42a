"""rostra counts a prompt's images on llama.cpp as llama.cpp itself does, before generating, for the projector types
it computes (rostra/engines/llamacpp_images.py): for each, a tiny mmproj of that type (tests/mmproj_gguf.py) on the
embedded SmolLM2 (for idefics3, with SmolVLM's image tokens: tests/vocab_gguf.py) is served by rostra and by
llama.cpp's own server (xllamacpp, in this process), configured alike but for rostra's shorter context. For images
of several sizes and aspect ratios (the Qwen-VL, Pixtral, idefics3 and InternVL counts follow the image's size:
scaled up, down and past the limits, tiled), `/v1/messages/count_tokens` and the prompt length the context is
checked against (the count every counting route shares) both equal llama.cpp's `prompt_tokens` for the same
request."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import anthropic
import httpx
import pytest

from images import data_url, encoded, pattern
from mmproj_gguf import mmproj_path
from rostra.core import PromptImage
from rostra.embedded import embedded_model_path
from rostra.engines.llamacpp_images import ImageCounter, image_counter
from servers import RunningServer
from vocab_gguf import smolvlm_vocab_model

CACHE = Path(__file__).resolve().parent.parent / ".cache"
CONTEXT = 4096
# rostra's context: shorter than every prompt here (but its text alone), so that each Chat request is refused with
# the prompt's length as the budget check counted it
ROSTRA_CONTEXT = 40
QUESTION = "Describe the picture."
# (width, height): wide, tall, smaller than the fewest tokens allowed (scaled up), larger than the most (scaled down)
# (Qwen2.5-VL's and Qwen3-VL's encoders differ from Qwen2-VL's, not their resizing: fewer sizes for them)
SIZES = {"gemma3": [(40, 28), (28, 64)],
         "qwen2vl_merger": [(40, 28), (28, 64), (10, 10)],
         "qwen2.5vl_merger": [(28, 64), (10, 10)],
         "qwen3vl_merger": [(40, 28), (10, 10)],
         "pixtral": [(40, 28), (28, 64), (10, 10), (300, 300)],
         "idefics3": [(40, 28), (28, 64), (10, 10)],
         "internvl": [(40, 28), (28, 64), (10, 10), (30, 300)]}


@pytest.fixture(scope="module", params=sorted(SIZES))
def projector(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def servers(projector):
    """rostra and llama.cpp's own server on the same files, configured alike (one slot) but for the context."""
    import xllamacpp

    mmproj = mmproj_path(CACHE, projector)
    # idefics3's image tokens are looked up in the vocabulary: SmolLM2 with SmolVLM's (tests/vocab_gguf.py)
    model = smolvlm_vocab_model(CACHE) if projector == "idefics3" else embedded_model_path()
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.mmproj.path = str(mmproj)
    params.n_parallel = 1
    params.n_ctx = CONTEXT
    params.kv_unified = False
    params.n_batch = params.n_ubatch
    reference = xllamacpp.Server(params)
    server = RunningServer([str(model), "--mmproj", str(mmproj), "--parallel", "1",
                            "--max-model-len", str(ROSTRA_CONTEXT)], startup_timeout=300)
    yield server, reference
    server.stop()
    del reference


def png(width: int, height: int) -> bytes:
    return encoded(pattern(width, height), "PNG")


def reference_count(reference, images: list[bytes]) -> int:
    content = [{"type": "text", "text": QUESTION}, *[{"type": "image_url", "image_url": {"url": data_url(image)}}
                                                      for image in images]]
    reply = reference.handle_chat_completions({"model": "x", "messages": [{"role": "user", "content": content}],
                                               "temperature": 0, "max_tokens": 1})
    return reply["usage"]["prompt_tokens"]


def counts(server: RunningServer, images: list[bytes]) -> tuple[int, int]:
    """rostra's count of the prompt with `images` on Messages' counting route, and the prompt length in the 400 a
    Chat request longer than the context gets (the budget check's own count)."""
    messages = anthropic.Anthropic(base_url=server.base_url, api_key="none", max_retries=0)
    model = messages.models.list().data[0].id
    blocks = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                           "data": base64.b64encode(image).decode()}} for image in images]
    counted = messages.messages.count_tokens(model=model, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, *blocks]}]).input_tokens
    content = [{"type": "text", "text": QUESTION}, *[{"type": "image_url", "image_url": {"url": data_url(image)}}
                                                      for image in images]]
    refused = httpx.post(f"{server.v1}/chat/completions", timeout=60, json={
        "model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 1})
    assert refused.status_code == 400, refused.text
    budgeted = re.search(r"your prompt is (\d+) tokens long", refused.json()["error"]["message"])
    assert budgeted, refused.text
    return counted, int(budgeted.group(1))


def test_each_image_counts_as_llama_cpp_counts_it(servers, projector):
    server, reference = servers
    for width, height in SIZES[projector]:
        image = png(width, height)
        expected = reference_count(reference, [image])
        assert counts(server, [image]) == (expected,) * 2, f"{projector} {width}x{height}"


def test_images_of_different_sizes_in_one_prompt(servers, projector):
    server, reference = servers
    images = [png(*size) for size in SIZES[projector][:2]]
    expected = reference_count(reference, images)
    assert counts(server, images) == (expected,) * 2
    assert expected > reference_count(reference, images[:1])


def metadata(projector: str, **extra) -> dict:
    return {"clip.projector_type": projector, "clip.vision.image_size": 896, "clip.vision.patch_size": 14, **extra}


def image(width: int, height: int) -> PromptImage:
    return PromptImage(b"", width, height)


def test_the_real_models_geometry():
    """The rules on the real models' metadata (what their GGUFs declare), as llama.cpp's code computes them."""
    gemma = image_counter(metadata("gemma3"))  # Gemma 3: 896px, 14px patches, pooled 4x4
    assert gemma is not None and gemma.count(image(1000, 10)).embeddings == 256
    assert gemma.count(image(10, 1000)).wrappers == ("<start_of_image>", "<end_of_image>")
    qwen = image_counter(metadata("qwen2.5vl_merger", **{"clip.vision.patch_size": 14}))
    assert qwen == ImageCounter("qwen2.5vl_merger", 896, 14, 2)
    assert qwen.count(image(1000, 10)).wrappers == ("<|vision_start|>", "<|vision_end|>")
    # past 4,096 tokens an image is scaled down to fit, never over
    assert 4000 < qwen.count(image(4000, 3000)).embeddings <= 4096
    assert qwen.count(image(1, 1)).embeddings >= 8
    mistral = image_counter(metadata("pixtral", **{"clip.vision.spatial_merge_size": 2}))
    assert mistral is not None and mistral.merge == 2
    # SmolVLM: 512px tiles of 16px patches shuffled 4x4 (64 tokens a tile), images scaled to a 2048px longer side
    smolvlm = image_counter({"clip.projector_type": "idefics3", "clip.vision.image_size": 512,
                             "clip.vision.patch_size": 16, "clip.vision.projector.scale_factor": 4,
                             "clip.vision.preproc_image_size": 2048})
    assert smolvlm is not None
    layout = smolvlm.count(image(1000, 500))  # 2048x1024: 4x2 tiles and the overview
    assert (layout.embeddings, len(layout.wrappers), layout.looked_up) == (64 * 9, 8, 1 + 4)
    assert layout.wrappers[-1] == "<fake_token_around_image><row_2_col_4>"
    # InternVL3: 448px tiles of 14px patches shuffled 2x2 (256 tokens a tile); 900x450 needs 1344x896 (3x2 tiles)
    # to be shown whole, and the whole image follows them
    internvl = image_counter(metadata("internvl", **{"clip.vision.image_size": 448,
                                                     "clip.vision.projector.scale_factor": 2}))
    assert internvl is not None and internvl.count(image(900, 450)).embeddings == 256 * (6 + 1)
    assert internvl.count(image(448, 448)).embeddings == 256  # fits one tile: the whole image alone


@pytest.mark.parametrize("meta", [metadata("lfm2"), metadata("llama4"),
                                  metadata("mlp", **{"clip.vision.image_grid_pinpoints": [336, 672]}),
                                  {"clip.projector_type": "gemma3"}])
def test_projectors_it_does_not_compute_are_left_to_llama_cpp(meta):
    assert image_counter(meta) is None
