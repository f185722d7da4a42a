"""transformers engine for embedding models (`--task embed`, or detected: embedding_recipe.py).

The checkpoint's recipe (embedding_recipe.py) says how token ids become a vector: the transformer's last
hidden states (AutoModel), pooled over the real tokens (cls / mean / max / mean_sqrt_len / weightedmean /
last token, concatenated as sentence-transformers does), then its Dense layers and Normalize, computed as
sentence-transformers computes them. Concurrent requests are batched (embed_batcher.py): rows of similar
length padded together, on one worker thread; tokenization runs in threads too, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import AsyncGenerator

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from rostra.core import EngineOutput, ModelInfo, Prompt, SamplingParams
from rostra.engines.base import Engine, EngineError
from rostra.engines.embed_batcher import EmbeddingBatcher
from rostra.engines.embedding_recipe import DenseLayer, EmbeddingRecipe, RecipeError, read_recipe
from rostra.engines.transformers import cpu_threads, pick_device, pick_dtype

log = logging.getLogger("rostra.engine.transformers")

_ACTIVATIONS = {"Identity": torch.nn.Identity, "Tanh": torch.nn.Tanh, "ReLU": torch.nn.ReLU, "GELU": torch.nn.GELU,
                "Sigmoid": torch.nn.Sigmoid, "SiLU": torch.nn.SiLU}


def pool(hidden: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor, modes: tuple[str, ...]) -> torch.Tensor:
    """Rows of right-padded hidden states -> one vector each, the modes concatenated (sentence-transformers'
    Pooling, its formulas and order)."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    counts = weights.sum(1).clamp(min=1e-9)
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(hidden.masked_fill(weights == 0, -1e9).max(1).values)
        elif mode == "mean":
            parts.append((hidden * weights).sum(1) / counts)
        elif mode == "mean_sqrt_len":
            parts.append((hidden * weights).sum(1) / counts.sqrt())
        elif mode == "weightedmean":
            positions = torch.arange(1, hidden.shape[1] + 1, device=hidden.device, dtype=hidden.dtype)
            weighted = weights * positions.view(1, -1, 1)
            parts.append((hidden * weighted).sum(1) / weighted.sum(1).clamp(min=1e-9))
        elif mode == "lasttoken":
            parts.append(hidden[torch.arange(hidden.shape[0], device=hidden.device), lengths - 1])
    return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]


def _dense(layer: DenseLayer, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    if layer.activation not in _ACTIVATIONS:
        raise RecipeError(f"{layer.path}: Dense activation {layer.activation} is not supported")
    linear = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias)
    weights_file = layer.path / "model.safetensors"
    if weights_file.is_file():
        from safetensors.torch import load_file

        state = load_file(str(weights_file))
    else:
        state = torch.load(layer.path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    linear.load_state_dict({key.removeprefix("linear."): value for key, value in state.items()})
    return torch.nn.Sequential(linear, _ACTIVATIONS[layer.activation]()).to(device=device, dtype=dtype).eval()


class TransformersEmbeddingEngine(Engine):
    task = "embed"

    def __init__(self, model: str, model_name: str | None = None, max_model_len: int | None = None,
                 dtype: str = "auto", device: str = "auto", threads: int | None = None, pooling: str | None = None,
                 matryoshka: bool = False):
        self.source = model
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        self.threads = threads
        config = AutoConfig.from_pretrained(model)
        is_decoder = any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in config.architectures or ())
        self.recipe: EmbeddingRecipe = read_recipe(model if Path(model).exists() else "", is_decoder, pooling)
        self.tokenizer = AutoTokenizer.from_pretrained(self.recipe.model_dir if Path(model).exists() else model)
        text_config = config.get_text_config()
        trained = self.recipe.max_seq_length or min(getattr(text_config, "max_position_embeddings", None) or 512,
                                                    self.tokenizer.model_max_length)
        name = model_name or (Path(model).name if Path(model).exists() else model)
        self.model = ModelInfo(id=name, context_length=min(max_model_len or trained, trained))
        self.vocab_size = len(self.tokenizer)
        width = text_config.hidden_size * len(self.recipe.pooling)
        self.embedding_dimensions = self.recipe.dense[-1].out_features if self.recipe.dense else width
        self.normalizes_embeddings = self.recipe.normalize
        self.matryoshka_dimensions = () if matryoshka else self.recipe.matryoshka
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.hf_model = None
        self._head: list[torch.nn.Module] = []
        # Padded tokens per forward pass: what keeps a CPU's caches warm, and a GPU's memory in bounds.
        budget = 8192 if self.device.type == "cpu" else 65536
        self._batcher = EmbeddingBatcher(self._run_batch, max_batch_tokens=max(budget, self.model.context_length),
                                         prepare=self._set_threads)

    async def start(self) -> None:
        started = time.monotonic()
        await asyncio.to_thread(self._load)
        self._batcher.start()
        log.info("loaded %s for embeddings on %s (%s) in %.1f s: %s, pooling %s%s, %d dimensions", self.source,
                 self.device, str(self.dtype).removeprefix("torch."), time.monotonic() - started, self.recipe.source,
                 "+".join(self.recipe.pooling), ", normalized" if self.recipe.normalize else "",
                 self.embedding_dimensions)

    def _set_threads(self) -> None:
        """torch's CPU threads, set in the thread that runs the model: OpenMP keeps the setting per thread."""
        if self.threads:
            torch.set_num_threads(self.threads)
        elif self.device.type == "cpu":
            torch.set_num_threads(cpu_threads())

    def _load(self) -> None:
        self._set_threads()
        model = AutoModel.from_pretrained(self.recipe.model_dir if Path(self.source).exists() else self.source,
                                          dtype=self.dtype)
        self.hf_model = model.to(self.device).eval()  # type: ignore[arg-type]
        self._head = [_dense(layer, self.device, self.dtype) for layer in self.recipe.dense]

    async def close(self) -> None:
        if self.hf_model is not None:
            await asyncio.to_thread(self._batcher.stop)
        self.hf_model = None

    # -- tokens ----------------------------------------------------------------------------------------

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        return (await self.tokenize_texts([text], add_special, None))[0]

    async def tokenize_texts(self, texts: list[str], add_special: bool, truncate_to: int | None) -> list[list[int]]:
        return await asyncio.to_thread(self._tokenize, texts, add_special, truncate_to)

    def _tokenize(self, texts: list[str], add_special: bool, truncate_to: int | None) -> list[list[int]]:
        # As sentence-transformers' Transformer module: lower-cased if its config says so; cut by the tokenizer
        # itself (which keeps [SEP] / EOS) when truncating.
        if self.recipe.do_lower_case:
            texts = [text.lower() for text in texts]
        encoded = self.tokenizer(texts, add_special_tokens=add_special, truncation=truncate_to is not None,
                                 max_length=truncate_to)
        return [list(ids) for ids in encoded["input_ids"]]

    async def detokenize(self, token_ids: list[int]) -> str:
        text = await asyncio.to_thread(self.tokenizer.decode, token_ids)
        assert isinstance(text, str)
        return text

    def token_bytes(self, token_id: int) -> bytes:
        return b""  # nothing is generated: no token's bytes are ever streamed

    # -- embeddings ------------------------------------------------------------------------------------

    def queued_requests(self) -> int:
        return self._batcher.waiting_requests()

    async def embed(self, inputs: list[list[int]]) -> list[list[float]]:
        if self.hf_model is None:
            raise EngineError("engine not started")
        try:
            return await self._batcher.embed(inputs)
        except RuntimeError as exc:
            raise EngineError(f"transformers failed: {exc}") from exc

    @torch.inference_mode()
    def _run_batch(self, rows: list[list[int]]) -> list[list[float]]:
        """One forward pass over right-padded rows, pooled (in the worker thread)."""
        assert self.hf_model is not None
        longest = max(len(row) for row in rows)
        ids = torch.full((len(rows), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, :len(row)] = torch.tensor(row, dtype=torch.long)
            mask[index, :len(row)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        hidden = self.hf_model(input_ids=ids, attention_mask=mask).last_hidden_state
        lengths = torch.tensor([len(row) for row in rows], device=self.device)
        vectors = pool(hidden, mask, lengths, self.recipe.pooling)
        for layer in self._head:
            vectors = layer(vectors)
        if self.recipe.normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors.float().cpu().tolist()

    # -- no generation -----------------------------------------------------------------------------------

    def generate(self, request_id: str, prompt: Prompt, params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        raise EngineError("an embedding model does not generate")

    async def abort(self, request_id: str) -> None:
        pass
