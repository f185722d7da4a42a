"""A BERT sentence-transformers checkpoint (mean pooling, as all-MiniLM-L6-v2) written as an embedding GGUF in
llama.cpp's BERT layout, so the llama.cpp engine is tested on a real embedding GGUF: no package on the registries
reachable here ships one, and Hugging Face is not reachable.

The layout is llama.cpp's (as its gguf-py constants name it): architecture `bert`, non-causal attention, the
pooling in `bert.pooling_type`, tensors `token_embd`, `token_types`, `position_embd`, `token_embd_norm` and per
block `attn_q/k/v`, `attn_output`, `attn_output_norm`, `ffn_up`, `ffn_down`, `layer_output_norm`. The vocabulary
is WordPiece (`tokenizer.ggml.model` "bert"), which llama.cpp stores with word-initial pieces marked by a leading
U+2581 and continuation pieces ("##ing") without their "##"; bracketed special tokens stay as they are.

A cross-encoder (`BertForSequenceClassification`, no modules.json) is written as a reranking GGUF, as llama.cpp's
convert_hf_to_gguf.py writes one: `bert.pooling_type` rank, the pooler's dense layer as `cls` and the classifier
as `cls.output` (llama.cpp's rank pooling: tanh(cls . h[CLS]) then cls.output, the pooler and head of
transformers' model).
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file

WORD_START = "\u2581"
# The checkpoint's names (BertModel without its "bert." prefix) -> llama.cpp's; {i} is the layer.
_TENSORS = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
    "encoder.layer.{i}.attention.self.query": "blk.{i}.attn_q",
    "encoder.layer.{i}.attention.self.key": "blk.{i}.attn_k",
    "encoder.layer.{i}.attention.self.value": "blk.{i}.attn_v",
    "encoder.layer.{i}.attention.output.dense": "blk.{i}.attn_output",
    "encoder.layer.{i}.attention.output.LayerNorm": "blk.{i}.attn_output_norm",
    "encoder.layer.{i}.intermediate.dense": "blk.{i}.ffn_up",
    "encoder.layer.{i}.output.dense": "blk.{i}.ffn_down",
    "encoder.layer.{i}.output.LayerNorm": "blk.{i}.layer_output_norm",
}
_POOLING = {"pooling_mode_mean_tokens": gguf.PoolingType.MEAN, "pooling_mode_cls_token": gguf.PoolingType.CLS}


def write_bert_gguf(checkpoint: Path, target: Path, precision: str = "f32") -> None:
    """Write `checkpoint` (a sentence-transformers BERT directory) to `target`: matrices in `precision` (f32 or
    f16), vectors (biases, norms) always in F32, as llama.cpp's own files have them."""
    config = json.loads((checkpoint / "config.json").read_text())
    if config.get("model_type") != "bert":
        raise ValueError(f"{checkpoint}: a BERT checkpoint is needed, not {config.get('model_type')}")
    writer = gguf.GGUFWriter(target, "bert")
    writer.add_name(checkpoint.name)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if precision == "f16" else gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    classifier = "ForSequenceClassification" in "".join(config.get("architectures") or [])
    writer.add_pooling_type(gguf.PoolingType.RANK if classifier else _pooling(checkpoint))
    _add_vocabulary(writer, checkpoint, config.get("type_vocab_size", 2), classifier)
    weights = load_file(checkpoint / "model.safetensors")
    # F16: the matrices that llama.cpp multiplies with or looks rows up in; the position and token-type tables are
    # added to the activations as they are, and llama.cpp's CPU addition takes F32 only (an F16 table aborts it).
    tensors = list(_renamed(weights, config["num_hidden_layers"], classifier))
    halved = {name for name, array in tensors
              if array.ndim == 2 and name not in ("position_embd.weight", "token_types.weight")}
    for name, array in tensors:
        writer.add_tensor(name, array.astype(np.float16 if precision == "f16" and name in halved else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _pooling(checkpoint: Path) -> gguf.PoolingType:
    modules = json.loads((checkpoint / "modules.json").read_text())
    pooling = next(m for m in modules if m["type"].endswith("Pooling"))
    config = json.loads((checkpoint / pooling["path"] / "config.json").read_text())
    chosen = [mode for mode in _POOLING if config.get(mode)]
    if len(chosen) != 1:
        raise ValueError(f"{checkpoint}: llama.cpp pools by mean or CLS alone, not {config}")
    return _POOLING[chosen[0]]


def _add_vocabulary(writer: gguf.GGUFWriter, checkpoint: Path, token_type_count: int, classifier: bool = False) -> None:
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text())
    model = tokenizer["model"]
    if model["type"] != "WordPiece":
        raise ValueError(f"{checkpoint}: a WordPiece tokenizer is needed, not {model['type']}")
    by_id = {index: piece for piece, index in model["vocab"].items()}
    pieces = [by_id[index] for index in range(len(by_id))]
    special = {added["id"]: added["content"] for added in tokenizer["added_tokens"] if added["special"]}
    prefix = model.get("continuing_subword_prefix", "##")

    def stored(index: int, piece: str) -> str:
        if index in special:
            return piece
        return piece[len(prefix):] if piece.startswith(prefix) else WORD_START + piece

    writer.add_tokenizer_model("bert")
    writer.add_token_list([stored(index, piece) for index, piece in enumerate(pieces)])
    writer.add_token_types([gguf.TokenType.CONTROL if index in special else gguf.TokenType.NORMAL
                            for index in range(len(pieces))])
    writer.add_token_type_count(token_type_count)
    ids = model["vocab"]
    # [CLS] opens every input and [SEP] closes it (the tokenizer's post-processor): llama.cpp adds them as
    # its BOS and separator tokens.
    writer.add_bos_token_id(ids["[CLS]"])
    writer.add_sep_token_id(ids["[SEP]"])
    writer.add_unk_token_id(ids["[UNK]"])
    writer.add_pad_token_id(ids["[PAD]"])
    writer.add_mask_token_id(ids["[MASK]"])
    writer.add_add_bos_token(True)
    if classifier:
        # As gguf-py's SpecialVocab reads the pair template `[CLS] $A [SEP] $B [SEP]` (convert_hf_to_gguf.py):
        # [SEP] as EOS, added after each text, so llama.cpp's rerank prompt ([BOS] query [EOS] [SEP] doc [EOS],
        # its format_prompt_rerank) is transformers' pair.
        writer.add_eos_token_id(ids["[SEP]"])
        writer.add_add_sep_token(False)
        writer.add_add_eos_token(True)
    else:
        writer.add_add_sep_token(True)
        writer.add_add_eos_token(False)


def _renamed(weights: dict[str, np.ndarray], layers: int, classifier: bool = False):
    """(llama.cpp name, array) for every weight and bias the model uses (not the pooler, which mean pooling
    never reads, nor the position-id buffer; a classifier's pooler and head as llama.cpp's `cls` tensors)."""
    names = {}
    if classifier:
        names.update({f"pooler.dense.{s}": f"cls.{s}" for s in ("weight", "bias")})
        names.update({f"classifier.{s}": f"cls.output.{s}" for s in ("weight", "bias")})
    for source, target in _TENSORS.items():
        tables = source.endswith("_embeddings")  # lookup tables: a weight and no bias
        for i in range(layers) if "{i}" in source else [None]:
            for suffix in ("weight",) if tables else ("weight", "bias"):
                names[f"{source.format(i=i)}.{suffix}"] = f"{target.format(i=i)}.{suffix}"
    for name, array in weights.items():
        name = name.removeprefix("bert.")
        if name in names:
            yield names.pop(name), array
    if names:
        raise ValueError(f"the checkpoint lacks {sorted(names)[:5]}")
