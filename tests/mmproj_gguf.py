"""Tiny multimodal projector (mmproj) GGUFs for the embedded SmolLM2-135M, so the llama.cpp engine's image path is
tested on real llama.cpp vision encoders: no vision GGUF can be downloaded here.

Each is laid out as llama.cpp's clip.cpp loads that projector type, with the names gguf-py's constants give:
architecture `clip`, a vision encoder (`clip.has_vision_encoder`), `clip.projector_type`; a ViT (`v.patch_embd`
convolution, per block `ln1`, `attn_q/k/v`, `attn_out`, `ln2`, `ffn_up`, `ffn_down`) and the type's own projector:
- `mlp` (LLaVA): a class token, learned positions, `v.pre_ln`/`v.post_ln`, a two-layer MLP (`mm.0`, GELU, `mm.2`);
- `gemma3`: learned positions, `v.post_ln`, average pooling by `clip.vision.projector.scale_factor`, an RMS norm
  (`mm.soft_emb_norm`) and `mm.input_projection`;
- `qwen2vl_merger` (Qwen2-VL): two patch kernels (`v.patch_embd.weight` and `.weight.1`, the two frames of its 3D
  convolution), M-RoPE, `v.post_ln`, and the 2x2 merger (`mm.0`, GELU, `mm.2`); `qwen2.5vl_merger` the same with
  windowed attention (`clip.vision.n_wa_pattern`); `qwen3vl_merger` with a patch bias, learned positions and fused
  `attn_qkv` projections;
- `pixtral`: 2D RoPE, RMS norms, `mm.1`, GELU, `mm.2`, and the `[IMG_BREAK]` embedding (`v.token_embd.img_break`);
- `idefics3` (SmolVLM): learned positions, `v.post_ln`, a pixel shuffle by `clip.vision.projector.scale_factor`
  and `mm.model.fc`; images are tiled after scaling to `clip.vision.preproc_image_size` (its text model needs
  SmolVLM's image tokens: tests/vocab_gguf.py);
- `internvl`: a class token, learned positions, a 2x2 pixel shuffle and its MLP (`mm.model.mlp.0` a layer norm,
  `.1`, GELU, `.3`); images larger than the encoder's square are tiled.
Weights are random from a fixed seed: the model sees nothing meaningful, but the same image gives the same
embeddings, so rostra and llama.cpp's own server must give the same tokens for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import gguf
import numpy as np

TEXT_WIDTH = 576  # SmolLM2-135M's embedding length
IMAGE_SIZE, PATCH, WIDTH, FFN, HEADS, BLOCKS = 32, 8, 64, 128, 4, 2
SEED = 1234
# per projector: (image_size, patch_size); the sizes are small so that encoding an image takes milliseconds
GEOMETRY = {"mlp": (IMAGE_SIZE, PATCH), "gemma3": (64, 8), "qwen2vl_merger": (64, 4), "qwen2.5vl_merger": (64, 4),
            "qwen3vl_merger": (64, 4), "pixtral": (64, 8), "idefics3": (32, 8), "internvl": (32, 8)}
IDEFICS3_MERGE, IDEFICS3_LONGEST_EDGE = 2, 96  # its pixel shuffle; the side an image is scaled to, then tiled
GEMMA3_POOL = 4  # gemma3's 2D average pooling (clip.vision.projector.scale_factor): 8x8 patches give 2x2 tokens

Weight = Callable[..., np.ndarray]


def mmproj_path(cache: Path, projector: str = "mlp") -> Path:
    """The mmproj GGUF for `projector`, written once into `cache` (the checkout's git-ignored .cache/)."""
    name = "mmproj-tiny" if projector == "mlp" else f"mmproj-tiny-{projector}"
    target = cache / f"{name}-{GEOMETRY[projector][0]}px-{WIDTH}w-s{SEED}.gguf"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        write_mmproj(partial, projector)
        partial.replace(target)
    return target


def write_mmproj(target: Path, projector: str = "mlp") -> None:
    rng = np.random.default_rng(SEED)

    def weight(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    image_size, patch = GEOMETRY[projector]
    writer = gguf.GGUFWriter(str(target), "clip")
    writer.add_name(f"rostra tiny mmproj ({projector})")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type(projector)
    writer.add_vision_image_size(image_size)
    writer.add_vision_patch_size(patch)
    writer.add_vision_embedding_length(WIDTH)
    writer.add_vision_feed_forward_length(FFN)
    writer.add_vision_projection_dim(TEXT_WIDTH)
    writer.add_vision_block_count(BLOCKS)
    writer.add_vision_head_count(HEADS)
    writer.add_vision_attention_layernorm_eps(1e-5)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    writer.add_vision_use_gelu(True)
    tensors = {"v.patch_embd.weight": weight(WIDTH, 3, patch, patch)} | _blocks(weight, projector == "qwen3vl_merger")
    tensors |= _PROJECTOR_TENSORS[projector](writer, weight, (image_size // patch) ** 2)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _ones(size: int) -> np.ndarray:
    return np.ones(size, np.float32)


def _zeros(size: int) -> np.ndarray:
    return np.zeros(size, np.float32)


def _blocks(weight: Weight, fused_qkv: bool) -> dict[str, np.ndarray]:
    # numpy shapes are (out, in): GGUF stores them as ggml's [in, out]
    tensors = {}
    for block in range(BLOCKS):
        prefix = f"v.blk.{block}"
        for norm in ("ln1", "ln2"):
            tensors[f"{prefix}.{norm}.weight"], tensors[f"{prefix}.{norm}.bias"] = _ones(WIDTH), _zeros(WIDTH)
        if fused_qkv:  # Qwen3-VL's attention: one projection for queries, keys and values
            tensors[f"{prefix}.attn_qkv.weight"] = weight(3 * WIDTH, WIDTH)
            tensors[f"{prefix}.attn_qkv.bias"] = weight(3 * WIDTH)
        for name in ("attn_out",) if fused_qkv else ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensors[f"{prefix}.{name}.weight"], tensors[f"{prefix}.{name}.bias"] = weight(WIDTH, WIDTH), weight(WIDTH)
        tensors[f"{prefix}.ffn_up.weight"], tensors[f"{prefix}.ffn_up.bias"] = weight(FFN, WIDTH), weight(FFN)
        tensors[f"{prefix}.ffn_down.weight"], tensors[f"{prefix}.ffn_down.bias"] = weight(WIDTH, FFN), weight(WIDTH)
    return tensors


def _mlp(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    return {"v.class_embd": weight(WIDTH), "v.position_embd.weight": weight(patches + 1, WIDTH),
            "v.pre_ln.weight": _ones(WIDTH), "v.pre_ln.bias": _zeros(WIDTH),
            "v.post_ln.weight": _ones(WIDTH), "v.post_ln.bias": _zeros(WIDTH),
            "mm.0.weight": weight(TEXT_WIDTH, WIDTH), "mm.0.bias": weight(TEXT_WIDTH),
            "mm.2.weight": weight(TEXT_WIDTH, TEXT_WIDTH), "mm.2.bias": weight(TEXT_WIDTH)}


def _gemma3(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    writer.add_vision_projector_scale_factor(GEMMA3_POOL)
    return {"v.position_embd.weight": weight(patches, WIDTH),
            "v.post_ln.weight": _ones(WIDTH), "v.post_ln.bias": _zeros(WIDTH),
            "mm.soft_emb_norm.weight": _ones(WIDTH),
            "mm.input_projection.weight": weight(WIDTH, TEXT_WIDTH)}  # ggml [text, vision]: clip.cpp transposes it


def _qwen2vl(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    patch = GEOMETRY["qwen2vl_merger"][1]
    merged = WIDTH * 4  # 2x2 patches to one token
    return {"v.patch_embd.weight.1": weight(WIDTH, 3, patch, patch),
            "v.post_ln.weight": _ones(WIDTH), "v.post_ln.bias": _zeros(WIDTH),
            "mm.0.weight": weight(merged, merged), "mm.0.bias": weight(merged),
            "mm.2.weight": weight(TEXT_WIDTH, merged), "mm.2.bias": weight(TEXT_WIDTH)}


def _qwen25vl(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    writer.add_vision_n_wa_pattern(2)  # full attention every second block, windowed in the others
    return _qwen2vl(writer, weight, patches)


def _qwen3vl(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    return _qwen2vl(writer, weight, patches) | {"v.patch_embd.bias": weight(WIDTH),
                                                 "v.position_embd.weight": weight(patches, WIDTH)}


def _idefics3(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    writer.add_vision_projector_scale_factor(IDEFICS3_MERGE)
    writer.add_vision_preproc_image_size(IDEFICS3_LONGEST_EDGE)
    return {"v.position_embd.weight": weight(patches, WIDTH),
            "v.post_ln.weight": _ones(WIDTH), "v.post_ln.bias": _zeros(WIDTH),
            "mm.model.fc.weight": weight(TEXT_WIDTH, WIDTH * IDEFICS3_MERGE ** 2)}


def _internvl(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    writer.add_vision_projector_scale_factor(2)
    shuffled = WIDTH * 4  # its pixel shuffle: 2x2 patches to one token
    return {"v.class_embd": weight(WIDTH), "v.position_embd.weight": weight(patches + 1, WIDTH),
            "mm.model.mlp.0.weight": _ones(shuffled), "mm.model.mlp.0.bias": _zeros(shuffled),
            "mm.model.mlp.1.weight": weight(TEXT_WIDTH, shuffled), "mm.model.mlp.1.bias": weight(TEXT_WIDTH),
            "mm.model.mlp.3.weight": weight(TEXT_WIDTH, TEXT_WIDTH), "mm.model.mlp.3.bias": weight(TEXT_WIDTH)}


def _pixtral(writer: gguf.GGUFWriter, weight: Weight, patches: int) -> dict[str, np.ndarray]:
    return {"v.pre_ln.weight": _ones(WIDTH),
            "mm.1.weight": weight(TEXT_WIDTH, WIDTH), "mm.1.bias": weight(TEXT_WIDTH),
            "mm.2.weight": weight(TEXT_WIDTH, TEXT_WIDTH), "mm.2.bias": weight(TEXT_WIDTH),
            "v.token_embd.img_break": weight(TEXT_WIDTH)}


_PROJECTOR_TENSORS: dict[str, Callable[[gguf.GGUFWriter, Weight, int], dict[str, np.ndarray]]] = {
    "mlp": _mlp, "gemma3": _gemma3, "qwen2vl_merger": _qwen2vl, "qwen2.5vl_merger": _qwen25vl,
    "qwen3vl_merger": _qwen3vl, "pixtral": _pixtral, "idefics3": _idefics3, "internvl": _internvl}
