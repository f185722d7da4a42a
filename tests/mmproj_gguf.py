"""A tiny multimodal projector (mmproj) GGUF for the embedded SmolLM2-135M, so the llama.cpp engine's image path is
tested on a real llama.cpp vision encoder: no vision GGUF can be downloaded here.

The layout is llama.cpp's for LLaVA-style projectors, as gguf-py's constants name it: architecture `clip`, a vision
encoder (`clip.has_vision_encoder`), `clip.projector_type` `mlp`; a ViT (`v.patch_embd` convolution, `v.class_embd`,
`v.position_embd`, `v.pre_ln`, per block `ln1`, `attn_q/k/v`, `attn_out`, `ln2`, `ffn_up`, `ffn_down`, then
`v.post_ln`) and a two-layer MLP (`mm.0`, GELU, `mm.2`) projecting to the text model's width (576). Weights are
random from a fixed seed: the model sees nothing meaningful, but the same image gives the same embeddings, so
rostra and llama.cpp's own server must give the same tokens for it.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

TEXT_WIDTH = 576  # SmolLM2-135M's embedding length
IMAGE_SIZE, PATCH, WIDTH, FFN, HEADS, BLOCKS = 32, 8, 64, 128, 4, 2
SEED = 1234


def mmproj_path(cache: Path) -> Path:
    """The mmproj GGUF, written once into `cache` (the checkout's git-ignored .cache/)."""
    target = cache / f"mmproj-tiny-{IMAGE_SIZE}px-{WIDTH}w-s{SEED}.gguf"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        write_mmproj(partial)
        partial.replace(target)
    return target


def write_mmproj(target: Path) -> None:
    rng = np.random.default_rng(SEED)

    def weight(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    writer = gguf.GGUFWriter(str(target), "clip")
    writer.add_name("rostra tiny mmproj")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type("mlp")
    writer.add_vision_image_size(IMAGE_SIZE)
    writer.add_vision_patch_size(PATCH)
    writer.add_vision_embedding_length(WIDTH)
    writer.add_vision_feed_forward_length(FFN)
    writer.add_vision_projection_dim(TEXT_WIDTH)
    writer.add_vision_block_count(BLOCKS)
    writer.add_vision_head_count(HEADS)
    writer.add_vision_attention_layernorm_eps(1e-5)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    writer.add_vision_use_gelu(True)
    positions = (IMAGE_SIZE // PATCH) ** 2 + 1  # the patches and the class token
    tensors = {
        # numpy shapes are (out, in): GGUF stores them as ggml's [in, out]
        "v.patch_embd.weight": weight(WIDTH, 3, PATCH, PATCH),
        "v.class_embd": weight(WIDTH),
        "v.position_embd.weight": weight(positions, WIDTH),
        "v.pre_ln.weight": np.ones(WIDTH, np.float32), "v.pre_ln.bias": np.zeros(WIDTH, np.float32),
        "v.post_ln.weight": np.ones(WIDTH, np.float32), "v.post_ln.bias": np.zeros(WIDTH, np.float32),
        "mm.0.weight": weight(TEXT_WIDTH, WIDTH), "mm.0.bias": weight(TEXT_WIDTH),
        "mm.2.weight": weight(TEXT_WIDTH, TEXT_WIDTH), "mm.2.bias": weight(TEXT_WIDTH),
    }
    for block in range(BLOCKS):
        prefix = f"v.blk.{block}"
        for norm in ("ln1", "ln2"):
            tensors[f"{prefix}.{norm}.weight"] = np.ones(WIDTH, np.float32)
            tensors[f"{prefix}.{norm}.bias"] = np.zeros(WIDTH, np.float32)
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[f"{prefix}.{name}.weight"] = weight(WIDTH, WIDTH)
            tensors[f"{prefix}.{name}.bias"] = weight(WIDTH)
        tensors[f"{prefix}.ffn_up.weight"], tensors[f"{prefix}.ffn_up.bias"] = weight(FFN, WIDTH), weight(FFN)
        tensors[f"{prefix}.ffn_down.weight"], tensors[f"{prefix}.ffn_down.bias"] = weight(WIDTH, FFN), weight(WIDTH)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
