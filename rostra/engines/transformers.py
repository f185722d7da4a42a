"""transformers engine: a checkpoint directory or Hugging Face Hub id, run with PyTorch.

The model, its tokenizer and its chat template come from the checkpoint (AutoModelForCausalLM,
AutoTokenizer). Generation runs in one worker thread that batches concurrent requests
(transformers_batch.py) and samples each with its own parameters (transformers_sampling.py);
grammar and JSON-schema constraints are llguidance token masks (transformers_constraints.py).
Tokenization runs in threads too, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import AsyncGenerator

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, GenerationConfig

from rostra.engines.base import EngineError
from rostra.engines.cpu_budget import core_limits
from rostra.engines.thread_budget import EngineCores, Share
from rostra.core import EngineOutput, ModelInfo, Prompt, SamplingParams
from rostra.engines.transformers_batch import BatchDecoder, Sequence, stackable_cache
from rostra.engines.transformers_constraints import ConstraintCompiler, ConstraintError
from rostra.engines.transformers_lora import check_adapter_dir
from rostra.engines.transformers_sampling import RequestSampler
from rostra.engines.transformers_tokens import token_bytes_table
from rostra.engines.transformers_vision import VisionProcessor, has_vision
from rostra.engines.vision_engine import VisionEngine
from rostra.errors import Conflict
from rostra.generation_defaults import from_checkpoint_config
from rostra.lora import AdapterRequests, LoraAdapter
from rostra.tokenizer import END_MARKERS, hf_named_tokens

log = logging.getLogger("rostra.engine.transformers")

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
_ABORTED = object()


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":  # bf16 halves memory and is fast on GPUs; on CPU fp32 is the fast, exact path
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return DTYPES[dtype]


def cpu_threads() -> int:
    """torch's intra-op threads on CPU for decode steps when --threads is not given: every core this
    process may use but one (prefills get them all: BatchDecoder's prefill_threads). That core is the
    server's: its event loop, the tokenizer and, on a small machine, the clients. torch's OpenMP workers
    meet at a barrier after every operation, and a decode step is thousands of small operations, so one
    worker preempted by the server's work stalls the step. Served on 2 cores (bench_transformers.py, medians
    of 3 rounds, benchmarks/README.md): torch's 2 threads 12.4 / 24.7 tok/s at c=1 / 4; 1 thread 13.7 / 29.8;
    1 for decode steps and 2 for prefills 14.4 / 35.7. The cores it may use: its affinity and cgroup quota."""
    return max(1, core_limits().usable - 1)


def _eos_ids(tokenizer, generation_config: GenerationConfig | None) -> set[int]:
    ids: set[int] = set()
    configured = generation_config.eos_token_id if generation_config is not None else None
    ids.update(configured if isinstance(configured, list) else [configured] if configured is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    # Special tokens that end a turn in every chat format (as llama.cpp also stops at them), so a
    # checkpoint whose configs name only one of its end tokens still stops at the others.
    ids.update(token_id for token_id, token in tokenizer.added_tokens_decoder.items()
               if token.special and token.content in END_MARKERS)
    return ids


class TransformersEngine(VisionEngine):
    enforces_constraints = True  # JSON schema, GBNF and llguidance grammars: all through llguidance
    loads_adapters = True  # PEFT adapter directories, at start (--lora) and at run time (transformers_lora.py)
    serves_structural_tags = True
    scores_prompts = True  # a forward pass over the prompt gives its logprobs (prompt_logprobs, echo)
    engine_name = "transformers"
    tail_samplers = frozenset({"tfs", "top_a"})  # transformers_truncation.py

    def __init__(self, model: str, model_name: str | None = None, max_model_len: int | None = None,
                 parallel: int = 4, dtype: str = "auto", device: str = "auto", threads: int | None = None,
                 lora: tuple[LoraAdapter, ...] = ()):
        """`lora`: PEFT adapter directories served over the model, each by its name (transformers_lora.py)."""
        for adapter in lora:
            check_adapter_dir(adapter)
        self.lora = {adapter.name: adapter for adapter in lora}
        self.adapters = tuple(self.lora)
        self.source = model  # a local directory or a hub id: from_pretrained takes either
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        self.threads = threads
        # The tokenizer and config are light: loaded here, since the server reads the chat
        # template and context length before start(). The weights load in start().
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.config = AutoConfig.from_pretrained(model)
        text_config = self.config.get_text_config()
        trained = getattr(text_config, "max_position_embeddings", None) or 4096
        name = model_name or (Path(model).name if Path(model).exists() else model)
        self.model = ModelInfo(id=name, context_length=min(max_model_len or trained, trained))
        # A vision checkpoint: its processor expands each image's token into the image's tokens (transformers_vision).
        self.vision = VisionProcessor.load(model, self.device, self.dtype) if has_vision(self.config) else None
        processor_template = self.vision.processor.chat_template if self.vision is not None else None
        self.chat_template = self.tokenizer.chat_template or processor_template
        self.architecture = str(getattr(self.config, "model_type", "") or "")
        self.bos_token = self.tokenizer.bos_token or ""
        self.eos_token = self.tokenizer.eos_token or ""
        self.named_tokens = hf_named_tokens(self.tokenizer.special_tokens_map)
        try:
            generation_config = GenerationConfig.from_pretrained(model)
        except OSError:  # a checkpoint without generation_config.json
            generation_config = None
        self.eos_ids = _eos_ids(self.tokenizer, generation_config)
        # Only what the checkpoint's file sets (not transformers' own defaults, e.g. top_k 50).
        self.recommended_sampling = from_checkpoint_config(generation_config.to_diff_dict()) if generation_config else {}
        # Token ids are logit indices: as many as the model's output layer, which may be padded past
        # the tokenizer's vocabulary; the padding ids are never sampled.
        self.vocab_size = text_config.vocab_size
        self._usable_vocab = min(len(self.tokenizer), self.vocab_size)
        self._token_bytes = token_bytes_table(self.tokenizer, silent_ids=self.eos_ids)
        self.special_token_ids = frozenset(set(self.tokenizer.all_special_ids) - self.eos_ids)
        self.special_texts = self.guarded_texts(self.tokenizer.get_added_vocab())  # special and added tokens
        self.parallel = max(1, parallel)
        self.hf_model = None
        self._decoder: BatchDecoder | None = None
        self._constraints: ConstraintCompiler | None = None
        self._running: dict[str, Sequence] = {}
        self.cores: EngineCores | None = None  # on CPU: its share of the process's cores (thread_budget.py)

    async def start(self) -> None:
        started = time.monotonic()
        await asyncio.to_thread(self._load)
        log.info("loaded %s on %s (%s) in %.1f s, %d sequences per batch", self.source, self.device,
                 str(self.dtype).removeprefix("torch."), time.monotonic() - started, self.parallel)

    def _load(self) -> None:
        if self.threads or self.device.type == "cpu":
            torch.set_num_threads(self.threads or cpu_threads())
        auto_model = AutoModelForImageTextToText if self.vision is not None else AutoModelForCausalLM
        model = auto_model.from_pretrained(self.source, dtype=self.dtype)
        # transformers declares `to` through functools.wraps(torch.nn.Module.to), which mypy reads as unbound.
        model = model.to(self.device).eval()  # type: ignore[arg-type]
        if not stackable_cache(model.config) and self.parallel > 1:
            log.warning("%s has sliding-window or other special cache layers: one sequence at a time", self.source)
            self.parallel = 1
        self.hf_model = model
        self._constraints = ConstraintCompiler(self.tokenizer, self.vocab_size, sorted(self.eos_ids))
        # On CPU without --threads: prefills on every core, decode steps on all but one (cpu_threads).
        all_cores = core_limits().usable if self.device.type == "cpu" and not self.threads else None
        self._decoder = BatchDecoder(model, self.parallel, self.eos_ids, self.token_bytes, prefill_threads=all_cores)
        for adapter in self.lora.values():
            self._decoder.adapters.load(adapter)
        self._decoder.start()
        if self.device.type == "cpu":  # torch's threads within the engine's share (--threads pins them)
            self.cores = EngineCores(self.model.id, pinned=bool(self.threads), on_share=self._fit_share)

    def _fit_share(self, share: Share) -> None:
        if self._decoder is not None and share.why != "pinned":
            self._decoder.core_cap = len(share.cores)

    async def close(self) -> None:
        for sequence in self._running.values():
            sequence.cancelled.set()
        if self._decoder is not None:
            await asyncio.to_thread(self._decoder.stop)
        self._decoder = self.hf_model = None
        if self.cores is not None:
            self.cores.close()

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        return await asyncio.to_thread(self.tokenizer.encode, text, add_special_tokens=add_special)

    async def tokenize_plain(self, text: str) -> list[int]:
        return await asyncio.to_thread(self.tokenizer.encode, text, add_special_tokens=False,
                                       split_special_tokens=True)

    async def detokenize(self, token_ids: list[int]) -> str:
        return await asyncio.to_thread(self._decode, token_ids)

    def _decode(self, token_ids: list[int]) -> str:
        text = self.tokenizer.decode(token_ids)
        assert isinstance(text, str)  # (a list comes back only for a batch of sequences)
        return text

    def token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[token_id] if 0 <= token_id < len(self._token_bytes) else b""

    def running_requests(self) -> int:
        return len(self._running)

    def batch_size(self) -> int:
        """Sequences in the decode batch right now (requests still waiting for a row not counted)."""
        return self._decoder.running() if self._decoder is not None else 0

    def adapter_path(self, name: str) -> str | None:
        adapter = self.lora.get(name)
        return adapter.path if adapter is not None else None

    async def load_adapter(self, adapter: LoraAdapter) -> None:
        if self._decoder is None:
            raise EngineError("engine not started")
        await asyncio.to_thread(check_adapter_dir, adapter)
        decoder = self._decoder
        await asyncio.wrap_future(decoder.between_steps(lambda: decoder.adapters.load(adapter)))
        self.lora[adapter.name] = adapter
        self.adapters = tuple(self.lora)

    async def unload_adapter(self, name: str) -> None:
        if any(sequence.adapter == name for sequence in self._running.values()):
            raise Conflict(f"LoRA adapter {name!r} has requests in flight: unload it once they have finished",
                           code="adapter_busy")
        self.lora.pop(name, None)
        self.adapters = tuple(self.lora)  # no request reaches it from now on
        if self._decoder is not None:
            decoder = self._decoder
            await asyncio.wrap_future(decoder.between_steps(lambda: decoder.adapters.unload(name)))

    def adapter_requests(self) -> AdapterRequests:
        uses = [(s.request_id, s.adapter) for s in list(self._running.values()) if s.adapter is not None]
        rows = self._decoder.running_ids() if self._decoder is not None else set()
        running = {adapter for request, adapter in uses if request in rows}
        waiting = {adapter for request, adapter in uses if request not in rows}
        # Every loaded adapter can share one batch (PEFT's mixed batches): the cap is how many are loaded.
        return AdapterRequests(frozenset(running), frozenset(waiting), max_loras=len(self.adapters))

    async def abort(self, request_id: str) -> None:
        sequence = self._running.get(request_id)
        if sequence is not None:
            sequence.cancelled.set()
            sequence.deliver(_ABORTED)  # type: ignore[arg-type]  # ends the consumer's wait now

    async def generate(self, request_id: str, prompt: Prompt,
                       params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        if self._decoder is None or self._constraints is None:
            raise EngineError("engine not started")
        loop = asyncio.get_running_loop()
        outputs: asyncio.Queue = asyncio.Queue()
        try:
            # Compiling a schema or grammar can take a while: off the loop.
            constraint = await asyncio.to_thread(self._constraints.for_params, params)
        except ConstraintError as exc:
            raise EngineError(f"cannot enforce the constraint: {exc}") from exc
        VisionProcessor.check_params(prompt, params)
        vision = await asyncio.to_thread(self.vision.expand, prompt) if self.vision is not None else None
        prompt_ids = vision.token_ids if vision is not None else list(prompt.token_ids)
        sampler = RequestSampler(params, prompt_ids, self.vocab_size, self._usable_vocab,
                                 sorted(self.eos_ids), constraint, self.device)

        def deliver(item) -> None:  # called from the worker thread (and from abort, on the loop)
            try:
                loop.call_soon_threadsafe(outputs.put_nowait, item)
            except RuntimeError:  # the event loop is gone: nobody listens any more
                sequence.cancelled.set()

        sequence = Sequence(request_id, prompt_ids, params.max_tokens, sampler, deliver,
                            model_inputs=vision.tensors if vision is not None else {}, adapter=params.adapter)
        self._running[request_id] = sequence
        self._decoder.submit(sequence)
        generating = self.cores.generating() if self.cores is not None else contextlib.nullcontext()
        generating.__enter__()  # left in the `finally` below
        try:
            while True:
                item = await outputs.get()
                if item is _ABORTED:
                    return
                if isinstance(item, BaseException):
                    raise EngineError(f"transformers failed: {item}") from item
                yield item
                if item.finish_reason:
                    return
        finally:
            sequence.cancelled.set()  # closing the iterator early aborts the generation
            self._running.pop(request_id, None)
            generating.__exit__(None, None, None)
