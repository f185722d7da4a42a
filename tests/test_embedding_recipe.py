"""How a checkpoint's files become an embedding recipe (rostra/engines/embedding_recipe.py), and rostra's
pooling against sentence-transformers' own Pooling module, every mode, on padded random hidden states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rostra.engines.embedding_recipe import POOLING_MODES, RecipeError, is_embedding_checkpoint, read_recipe
from rostra.engines.transformers_embed import pool


def write(path: Path, name: str, content) -> None:
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(json.dumps(content))


def test_minilm_is_a_sentence_transformers_checkpoint(minilm_checkpoint):
    assert is_embedding_checkpoint(minilm_checkpoint)
    recipe = read_recipe(minilm_checkpoint, is_decoder=False)
    assert (recipe.pooling, recipe.normalize, recipe.max_seq_length, recipe.dense) == (("mean",), True, 256, ())
    assert recipe.model_dir == minilm_checkpoint and recipe.matryoshka is None
    assert read_recipe(minilm_checkpoint, False, pooling="cls").pooling == ("cls",)


def test_plain_checkpoints_by_architecture(tmp_path):
    write(tmp_path / "encoder", "config.json", {"architectures": ["BertModel"], "matryoshka_dimensions": [256, 64]})
    write(tmp_path / "decoder", "config.json", {"architectures": ["LlamaForCausalLM"], "is_matryoshka": True})
    assert is_embedding_checkpoint(tmp_path / "encoder") and not is_embedding_checkpoint(tmp_path / "decoder")
    encoder = read_recipe(tmp_path / "encoder", is_decoder=False)
    decoder = read_recipe(tmp_path / "decoder", is_decoder=True)
    assert (encoder.pooling, encoder.normalize, encoder.matryoshka) == (("mean",), True, (64, 256))
    assert (decoder.pooling, decoder.normalize, decoder.matryoshka) == (("lasttoken",), True, ())


def test_sentence_transformers_modules_with_dense_and_several_poolings(tmp_path):
    write(tmp_path, "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])
    write(tmp_path, "sentence_bert_config.json", {"max_seq_length": 128, "do_lower_case": True})
    write(tmp_path, "1_Pooling/config.json", {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True,
                                              "pooling_mode_max_tokens": False})
    write(tmp_path, "2_Dense/config.json", {"in_features": 768, "out_features": 256, "bias": True,
                                            "activation_function": "torch.nn.modules.activation.Tanh"})
    recipe = read_recipe(tmp_path, is_decoder=False)
    assert recipe.pooling == ("cls", "mean") and not recipe.normalize and recipe.do_lower_case
    assert [(d.in_features, d.out_features, d.activation) for d in recipe.dense] == [(768, 256, "Tanh")]
    write(tmp_path, "modules.json", [{"idx": 0, "path": "", "type": "sentence_transformers.models.CLIPModel"}])
    with pytest.raises(RecipeError, match="CLIPModel"):
        read_recipe(tmp_path, is_decoder=False)


def test_newer_pooling_configs_name_their_modes(tmp_path):
    write(tmp_path, "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.sentence_transformer.modules.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.sentence_transformer.modules.Normalize"}])
    write(tmp_path, "1_Pooling/config.json", {"embedding_dimension": 8, "pooling_mode": ["mean_sqrt_len_tokens", "cls"]})
    recipe = read_recipe(tmp_path, is_decoder=False)
    assert recipe.pooling == ("cls", "mean_sqrt_len") and recipe.normalize


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_pooling_is_sentence_transformers_pooling(mode):
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.manual_seed(0)
    lengths = torch.tensor([5, 2, 7, 1])
    hidden = torch.randn(4, 7, 16)
    mask = (torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)).long()
    theirs = Pooling(16, pooling_mode="mean_sqrt_len_tokens" if mode == "mean_sqrt_len" else mode)({"token_embeddings": hidden.clone(), "attention_mask": mask})
    ours = pool(hidden.clone(), mask, lengths, (mode,))
    assert torch.allclose(ours, theirs["sentence_embedding"], atol=1e-6)


def test_gguf_pooling_metadata():
    """BERT-family embedding GGUFs declare `{arch}.pooling_type` (llama.cpp's enum); generative ones do not."""
    from rostra.engines.llamacpp import declared_pooling

    assert declared_pooling({"general.architecture": "bert", "bert.pooling_type": 1}) == "mean"
    assert declared_pooling({"general.architecture": "nomic-bert", "nomic-bert.pooling_type": 2}) == "cls"
    assert declared_pooling({"general.architecture": "qwen3", "qwen3.pooling_type": 3}) == "last"
    assert declared_pooling({"general.architecture": "llama"}) is None
    assert declared_pooling({"general.architecture": "bert", "bert.pooling_type": 0}) is None  # none: per token
