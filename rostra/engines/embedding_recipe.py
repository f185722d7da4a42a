"""How a checkpoint turns token ids into one embedding vector: read from its files, without torch.

A sentence-transformers checkpoint says it in `modules.json`: a Transformer module (the model in a
folder, `sentence_bert_config.json`: max_seq_length, do_lower_case), then Pooling (its `config.json`:
which of cls / mean / max / mean_sqrt_len / weightedmean / lasttoken, concatenated in that order),
optional Dense layers, and Normalize. A checkpoint without it is a plain encoder (mean pooling) or a
decoder (last-token pooling), normalized either way, as vLLM and the embedding models' cards do.
`--pooling` overrides the pooling of any of them.

Whether a checkpoint is an embedding model at all (`--task auto`) is read here too: sentence-transformers
files, or an architecture without a language-model head.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Pooling modes in the order sentence-transformers concatenates them (its Pooling.forward), and the key
# that switches each on in a Pooling config.json.
POOLING_KEYS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens", "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
                "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
POOLING_MODES = tuple(POOLING_KEYS)
# --pooling's names for them (vLLM's and llama.cpp's: last, cls, mean) -> sentence-transformers' names.
POOLING_FLAG = {"mean": "mean", "cls": "cls", "last": "lasttoken", "max": "max"}
_GENERATIVE_HEADS = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
_CLASSIFIER_HEADS = ("ForSequenceClassification",)


class RecipeError(ValueError):
    """The checkpoint asks for something rostra does not compute."""


@dataclass(frozen=True)
class DenseLayer:
    path: Path  # the module's folder: config.json and its weights
    in_features: int
    out_features: int
    bias: bool
    activation: str  # the last part of torch's class path: Tanh, Identity, ...


@dataclass(frozen=True)
class EmbeddingRecipe:
    model_dir: Path  # where the transformer's config and weights are
    pooling: tuple[str, ...]  # POOLING_MODES, concatenated in that order
    normalize: bool
    max_seq_length: int | None = None  # sentence-transformers' own limit (truncation) when it sets one
    do_lower_case: bool = False
    dense: tuple[DenseLayer, ...] = ()
    # The Matryoshka widths the checkpoint declares: None none, () any (see Engine.matryoshka_dimensions).
    matryoshka: tuple[int, ...] | None = None
    source: str = field(default="plain encoder", compare=False)  # for the log


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def is_embedding_checkpoint(path: str | Path) -> bool:
    """A local checkpoint with sentence-transformers' modules.json, or whose architectures have no
    language-model head (BertModel, XLMRobertaModel, ...) nor a classifier (a reranker's)."""
    path = Path(path)
    if (path / "modules.json").is_file():
        return True
    architectures = _architectures(path)
    return bool(architectures) and not any(name.endswith(_GENERATIVE_HEADS + _CLASSIFIER_HEADS)
                                           for name in architectures)


def is_reranker_checkpoint(path: str | Path) -> bool:
    """A local checkpoint whose config names a ...ForSequenceClassification architecture: a cross-encoder."""
    return any(name.endswith(_CLASSIFIER_HEADS) for name in _architectures(Path(path)))


def _architectures(path: Path) -> list[str]:
    if not (path / "config.json").is_file():
        return []
    return list(_json(path / "config.json").get("architectures") or [])


def read_recipe(path: str | Path, is_decoder: bool, pooling: str | None = None) -> EmbeddingRecipe:
    """The recipe of a local checkpoint (hub ids: the plain default for its kind)."""
    path = Path(path)
    config = _json(path / "config.json") if (path / "config.json").is_file() else {}
    matryoshka = _matryoshka(config)
    if (path / "modules.json").is_file():
        recipe = _sentence_transformers(path, matryoshka)
    else:
        recipe = EmbeddingRecipe(path, ("lasttoken",) if is_decoder else ("mean",), True, matryoshka=matryoshka,
                                 source="decoder: last-token pooling" if is_decoder else "encoder: mean pooling")
    if pooling is not None:
        recipe = EmbeddingRecipe(recipe.model_dir, (POOLING_FLAG[pooling],), recipe.normalize,
                                 recipe.max_seq_length, recipe.do_lower_case, recipe.dense, recipe.matryoshka,
                                 f"{recipe.source}, pooling {pooling} (--pooling)")
    return recipe


def _matryoshka(config: dict) -> tuple[int, ...] | None:
    """vLLM's reading of a checkpoint's config.json: `matryoshka_dimensions` (the widths) or `is_matryoshka`."""
    widths = config.get("matryoshka_dimensions")
    if widths:
        return tuple(sorted(int(width) for width in widths))
    return () if config.get("is_matryoshka") else None


def _sentence_transformers(path: Path, matryoshka: tuple[int, ...] | None) -> EmbeddingRecipe:
    modules = sorted(_json(path / "modules.json"), key=lambda module: int(module.get("idx", 0)))
    model_dir: Path | None = None
    pooling: tuple[str, ...] = ()
    normalize = False
    max_seq_length, lower = None, False
    dense: list[DenseLayer] = []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]  # the class, wherever its release keeps it
        folder = path / module.get("path", "")
        if kind == "Transformer":
            model_dir = folder
            settings = folder / "sentence_bert_config.json"
            if settings.is_file():
                values = _json(settings)
                max_seq_length, lower = values.get("max_seq_length"), bool(values.get("do_lower_case"))
        elif kind == "Pooling":
            pooling = _pooling_modes(_json(folder / "config.json"))
        elif kind == "Dense":
            values = _json(folder / "config.json")
            dense.append(DenseLayer(folder, int(values["in_features"]), int(values["out_features"]),
                                    bool(values.get("bias", True)),
                                    str(values.get("activation_function", "Identity")).rsplit(".", 1)[-1]))
        elif kind == "Normalize":
            normalize = True
        else:
            raise RecipeError(f"{path}: sentence-transformers module {module.get('type')!r} is not supported")
    if model_dir is None or not pooling:
        raise RecipeError(f"{path}: modules.json has no Transformer or no Pooling module")
    return EmbeddingRecipe(model_dir, pooling, normalize, max_seq_length, lower, tuple(dense), matryoshka,
                           "sentence-transformers modules.json")


def _pooling_modes(config: dict) -> tuple[str, ...]:
    """Older configs switch modes on one key each; sentence-transformers 5+ writes `pooling_mode`, a name or
    a list of names (`mean_sqrt_len_tokens` for mean_sqrt_len)."""
    if config.get("include_prompt") is False:
        raise RecipeError("Pooling with include_prompt false (instruction tokens left out) is not supported")
    named = config.get("pooling_mode")
    if named:
        names = {str(name).removesuffix("_tokens") for name in ([named] if isinstance(named, str) else named)}
        unknown = names - set(POOLING_MODES)
        if unknown:
            raise RecipeError(f"Pooling mode {', '.join(sorted(unknown))} is not supported")
        return tuple(mode for mode in POOLING_MODES if mode in names)
    modes = tuple(mode for mode, key in POOLING_KEYS.items() if config.get(key))
    if not modes:
        raise RecipeError(f"Pooling config names no mode: {config}")
    return modes
