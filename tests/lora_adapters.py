"""Tiny LoRA adapters for the embedded model (SmolLM2-135M), written as GGUF adapters the way llama.cpp reads them
(`general.type` adapter, `adapter.type` lora, `adapter.lora.alpha`; per adapted weight a `.lora_a` of shape
(rank, in) and a `.lora_b` of (out, rank), numpy order: llama.cpp's own convert_lora_to_gguf.py writes them so).
Random low-rank updates on every layer's feed-forward down projection, large enough to change what it writes.

For the transformers engine: PEFT adapter directories over a tiny random causal LM, as PEFT itself saves them."""

from __future__ import annotations

import shutil
import tempfile
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


# -- PEFT adapters for the transformers engine ------------------------------------------------------------------

def tiny_causal_checkpoint(tokenizer_source: Path, target: Path) -> Path:
    """A tiny Llama causal LM (random, seeded: a few MB, fast to load and run) with `tokenizer_source`'s tokenizer
    (SmolLM2's, with its chat template): what the transformers engine serves under the adapters built below."""
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(48)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=False, initializer_range=0.2, architectures=["LlamaForCausalLM"],
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    model = LlamaForCausalLM(config).eval()
    staging = _staging(target)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def build_peft_adapter(base: Path, target: Path, seed: int, rank: int = 4) -> Path:
    """A PEFT LoRA adapter over `base`, written as PEFT's save_pretrained writes one (adapter_config.json,
    adapter_model.safetensors): on the attention's q and v projections and the feed-forward down projection, both
    matrices random (`init_lora_weights=False`: a trained adapter's B is not zero either), large enough to change
    what the model writes."""
    if (target / "adapter_model.safetensors").is_file():
        return target
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj", "down_proj"],
                        init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), config)
    staging = _staging(target)
    model.save_pretrained(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _staging(target: Path) -> Path:
    """Built beside the target and moved into place: a crash never leaves half a checkpoint."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
