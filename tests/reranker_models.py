"""Tiny reranker weights for the tests, built here (no reranker ships in a package reachable from this machine and
Hugging Face is not reachable), written once into the checkout's git-ignored .cache/.

- A cross-encoder: `BertForSequenceClassification` with one label, as bge-reranker (XLM-R) is: the pair is read
  as `[CLS] query [SEP] document [SEP]`, the pooler (dense + tanh on [CLS]) then the classifier give one logit.
  One token type, as XLM-R's (type_vocab_size 1, and no token_type_ids from its tokenizer): llama.cpp's BERT
  graph adds token type 0 to every token, so a cross-encoder trained with types 0 and 1 for query and document
  (the ms-marco MiniLM ones) scores differently under llama.cpp than under transformers. Its vocabulary and tokenizer are
  all-MiniLM-L6-v2's (a real WordPiece one); its weights are random (seeded) and small, so scores differ between
  pairs and every number is checked against transformers' own forward pass.
- The same weights as a reranking GGUF in llama.cpp's BERT layout (tests/bert_gguf.py with the classifier: the
  pooler as `cls`, the classifier as `cls.output`, `bert.pooling_type` 4, rank), as llama.cpp's
  convert_hf_to_gguf.py writes a BertForSequenceClassification.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from embedding_models import CACHE, minilm_checkpoint

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def cross_encoder_checkpoint(head_dim: int = 16) -> Path:
    """A tiny cross-encoder (BertForSequenceClassification, one label); `head_dim` 64 (one head of 64) for vLLM's
    CPU attention, which takes no head_dim of 16."""
    target = CACHE / ("tiny-cross-encoder" if head_dim == 16 else f"tiny-cross-encoder-h{head_dim}")
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    source = minilm_checkpoint()
    torch.manual_seed(47)
    heads = 2 if head_dim == 16 else 1
    config = BertConfig(vocab_size=30522, hidden_size=head_dim * heads, num_hidden_layers=2, num_attention_heads=heads,
                        intermediate_size=2 * head_dim * heads, max_position_embeddings=512, num_labels=1,
                        type_vocab_size=1,
                        architectures=["BertForSequenceClassification"])
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # larger than the init's 0.02 spread, so scores of different pairs differ clearly
        for parameter in model.parameters():
            parameter.mul_(8.0 if parameter.ndim == 2 else 1.0)
    CACHE.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=CACHE))
    model.save_pretrained(staging)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, staging / name)
    tokenizer_config = staging / "tokenizer_config.json"
    settings = json.loads(tokenizer_config.read_text())
    settings["model_input_names"] = ["input_ids", "attention_mask"]  # one token type: none given
    tokenizer_config.write_text(json.dumps(settings, indent=1))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # complete or absent, never half there
    return target


def cross_encoder_gguf() -> Path:
    from bert_gguf import write_bert_gguf

    target = CACHE / "tiny-cross-encoder-f32.gguf"
    if target.is_file():
        return target
    checkpoint = cross_encoder_checkpoint()
    staging = target.with_suffix(f".{os.getpid()}.partial")
    write_bert_gguf(checkpoint, staging)
    staging.rename(target)
    return target


def decoder_reranker_checkpoint(tokenizer_source: Path) -> Path:
    """A tiny Qwen3 causal LM (random, seeded) with `tokenizer_source`'s tokenizer (SmolLM2's: ChatML markup, and
    "yes" and "no" as single tokens), served with `--task rerank` as the Qwen3 rerankers are: scored from its
    yes/no logits."""
    target = CACHE / "tiny-decoder-reranker"
    if (target / "model.safetensors").is_file():
        return target
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(47)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
                         tie_word_embeddings=False, initializer_range=0.5, architectures=["Qwen3ForCausalLM"],
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    model = Qwen3ForCausalLM(config).eval()
    CACHE.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="tiny-decoder-reranker.", dir=CACHE))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
