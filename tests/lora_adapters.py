"""Tiny LoRA adapters for the embedded model (SmolLM2-135M), written as GGUF adapters the way llama.cpp reads them
(`general.type` adapter, `adapter.type` lora, `adapter.lora.alpha`; per adapted weight a `.lora_a` of shape
(rank, in) and a `.lora_b` of (out, rank), numpy order: llama.cpp's own convert_lora_to_gguf.py writes them so).
Random low-rank updates on every layer's feed-forward down projection, large enough to change what it writes."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from rostra.embedded import embedded_model_path


def build_adapter(path: Path, seed: int, rank: int = 4, strength: float = 0.15) -> Path:
    if path.is_file():
        return path
    reader = gguf.GGUFReader(embedded_model_path())
    targets = [(tensor.name, [int(n) for n in tensor.shape]) for tensor in reader.tensors
               if tensor.name.endswith("ffn_down.weight")]
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), arch="llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(rank))
    for name, (inputs, outputs) in targets:  # a GGUF shape lists ne0 (the input width) first
        writer.add_tensor(f"{name}.lora_a", (rng.standard_normal((rank, inputs)) * strength).astype(np.float32))
        writer.add_tensor(f"{name}.lora_b", (rng.standard_normal((outputs, rank)) * strength).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(path)
    return path
