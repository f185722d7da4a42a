"""transformers engine for rerankers (`--task rerank`, or detected: a ...ForSequenceClassification checkpoint).

Two kinds, each scored as its reference does:
- a cross-encoder (a sequence-classification checkpoint with one label: bge-reranker, the ms-marco MiniLM ones):
  the pair through the tokenizer as a text pair (`[CLS] query [SEP] document [SEP]`, token types where the model
  has them), the classifier's logit through sentence-transformers' CrossEncoder activation (a sigmoid, unless the
  checkpoint's config names another in `sentence_transformers.activation_fn`), as CrossEncoder.predict and vLLM's
  score API give it;
- a decoder reranker (a causal LM served with `--task rerank`, as the Qwen3 rerankers): the pair in the prompt the
  Qwen3-Reranker model card writes (a system turn asking for "yes" or "no", the user turn
  `<Instruct>: ...\n<Query>: ...\n<Document>: ...`, an empty think block opening the answer), the score
  P(yes) = softmax(logit(no), logit(yes))[yes] at the last position, the card's compute_logits.
The forward passes run in one worker thread, a few pairs at a time, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any, AsyncGenerator, Callable

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from rostra.core import EngineOutput, ModelInfo, Prompt, SamplingParams
from rostra.engines.base import Engine, EngineError, PairScores, PairTooLong
from rostra.engines.transformers import cpu_threads, pick_device, pick_dtype

log = logging.getLogger("rostra.engine.transformers")

# The Qwen3-Reranker model card's prompt (Qwen/Qwen3-Reranker-0.6B, "Transformers Usage").
DECODER_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                  "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
                  "<|im_start|>user\n")
DECODER_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
DECODER_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"Sigmoid": torch.sigmoid,
                                                                   "Identity": lambda logits: logits}
PAIRS_PER_PASS = 16


def decoder_prompt(query: str, document: str) -> str:
    return (f"{DECODER_PREFIX}<Instruct>: {DECODER_INSTRUCTION}\n<Query>: {query}\n<Document>: {document}"
            f"{DECODER_SUFFIX}")


class TransformersRerankEngine(Engine):
    task = "rerank"
    engine_name = "transformers"

    def __init__(self, model: str, model_name: str | None = None, max_model_len: int | None = None,
                 dtype: str = "auto", device: str = "auto", threads: int | None = None):
        self.source = model
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        self.threads = threads
        config = AutoConfig.from_pretrained(model)
        self.cross_encoder = any(name.endswith("ForSequenceClassification") for name in config.architectures or ())
        if self.cross_encoder and getattr(config, "num_labels", 1) != 1:
            raise ValueError(f"{model}: a cross-encoder reranks with one label (a relevance logit), not "
                             f"{config.num_labels}")
        activation = ((getattr(config, "sentence_transformers", None) or {}).get("activation_fn") or "Sigmoid")
        name_of = activation.rsplit(".", 1)[-1]
        if name_of not in _ACTIVATIONS:
            raise ValueError(f"{model}: the activation {activation} is not supported (Sigmoid or Identity)")
        self.activation = _ACTIVATIONS[name_of]
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        text_config = config.get_text_config()
        trained = min(getattr(text_config, "max_position_embeddings", None) or 512, self.tokenizer.model_max_length)
        self.model = ModelInfo(id=model_name or (Path(model).name if Path(model).exists() else model),
                               context_length=min(max_model_len or trained, trained))
        self.vocab_size = len(self.tokenizer)
        self.hf_model: Any = None
        self._lock = threading.Lock()  # one forward pass at a time: the model is not shared between threads
        if not self.cross_encoder:
            self.yes_id, self.no_id = (self.tokenizer.convert_tokens_to_ids(word) for word in ("yes", "no"))
            if self.yes_id is None or self.yes_id == self.tokenizer.unk_token_id:
                raise ValueError(f"{model}: a decoder reranker needs 'yes' and 'no' tokens in its vocabulary")

    async def start(self) -> None:
        started = time.monotonic()
        await asyncio.to_thread(self._load)
        log.info("loaded %s as a %s on %s in %.1f s", self.source,
                 "cross-encoder" if self.cross_encoder else "decoder reranker (yes/no)", self.device,
                 time.monotonic() - started)

    def _set_threads(self) -> None:
        torch.set_num_threads(self.threads or (cpu_threads() if self.device.type == "cpu" else 1))

    def _load(self) -> None:
        self._set_threads()
        kind = AutoModelForSequenceClassification if self.cross_encoder else AutoModelForCausalLM
        model = kind.from_pretrained(self.source, dtype=self.dtype)
        self.hf_model = model.to(self.device).eval()  # type: ignore[arg-type]

    async def close(self) -> None:
        self.hf_model = None

    async def score_pairs(self, pairs: list[tuple[str, str]]) -> PairScores:
        if self.hf_model is None:
            raise EngineError("engine not started")
        rows = await asyncio.to_thread(self._encode, pairs)
        for index, row in enumerate(rows):
            if len(row["input_ids"]) > self.model.context_length:
                raise PairTooLong(index, len(row["input_ids"]), self.model.context_length)
        try:
            scores = await asyncio.to_thread(self._score_rows, rows)
        except RuntimeError as exc:
            raise EngineError(f"transformers failed: {exc}") from exc
        return PairScores(scores, sum(len(row["input_ids"]) for row in rows))

    def _encode(self, pairs: list[tuple[str, str]]) -> list[dict[str, list[int]]]:
        if self.cross_encoder:
            encoded = self.tokenizer([query for query, _ in pairs], [document for _, document in pairs])
        else:
            encoded = self.tokenizer([decoder_prompt(query, document) for query, document in pairs],
                                     add_special_tokens=False)
        names = [name for name in ("input_ids", "token_type_ids") if name in encoded]
        return [{name: list(encoded[name][index]) for name in names} for index in range(len(pairs))]

    @torch.inference_mode()
    def _score_rows(self, rows: list[dict[str, list[int]]]) -> list[float]:
        with self._lock:
            self._set_threads()
            scores: list[float] = []
            for start in range(0, len(rows), PAIRS_PER_PASS):
                scores += self._pass(rows[start:start + PAIRS_PER_PASS])
            return scores

    def _pass(self, rows: list[dict[str, list[int]]]) -> list[float]:
        """One forward pass over right-padded rows."""
        assert self.hf_model is not None
        longest = max(len(row["input_ids"]) for row in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        inputs = {name: torch.full((len(rows), longest), pad if name == "input_ids" else 0, dtype=torch.long)
                  for name in rows[0]}
        mask = torch.zeros((len(rows), longest), dtype=torch.long)
        for index, row in enumerate(rows):
            for name, values in row.items():
                inputs[name][index, :len(values)] = torch.tensor(values, dtype=torch.long)
            mask[index, :len(row["input_ids"])] = 1
        tensors = {name: value.to(self.device) for name, value in inputs.items()}
        output = self.hf_model(**tensors, attention_mask=mask.to(self.device))
        if self.cross_encoder:
            return self.activation(output.logits[:, 0].float()).cpu().tolist()
        last = torch.tensor([len(row["input_ids"]) - 1 for row in rows], device=self.device)
        logits = output.logits[torch.arange(len(rows), device=self.device), last].float()
        pair = torch.stack([logits[:, self.no_id], logits[:, self.yes_id]], dim=1)
        return torch.softmax(pair, dim=1)[:, 1].cpu().tolist()

    # -- tokens, and no generation ------------------------------------------------------------------------

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        return await asyncio.to_thread(lambda: list(self.tokenizer(text, add_special_tokens=add_special)["input_ids"]))

    async def detokenize(self, token_ids: list[int]) -> str:
        text = await asyncio.to_thread(self.tokenizer.decode, token_ids)
        assert isinstance(text, str)
        return text

    def token_bytes(self, token_id: int) -> bytes:
        return b""  # nothing is generated

    def generate(self, request_id: str, prompt: Prompt, params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        raise EngineError("a reranker does not generate")

    async def abort(self, request_id: str) -> None:
        pass
