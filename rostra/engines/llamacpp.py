"""llama.cpp engine (GGUF files) through `xllamacpp`, the default engine.

Why xllamacpp and not llama-cpp-python: xllamacpp embeds llama.cpp's own server loop, so
requests run in parallel slots with continuous batching, streamed token by token (ids, bytes,
logprobs); it ships a prebuilt wheel. llama-cpp-python compiles for ~15 minutes here and runs one sequence at a
time behind a lock. Measured on this 2-core machine with the embedded SmolLM2-135M
(128 tokens per request): 1 stream 58 tok/s; 4 concurrent streams 76 tok/s aggregate with
xllamacpp, where a one-sequence engine stays at the single-stream rate. See benchmarks/.

Tokens are read from llama.cpp's own HTTP server, which xllamacpp opens on a random loopback port, on
the event loop (see llamacpp_http.py for why not xllamacpp's blocking, per-token-callback
`handle_completions`). That listener cannot be turned off anyway, so it is guarded: it gets a random
API key that never leaves this process. rostra uses its native /completion endpoint (token ids in, token
ids out), plus /tokenize and /detokenize (exact llama.cpp tokenization). Each generation is pinned to the slot
that holds the most of its prompt (llamacpp_slots.py), so sessions that outnumber the slots keep their prefixes.

Images (`--mmproj`): llama.cpp's server loads the projector beside the model; a prompt with images goes to
/completion as its rendered text, each image at llama.cpp's media marker, with the images (PNG, base64)
as `multimodal_data`: llama.cpp tokenizes text and images together and caches image chunks by their hash, so a
conversation that repeats an image reuses its prefix.

Embedding models (`--task embed`, or a GGUF that declares `{arch}.pooling_type`, as BERT-family embedding
GGUFs do): llama.cpp runs with embeddings on and the pooling the GGUF declares (or `--pooling`: a generative
GGUF then pools its last hidden states, last-token by default); rostra posts token ids to its native
/embeddings, which batches concurrent inputs across the slots and returns the vectors L2-normalized.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import os
import secrets
import time
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, AsyncGenerator, AsyncIterator, Callable

import xllamacpp

from rostra.engines.llamacpp_lora import AdapterUse, check_gguf_adapter
from rostra.lora import AdapterRequests, LoraAdapter
from rostra.core import (
    EngineOutput,
    FinishReason,
    ModelInfo,
    Prompt,
    PromptImage,
    SamplingParams,
    TokenStep,
    TopLogprob,
)
from rostra.engines.base import NATIVE_SAMPLERS, Engine, EngineError, PairScores
from rostra.engines.cpu_budget import engine_threads
from rostra.engines.thread_budget import EngineCores, process_budget
from rostra.engines.llamacpp_batches import EMBED_CHUNK, BatchedTokenizer
from rostra.engines.llamacpp_bad_words import generate_without_bad_words
from rostra.engines.llamacpp_http import EventStream, LoopbackClient, LoopbackError
from rostra.engines.llamacpp_images import image_counter, prompt_tokens
from rostra.engines.llamacpp_rerank import declares_rank_pooling, pair_overhead, rerank_pairs
from rostra.engines.llamacpp_payload import MultimodalPrompt
from rostra.engines.llamacpp_probe import QuietProbe
from rostra.engines.llamacpp_scoring import PromptScorer
from rostra.engines.llamacpp_slots import SlotRouter
from rostra.engines.llamacpp_speculation import CalibrationCache, Speculation
from rostra.errors import InvalidRequest
from rostra.generation_defaults import from_gguf_metadata
from rostra.gguf_metadata import context_length, read_gguf_metadata
from rostra.tokenizer import end_of_generation_ids, gguf_named_tokens, gguf_token_bytes

log = logging.getLogger("rostra.engine.llamacpp")
_CONTROL = 3  # GGUF token type of control (special) tokens
_USER_DEFINED = 4  # GGUF token type of added tokens (llama.cpp parses both as special)
_POOLING = {"mean": xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN,
            "cls": xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_CLS,
            "last": xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_LAST}
_FLASH_ATTN = {"auto": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_AUTO,
               "on": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED,
               "off": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED}
READINESS_TIMEOUT = 2.0  # seconds llama.cpp's server may take to answer a readiness probe
_GGUF_POOLING = {1: "mean", 2: "cls", 3: "last"}  # llama.cpp's enum values, as GGUF metadata stores them
# Where llama.cpp's multimodal tokenizer places each image of a prompt. llama.cpp reads it once per process from
# LLAMA_MEDIA_MARKER (else makes a random one it does not tell): set here, before any server starts, random so
# that no message can spell it.
MEDIA_MARKER = os.environ.setdefault("LLAMA_MEDIA_MARKER", f"<__media_{secrets.token_hex(8)}__>")


def declared_pooling(metadata: dict) -> str | None:
    """The pooling an embedding GGUF declares (`{arch}.pooling_type`), if any."""
    return _GGUF_POOLING.get(metadata.get(f"{metadata.get('general.architecture', '')}.pooling_type", 0))


class LlamaCppEngine(Engine):
    enforces_constraints = True
    loads_adapters = True  # GGUF LoRA adapters, at start (--lora) and while serving (llamacpp_lora.py)
    serves_structural_tags = True
    scores_prompts = True  # by generating the prompt: llamacpp_scoring.py
    native_samplers = NATIVE_SAMPLERS  # llama.cpp's own: sent as they are
    engine_name = "llama.cpp"
    def __init__(self, model_path: str | Path, model_name: str, max_model_len: int | None = None, parallel: int = 4,
                 threads: int | None = None, task: str = "auto", pooling: str | None = None, matryoshka: bool = False,
                 cache_ram_mib: int | None = None, speculative: str = "auto", speculative_draft: int | None = None,
                 flash_attn: str = "auto", mmproj: str | Path | None = None, calibration_dir: Path | None = None,
                 mmap: bool = False, lora: tuple[LoraAdapter, ...] = ()):
        self.path = Path(model_path)
        for adapter in lora:
            if not Path(adapter.path).is_file():
                raise FileNotFoundError(f"--lora {adapter.name}: adapter file not found: {adapter.path}")
        self.lora = lora
        self.adapters = tuple(adapter.name for adapter in lora)
        self.mmap = mmap
        if not self.path.is_file():
            raise FileNotFoundError(f"model file not found: {self.path}")
        self.mmproj = Path(mmproj) if mmproj else None
        if self.mmproj is not None and not self.mmproj.is_file():
            raise FileNotFoundError(f"mmproj file not found: {self.mmproj}")
        self.metadata = read_gguf_metadata(self.path)
        # How an image is counted (llamacpp_images.py); None: a projector counted only by llama.cpp, at the end.
        self.image_counter = image_counter(read_gguf_metadata(self.mmproj)) if self.mmproj else None
        trained = context_length(self.metadata) or 4096
        self.model = ModelInfo(id=model_name, context_length=min(max_model_len or trained, trained))
        self.pooling: str | None = None
        self._pick_task(task, pooling, matryoshka)
        if flash_attn not in _FLASH_ATTN:
            raise ValueError(f"--flash-attn {flash_attn}: choose from auto, on, off")
        self.flash_attn = flash_attn
        self.parallel = max(1, parallel)
        self.threads = threads
        self.cache_ram_mib = cache_ram_mib  # None: llama.cpp's default (8192 MiB); 0: no host-memory prompt cache
        # n-gram drafting from the prompt: llamacpp_speculation.py (an embedding model never drafts)
        # (nor does a model with a projector: llama.cpp's server refuses drafting beside multimodal input)
        drafting = "off" if self.task != "generate" or self.mmproj else speculative
        self.speculation = Speculation(drafting, speculative_draft,
                                       CalibrationCache(calibration_dir) if calibration_dir else None)
        self.chat_template = self.metadata.get("tokenizer.chat_template")
        self.architecture = str(self.metadata.get("general.architecture", ""))
        self.recommended_sampling = from_gguf_metadata(self.metadata)
        self._read_vocabulary()
        self._server: Any = None
        self._loopback: LoopbackClient | None = None
        # While drafting: a one-slot server without it, for requests that ask for logprobs (see _generate).
        self._undrafted: Any = None
        self._undrafted_route: tuple[LoopbackClient, SlotRouter] | None = None
        self._probe: asyncio.Task | None = None  # the speculation probe, in the background (llamacpp_probe.py)
        self._serving = asyncio.Event()  # cleared while the server is made again; work waits for it
        self._serving.set()
        self._internal_calls = 0  # tokenizations and the like in flight (no slot counts them)
        self._running: set[str] = set()  # requests holding a slot
        self._adapter_use = AdapterUse()  # their LoRA adapters (vllm:lora_requests_info)
        self._key = ""  # the key rostra's calls to llama.cpp's server carry (made in start)
        self._batched: BatchedTokenizer | None = None
        self._streams: dict[str, EventStream] = {}
        # At most one request per llama.cpp slot is handed over, pinned to the slot that holds the most of
        # its prompt; the rest wait here, where a request cancelled while it waits is simply never started
        # (in llama.cpp's own queue it would still be prefilled before its first token could say "stop").
        self._slots = SlotRouter(self.parallel, host_cache=cache_ram_mib != 0)
        self.cores: EngineCores | None = None  # its share of the process's cores, once started (thread_budget.py)

    def _pick_task(self, task: str, pooling: str | None, matryoshka: bool) -> None:
        """--task, or what the GGUF declares: rank pooling reranks (llamacpp_rerank.py), another pooling embeds."""
        declared = declared_pooling(self.metadata)
        if pooling is not None and pooling not in _POOLING:
            raise ValueError(f"--pooling {pooling}: llama.cpp pools by mean, cls or last")
        if pooling is not None and task in ("generate", "rerank"):
            raise ValueError(f"--pooling is for embedding models: it cannot go with --task {task}")
        if task == "rerank" or (task == "auto" and not pooling and declares_rank_pooling(self.metadata)):
            if not declares_rank_pooling(self.metadata):
                raise ValueError(f"--task rerank: {self.path.name} is not a reranking GGUF (llama.cpp reranks models "
                                 "converted with rank pooling, a classifier head: pooling_type 4)")
            self.task = "rerank"
        elif task == "embed" or (task == "auto" and (pooling or declared)):
            self.task = "embed"
            self.pooling = pooling or declared or "last"  # a generative GGUF: its last token
            arch = self.metadata.get("general.architecture", "")
            self.embedding_dimensions = int(self.metadata.get(f"{arch}.embedding_length", 0))
            self.matryoshka_dimensions = () if matryoshka else None

    def _read_vocabulary(self) -> None:
        """The GGUF's tokens: the special and end-of-generation ones, and the bytes of each."""
        tokens = self.metadata["tokenizer.ggml.tokens"]
        self.bos_token = _token_at(tokens, self.metadata.get("tokenizer.ggml.bos_token_id"))
        self.eos_token = _token_at(tokens, self.metadata.get("tokenizer.ggml.eos_token_id"))
        self.named_tokens = gguf_named_tokens(self.metadata)
        # Token text comes from the vocabulary, not from llama.cpp's chunks, which leave control
        # tokens empty: tool-call and reasoning markers are control tokens in many models, and the
        # parsers must see them. End-of-generation tokens stay empty (they end the output).
        self._vocab_bytes = gguf_token_bytes(self.metadata)
        end_ids = self._end_ids = end_of_generation_ids(self.metadata)
        for token_id in end_ids:
            self._vocab_bytes[token_id] = b""
        self.vocab_size = len(self._vocab_bytes)
        types = self.metadata.get("tokenizer.ggml.token_type") or []
        self.special_token_ids = frozenset(i for i, kind in enumerate(types) if kind == _CONTROL and i not in end_ids)
        # (Some vocabularies add whitespace runs as user-defined tokens: those are text anyway.)
        self.special_texts = tuple(tokens[i] for i, kind in enumerate(types)
                                   if kind in (_CONTROL, _USER_DEFINED) and i < len(tokens) and tokens[i].strip())
        self._token_ids: dict[bytes, int] = {}  # a text piece -> its token (held-back tokens, see _Chunks)
        for token_id, piece in enumerate(self._vocab_bytes):
            if piece and token_id not in self.special_token_ids:
                self._token_ids.setdefault(piece, token_id)

    def _load_mode(self) -> Any:
        """By default the weights are read into memory, not memory-mapped: a GGUF overwritten in place while loaded
        (`cp` over it truncates and rewrites the same file) would end the process with SIGBUS at the next page read.
        The cost (README, "Model files"): the load reads the file once; no page cache sharing. Mapped (`--mmap`, and
        always for a file from the Hub cache, whose blobs are content-addressed and replaced, never rewritten): no
        second copy in memory, the page cache shared by every process serving the file."""
        log.info("loading %s (%s)", self.path, "memory-mapped" if self.mmap else "read into memory")
        return (xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_MMAP if self.mmap
                else xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_NONE)

    async def start(self) -> None:
        # Not llama.cpp's default (every core of the machine): the cores this process may use that other work
        # leaves free now (cpu_budget.py says why and what it measured).
        choice = await asyncio.to_thread(engine_threads, self.threads, process_budget().sharing)
        self.compute_threads = choice.threads
        log.info("%s: %d compute threads (%s)", self.path.name, choice.threads, choice.reason)
        # Their cores, though, follow the engines generating at each moment (thread_budget.py); --threads pins both.
        self.cores = EngineCores(self.model.id, pinned=bool(self.threads))
        key = self._key = secrets.token_urlsafe(32)
        params = self._server_params(key)
        log.info("loading %s (%.0f MB, context %d, %d slots)...", self.path.name,
                 self.path.stat().st_size / 1e6, self.model.context_length, self.parallel)
        if self.speculation.mode == "on":
            self.speculation.configure(params)
        await self._start_server(params, key)

    def adapter_path(self, name: str) -> str | None:
        return next((adapter.path for adapter in self.lora if adapter.name == name), None)

    def adapter_requests(self) -> AdapterRequests:
        return self._adapter_use.report(len(self.adapters))  # every loaded adapter can share the batch

    async def load_adapter(self, adapter: LoraAdapter) -> None:
        await asyncio.to_thread(check_gguf_adapter, adapter, self.architecture)
        await self._serve_adapters((*self.lora, adapter))

    async def unload_adapter(self, name: str) -> None:
        await self._serve_adapters(tuple(adapter for adapter in self.lora if adapter.name != name))

    async def _serve_adapters(self, lora: tuple[LoraAdapter, ...]) -> None:
        """llama.cpp's server loads adapters only with the model: it is made again with these, once the work in
        flight is done (new work waits meanwhile: `_paused`); if that fails, again with the adapters it had."""
        async with self._paused():
            previous = self.lora
            self.lora, self.adapters = lora, tuple(adapter.name for adapter in lora)
            try:
                await self._remake_servers()
            except Exception as exc:
                log.warning("llama.cpp could not load the adapters %s: %s", ", ".join(self.adapters), exc)
                self.lora, self.adapters = previous, tuple(adapter.name for adapter in previous)
                await self._remake_servers()
                raise ValueError(f"llama.cpp could not load it: {exc}") from None

    async def _remake_servers(self) -> None:
        await self._free_server()
        params = self._server_params(self._key)
        if self.speculation.active:  # drafting: as _make_drafting_server made them
            self.speculation.configure(params)
            await self._make_server(params, self._key)
            await self._make_undrafted_server(params, self._key)
        else:
            await self._make_server(params, self._key)
        self._slots.forget_prompts()  # the new server's slots hold no prompt yet

    def _server_params(self, key: str) -> Any:
        """llama.cpp's server parameters for this model (an xllamacpp.CommonParams), drafting's aside."""
        params = xllamacpp.CommonParams()
        params.model.path = str(self.path)
        if self.mmproj is not None:
            params.mmproj.path = str(self.mmproj)
        if self.lora:  # loaded at scale 0: a request names the one it runs with (`lora` in its body)
            params.lora_adapters = [_adapter_info(adapter.path) for adapter in self.lora]
            params.lora_init_without_apply = True
        params.load_mode = self._load_mode()
        params.n_parallel = self.parallel
        # Each slot gets the whole context window.
        params.n_ctx = self.model.context_length * self.parallel
        params.kv_unified = False
        # --flash-attn: on a CPU, flash attention off decodes faster after a long context but reads long prompts
        # slower (measured: README, Sessions and slots); auto leaves llama.cpp's choice.
        params.flash_attn_type = _FLASH_ATTN[self.flash_attn]
        # A step of llama.cpp's server decodes one token for every generating slot plus up to n_batch prompt
        # tokens of the others: at llama.cpp's 2048 a long prompt arriving stalls every other stream for four
        # micro-batches per token. One micro-batch per step costs the prefill nothing (it is computed in
        # micro-batches of n_ubatch anyway) and cuts those stalls to a quarter (measured: a stream's gap while
        # a 4,000-token prompt was read went from ~23 s to ~6 s on 2 cores, the prompt's time unchanged).
        params.n_batch = params.n_ubatch
        if self.cache_ram_mib is not None:
            params.cache_ram_mib = self.cache_ram_mib
        if self.task != "generate":  # embeddings, or llama.cpp's `--reranking` (embedding, rank pooling)
            params.embedding = True
            params.pooling_type = (xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_RANK if self.task == "rerank"
                                   else _POOLING[self.pooling or "last"])
            # An input is embedded in one micro-batch: as long as the longest input allowed.
            params.n_batch = params.n_ubatch = self.model.context_length
            # One KV buffer for all slots: with one per slot (kv_unified false, as generation runs), inputs
            # pooled in the same batch came out mixed with each other (cosine 0.5 to the input embedded
            # alone; tests/test_embeddings_engines.py checks it).
            params.kv_unified = True
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = self.compute_threads or 0
        params.api_keys = [key]
        params.hostnames = ["127.0.0.1"]
        params.endpoint_slots = params.endpoint_metrics = params.endpoint_props = False
        # One connection thread per streaming slot, and some to spare for tokenization meanwhile.
        params.n_threads_http = self.parallel + 4
        return params

    async def _start_server(self, params: Any, key: str) -> None:
        """llama.cpp's server loaded; drafting if `on`, or in `auto` where the speculation probe finds it pays: at
        once from a measurement kept for this file and settings, else measured in the background once the server
        answers (llamacpp_probe.py), so that a first start is ready as fast as any other."""
        await self._make_server(params, key)
        if self.speculation.mode == "auto":
            kept = await self.speculation.recall(self.parallel, self._fingerprint())
            if kept is None:
                self._probe = asyncio.create_task(self._probe_in_background(params, key))
            elif self.speculation.settle(kept, self.path.name):
                await self._make_drafting_server(params, key)
        elif self.speculation.active:  # `on`: configured before the server was made
            await self._make_undrafted_server(params, key)

    async def _make_server(self, params: Any, key: str) -> None:
        started = time.monotonic()
        self._server = await asyncio.to_thread(self._made, params)
        log.info("model loaded in %.1f s", time.monotonic() - started)
        self._loopback = LoopbackClient(self._server.listening_address, key)

    async def _make_drafting_server(self, params: Any, key: str) -> None:
        """The server made again, drafting (its parameters are fixed when it is made), and one that does not."""
        await self._free_server()
        self.speculation.configure(params)
        await self._make_server(params, key)
        await self._make_undrafted_server(params, key)

    async def _make_undrafted_server(self, params: Any, key: str) -> None:
        self._undrafted = await asyncio.to_thread(self._made, self.speculation.undrafted(params))
        self._undrafted_route = (LoopbackClient(self._undrafted.listening_address, key), SlotRouter(1))

    def _made(self, params: Any) -> Any:
        """A llama.cpp server made (blocking), its threads kept on this engine's share of the cores."""
        assert self.cores is not None
        return self.cores.made(lambda: xllamacpp.Server(params))

    async def _probe_in_background(self, params: Any, key: str) -> None:
        """Calibrate when nothing else runs; where drafting pays, the server made again at a quiet moment."""
        assert self._loopback is not None
        probe = QuietProbe(self._busy, self._slots, self._loopback.post)
        try:
            calibration = await probe.run(lambda post: self.speculation.measure(post, self.vocab_size, self.parallel,
                                                                                  self._fingerprint()))
            if self.speculation.settle(calibration, self.path.name):
                await probe.quiet()
                async with self._paused():
                    await self._make_drafting_server(params, key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the server serves on, as it did: undrafted
            log.warning("speculation probe for %s failed, drafting stays off: %s", self.path.name, exc)

    def _busy(self) -> bool:
        """Whether any work uses llama.cpp's server now: a request (running or waiting for a slot), a tokenization."""
        return bool(self._running or self._internal_calls or self._slots.waiting or
                    self._slots.free_count < self.parallel)

    @contextlib.asynccontextmanager
    async def _paused(self) -> AsyncIterator[None]:
        """New work waits at the gate (`_serving`) for the block, which starts once the work in flight is done."""
        self._serving.clear()
        try:
            while self._busy():
                await asyncio.sleep(0.01)
            yield
        finally:
            self._serving.set()

    async def speculation_settled(self) -> None:
        """Returns once the background speculation probe (if one runs) is done: for tests and benchmarks."""
        if self._probe is not None:
            await asyncio.shield(self._probe)

    def _fingerprint(self) -> str:
        """What a calibration depends on: the file (path, size, modification time), the build, the settings."""
        stat = self.path.stat()
        return (f"{self.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{getattr(xllamacpp, '__version__', '')}|"
                f"{self.model.context_length}|{self.compute_threads}|{self.flash_attn}")

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None
        for stream in list(self._streams.values()):
            stream.close()
        await self._free_server()
        if self.cores is not None:
            self.cores.close()

    async def _free_server(self) -> None:
        last_reference, self._server, self._undrafted = [self._server, self._undrafted], None, None
        await asyncio.to_thread(last_reference.clear)  # llama.cpp's server is freed in that thread

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        reply = await self._internal("/tokenize", {"content": text, "add_special": add_special, "parse_special": True})
        return reply["tokens"]

    async def tokenize_plain(self, text: str) -> list[int]:
        reply = await self._internal("/tokenize", {"content": text, "add_special": False, "parse_special": False})
        return reply["tokens"]

    async def detokenize(self, token_ids: list[int]) -> str:
        return (await self._internal("/detokenize", {"tokens": token_ids}))["content"]

    async def _internal(self, path: str, body: dict) -> dict:
        await self._serving.wait()  # (set but while the server is made again: llamacpp_probe.py)
        assert self._loopback is not None, "engine not started"
        self._internal_calls += 1
        try:
            return await self._loopback.post(path, body)
        except LoopbackError as exc:
            raise EngineError(str(exc)) from exc
        finally:
            self._internal_calls -= 1

    async def tokenize_texts(self, texts: list[str], add_special: bool, truncate_to: int | None) -> list[list[int]]:
        """Many texts in few requests (llamacpp_batches.py): 2,048 texts once opened 2,048 connections at once,
        and llama.cpp's server a thread for each."""
        ids = await self._batched_tokenizer().tokenize(texts, add_special)
        return [tokens[:truncate_to] for tokens in ids] if truncate_to else ids

    def _batched_tokenizer(self) -> BatchedTokenizer:
        if self._batched is None:
            self._batched = BatchedTokenizer(self._internal)
        return self._batched

    async def embed(self, inputs: list[list[int]]) -> list[list[float]]:
        """llama.cpp's /embeddings: one pooled, L2-normalized vector per input (inputs share the slots), in
        requests of EMBED_CHUNK inputs, one after another (a request cancelled between them stops there)."""
        vectors: list[list[float]] = []
        for start in range(0, len(inputs), EMBED_CHUNK):
            async with self._generating():
                reply: Any = await self._internal("/embeddings", {"content": inputs[start:start + EMBED_CHUNK]})
            if isinstance(reply, dict):  # {"error": ...}
                raise EngineError(f"llama.cpp could not embed: {reply.get('error', reply)}")
            vectors += [item["embedding"][0] for item in sorted(reply, key=lambda item: item["index"])]
        return vectors

    async def score_pairs(self, pairs: list[tuple[str, str]]) -> PairScores:
        """llama.cpp's own /rerank (llamacpp_rerank.py)."""
        return await rerank_pairs(self._internal, lambda texts: self.tokenize_texts(texts, False, None), pairs,
                                  pair_overhead(self.metadata), self.model.context_length)

    def token_bytes(self, token_id: int) -> bytes:
        return self._vocab_bytes[token_id] if 0 <= token_id < len(self._vocab_bytes) else b""

    def takes_images(self, model: str) -> bool:
        return self.mmproj is not None and self.task == "generate"

    def image_marker(self, image: PromptImage) -> str:
        return MEDIA_MARKER

    async def prompt_length(self, prompt: Prompt) -> int:
        """With images, as mtmd counts the prompt: the text between the markers tokenized piece by piece, each image
        as its projector's tokens and the text around them (for the projectors llamacpp_images.py knows)."""
        if not prompt.images:
            return len(prompt.token_ids)
        text = marked_text(prompt)  # (a 400 when markers and images do not pair up)
        if self.image_counter is None:
            return len(prompt.token_ids)

        async def text_tokens(piece: str) -> int:
            return len(await self.tokenize(piece, add_special=False))
        return await prompt_tokens(self.image_counter, text.split(MEDIA_MARKER), prompt.images, text_tokens)

    def speculative_tokens(self) -> tuple[int, int] | None:
        meter = self.speculation.meter
        return (meter.drafted, meter.accepted) if self.speculation.active else None

    def running_requests(self) -> int:
        return len(self._running)

    def slots_free(self) -> int:
        return self._slots.free_count

    async def readiness(self) -> str | None:
        if not self._serving.is_set():
            return "the llama.cpp server is being made again with speculative decoding on"
        if self._server is None or self._loopback is None:
            return "the llama.cpp server is not running"
        busy = sum(1 for slot in self._slots.slots if slot.busy)
        # A slot held with no request to give it back is lost for good (the probe's hold is brief, and its own).
        if busy > len(self._running) and not self._slots.held_exclusively:
            return f"{busy - len(self._running)} of {self.parallel} slots are held by no request"
        try:
            async with asyncio.timeout(READINESS_TIMEOUT):
                await self._loopback.get("/health")
        except (LoopbackError, TimeoutError, ValueError) as exc:
            return f"the llama.cpp server does not answer: {exc or type(exc).__name__}"
        return None

    async def abort(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            stream.close()

    def check_params(self, params: SamplingParams) -> None:
        super().check_params(params)
        if params.min_tokens and (params.json_schema is not None or params.grammar is not None):
            # min_tokens runs as two requests (the second continues the first), and a grammar cannot
            # be resumed halfway through.
            raise InvalidRequest("min_tokens cannot be combined with structured outputs or a required tool "
                                 "choice on this engine", param="min_tokens")

    async def generate(self, request_id: str, prompt: Prompt,
                       params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        """With min_tokens, llama.cpp (which has no such option) first samples that many tokens with
        end-of-generation banned, then continues from them (its prefix cache holds them) as usual. A prompt to
        score (prompt_logprobs) is scored first, its scores the first output (llamacpp_scoring.py)."""
        if params.prompt_logprobs is not None:
            if prompt.images:
                raise InvalidRequest("prompt_logprobs cannot be combined with images on this engine",
                                     param="prompt_logprobs")
            yield EngineOutput(prompt_logprobs=await self._score(request_id, prompt, params.prompt_logprobs))
        if prompt.images:
            if params.min_tokens and not params.ignore_eos:
                raise InvalidRequest("min_tokens cannot be combined with images on this engine", param="min_tokens")
            multimodal = await MultimodalPrompt.of(marked_text(prompt), prompt.images)  # (off the event loop)
            async with aclosing(self._generate(request_id, prompt.token_ids, params, prompt.session_key,
                                               multimodal, prompt.cache_salt)) as outputs:
                async for output in outputs:
                    yield output
            return
        words = _resumable_bad_words(params)

        def plain(prompt_ids: list[int], part: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
            return self._generate(request_id, prompt_ids, part, prompt.session_key, cache_salt=prompt.cache_salt)

        def run(prompt_ids: list[int], part: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
            # Bad words of several tokens: dropped and resampled where they would complete.
            return generate_without_bad_words(plain, prompt_ids, part, words) if words else plain(prompt_ids, part)

        if not params.min_tokens or params.ignore_eos:
            # aclosing: leaving early closes the stream at once, which stops llama.cpp's generation.
            async with aclosing(run(prompt.token_ids, params)) as outputs:
                async for output in outputs:
                    yield output
            return
        first = min(params.min_tokens, params.max_tokens)
        banned = {token: float("-inf") for token in params.stop_token_ids}
        forced = dataclasses.replace(params, max_tokens=first, ignore_eos=True, logit_bias={**params.logit_bias, **banned})
        sampled: list[int] = []
        async with aclosing(run(prompt.token_ids, forced)) as outputs:
            async for output in outputs:
                sampled += [step.token_id for step in output.tokens]
                done = output.finish_reason is not None and len(sampled) >= params.max_tokens
                yield dataclasses.replace(output, finish_reason=output.finish_reason if done else None)
                if done:
                    return
        rest = dataclasses.replace(params, max_tokens=params.max_tokens - len(sampled), min_tokens=0)
        async with aclosing(run(prompt.token_ids + sampled, rest)) as outputs:
            async for output in outputs:
                # Its cache hits and writes are mostly the tokens just sampled: the prompt's were counted by the first
                # part.
                yield dataclasses.replace(output, cached_tokens=None, cache_write_tokens=None)

    async def _generate(self, request_id: str, prompt_ids: list[int], params: SamplingParams,
                        session_key: str | None = None, multimodal: MultimodalPrompt | None = None,
                        cache_salt: str | None = None) -> AsyncGenerator[EngineOutput, None]:
        """`multimodal`: the prompt as llama.cpp's text-and-images object (then `prompt_ids` only route the slot)."""
        await self._serving.wait()  # (set but while the server is made again: llamacpp_probe.py)
        if params.adapter is not None and params.adapter not in self.adapters:  # unloaded while this waited
            raise InvalidRequest(f"model {params.adapter!r}: the LoRA adapter was unloaded", param="model")
        loopback, slots = self._route(params.top_logprobs is not None or params.prompt_logprobs is not None)
        body = _request_body(prompt_ids, params, self.vocab_size, self.model.context_length, self.adapters)
        chunks = _Chunks(params.top_logprobs or 0, self.token_bytes, self._token_ids)
        chunks.multimodal = multimodal is not None
        stream: EventStream | None = None
        self._running.add(request_id)
        self._adapter_use.waiting(request_id, params.adapter)
        try:
            # A slot's cached prompt was computed with its request's adapter: another adapter (or the base) must not
            # reuse it, as a tenant must not reuse another's: the adapter is part of the salt.
            salt = cache_salt if params.adapter is None else f"{cache_salt or ''}\x00lora:{params.adapter}"
            async with slots.claim(prompt_ids, session_key, salt) as slot, self._generating():
                body["id_slot"], body["cache_prompt"] = slot.index, slot.reuses
                self._adapter_use.running(request_id)
                if multimodal is not None:
                    del body["prompt"]  # (the images' prompt takes its place)
                stream = await loopback.stream("/completion", body if multimodal is None else multimodal.body(body))
                self._streams[request_id] = stream
                # Every event that arrived while the loop was busy elsewhere comes in one batch: the tokens
                # that piled up go out as one output, one chunk; a token that arrives alone goes out at once.
                while batch := await stream.next_batch():
                    self.speculation.observe(batch[-1])
                    output, error = chunks.merge(batch)
                    slot.tokens += [step.token_id for step in output.tokens]  # the slot holds them next
                    if output.tokens or output.finish_reason:
                        yield output
                    if error is not None:
                        raise error
        except LoopbackError as exc:
            raise EngineError(str(exc)) from exc
        finally:
            self._running.discard(request_id)
            self._adapter_use.done(request_id)
            self._streams.pop(request_id, None)
            if stream is not None:
                stream.close()  # a generation left early stops here: llama.cpp sees its connection closed

    @contextlib.asynccontextmanager
    async def _generating(self) -> AsyncIterator[None]:
        """While this engine computes: its share of the process's cores counted (thread_budget.py)."""
        if self.cores is None:
            yield
            return
        with self.cores.generating():
            yield

    def _route(self, probabilities: bool) -> tuple[LoopbackClient, SlotRouter]:
        assert self._loopback is not None, "engine not started"
        if probabilities and self._undrafted_route is not None:
            # llama.cpp sends no probabilities for any token once a slot has drafted: asked for, they come
            # from the server that does not draft (and a scored prompt's generation runs where it was scored).
            return self._undrafted_route
        return self._loopback, self._slots

    async def _score(self, request_id: str, prompt: Prompt, top_n: int) -> tuple[TokenStep | None, ...]:
        """The prompt's logprobs, computed in the slot its generation will pick (it then holds the prompt)."""
        async with self._scorer(request_id, prompt, top_n) as scorer:
            return await scorer.score(prompt.token_ids)

    async def score_continuations(self, request_id: str, prompt: Prompt,
                                  continuations: list[list[int]]) -> list[list[float]]:
        """Each continuation forced after the prompt in one slot (llamacpp_scoring.py): the slot's cache holds the
        prompt after the first, so each further one costs its own tokens only. Images too (a multimodal prompt)."""
        head: list[int] | dict = prompt.token_ids
        if prompt.images:
            head = await asyncio.to_thread(scoring_prompt, prompt)
        async with self._scorer(request_id, prompt, 0) as scorer:
            if not prompt.images and len(prompt.token_ids) > 1:
                await scorer.warm(prompt.token_ids[:-1])
            return [[step.logprob for step in await scorer.continuation(head, continuation) if step.logprob is not None]
                    for continuation in continuations]

    @asynccontextmanager
    async def _scorer(self, request_id: str, prompt: Prompt, top_n: int) -> AsyncIterator[PromptScorer]:
        """A scorer whose requests go to the slot that `prompt` routes to, held until the block ends."""
        await self._serving.wait()  # (set but while the server is made again: llamacpp_probe.py)
        loopback, slots = self._route(True)
        self._running.add(request_id)
        try:
            async with slots.claim(prompt.token_ids, prompt.session_key, prompt.cache_salt) as slot:
                async def post(body: dict) -> Any:
                    reply = await loopback.post("/completion", {**body, "id_slot": slot.index,
                                                                "cache_prompt": slot.reuses})
                    slot.reuses = True  # what the slot holds now is this prompt's own
                    return reply

                yield PromptScorer(post, top_n, self._end_ids, self.token_bytes)
        except LoopbackError as exc:
            raise EngineError(str(exc)) from exc
        finally:
            self._running.discard(request_id)


def scoring_prompt(prompt: Prompt) -> dict:
    """llama.cpp's multimodal prompt as one JSON value (the scorer's requests are not streamed pieces): the text
    with one marker per image, and the images' base64. Blocking: run in a thread."""
    return {"prompt_string": marked_text(prompt),
            "multimodal_data": [base64.b64encode(image.data).decode("ascii") for image in prompt.images]}


def marked_text(prompt: Prompt) -> str:
    """The prompt's text, holding exactly one media marker per image (else a 400)."""
    text = prompt.text or ""
    if text.count(MEDIA_MARKER) != len(prompt.images):  # the marker typed into a message would shift every image
        raise InvalidRequest(f"the messages hold the text {MEDIA_MARKER}, which this model reads as an image",
                             param="messages")
    return text


def _token_at(tokens: list[str], index: int | None) -> str:
    return tokens[index] if index is not None and 0 <= index < len(tokens) else ""


def _adapter_info(path: str) -> Any:
    info = xllamacpp.CommonAdapterLoraInfo()
    info.path, info.scale = str(path), 0.0
    return info


def _request_body(prompt_ids: list[int], params: SamplingParams, vocab_size: int, context_length: int = 0,
                  adapters: tuple[str, ...] = ()) -> dict:
    body: dict[str, Any] = {
        "prompt": prompt_ids,
        "stream": True,
        "n_predict": params.max_tokens,
        # Each chunk lists its token ids: rostra detokenizes and matches stop strings itself, identically
        # for every engine. (Not `n_probs: 1` for the ids: llama.cpp then computes a softmax over the whole
        # vocabulary per token, ~7% of its generation speed on the embedded model.)
        "return_tokens": True,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "presence_penalty": params.presence_penalty,
        "frequency_penalty": params.frequency_penalty,
        "repeat_penalty": params.repetition_penalty,
        "ignore_eos": params.ignore_eos,
        "cache_prompt": True,
    }
    if params.top_logprobs is not None:
        body["n_probs"] = max(1, params.top_logprobs)  # 1: the sampled token's own logprob
    if params.seed is not None:  # llama.cpp's seed is 32 bits, and 0xFFFFFFFF means "random"
        body["seed"] = params.seed % 0xFFFFFFFF
    if params.json_schema is not None:
        body["json_schema"] = params.json_schema
    if params.grammar is not None:
        body["grammar"] = params.grammar
    bias = _logit_bias(params, vocab_size)
    if bias:
        body["logit_bias"] = bias
    # DRY, XTC, mirostat, typical_p: llama.cpp's own samplers, under its own names.
    body.update({name: list(value) if isinstance(value, tuple) else value
                 for name, value in params.samplers.given().items()})
    if body.get("dry_penalty_last_n") == -1:  # "the whole context": this server takes only the count
        body["dry_penalty_last_n"] = context_length
    if adapters:  # every adapter not named runs at scale 0 for this request (llama.cpp's server's rule)
        body["lora"] = [] if params.adapter is None else [{"id": adapters.index(params.adapter), "scale": 1.0}]
    return body


def _resumable_bad_words(params: SamplingParams) -> list[tuple[int, ...]]:
    """Bad words of several tokens, which generate_without_bad_words drops and resamples; none under a
    constraint, which cannot be resumed halfway (their first tokens are banned then)."""
    if params.json_schema is not None or params.grammar is not None:
        return []
    return [word for word in params.bad_words_ids if len(word) > 1]


def _logit_bias(params: SamplingParams, vocab_size: int) -> list[list]:
    """logit_bias, plus bans (llama.cpp's `false`: never sampled) for allowed_token_ids and bad_words.
    bad_words: a one-token word is banned; of a longer one the last token where the others precede it
    (generate_without_bad_words), or under a constraint the first token (more than vLLM bans, never less)."""
    bias: dict[int, Any] = {token: (False if value == float("-inf") else value)
                            for token, value in params.logit_bias.items()}
    for sequence in params.bad_words_ids:
        if len(sequence) == 1 or not _resumable_bad_words(params):
            bias[sequence[0]] = False
    if params.allowed_token_ids is not None:
        allowed = set(params.allowed_token_ids)
        bias.update({token: False for token in range(vocab_size) if token not in allowed})
    return [[token, value] for token, value in bias.items()]


class _Chunks:
    """llama.cpp's /completion stream chunks (`return_tokens`: each lists its token ids) -> engine outputs.

    llama.cpp holds back a token whose text ends inside a UTF-8 character, and its chunk never comes: the
    next chunk lists only its own token, though its `content` carries the held-back tokens' text too, and
    `tokens_predicted` counts them. Those tokens are recovered here from that text (the vocabulary
    pieces it splits into), so text, logprobs and usage lose none of them. A character still incomplete
    when the generation ends is never sent: its tokens count in the usage (`completion_tokens`) only.
    """

    def __init__(self, top_n: int, token_bytes: Callable[[int], bytes], token_ids: dict[bytes, int]):
        self.top_n = top_n
        self.token_bytes = token_bytes
        self.token_ids = token_ids  # a piece's bytes -> its token id (for held-back tokens)
        self.counted = 0  # tokens accounted for so far
        self.multimodal = False  # a prompt with images: llama.cpp's count of its tokens is reported

    def merge(self, chunks: list[dict]) -> tuple[EngineOutput, EngineError | None]:
        """The chunks of one batch as one output (their tokens in order, the last finish reason), and the
        error a chunk reported, if any: the tokens before it are still output first."""
        tokens: list[TokenStep] = []
        reason: FinishReason | None = None
        cached: int | None = None
        written: int | None = None
        count: int | None = None
        for chunk in chunks:
            if "error" in chunk:
                return (EngineOutput(tuple(tokens), reason, count, cached, cache_write_tokens=written),
                        EngineError(str(chunk["error"])))
            tokens += self._steps(chunk)
            predicted = chunk.get("tokens_predicted", 0)
            if predicted > self.counted:  # held back, never to be sent: counted only
                count, self.counted = predicted, predicted
            if chunk.get("stop"):
                reason = "length" if chunk.get("stop_type") == "limit" else "stop"
                cached = (chunk.get("timings") or {}).get("cache_n")
                # The prompt tokens evaluated (not taken from the slot's cache): the slot holds them from now on.
                written = (chunk.get("timings") or {}).get("prompt_n")
        output = EngineOutput(tuple(tokens), reason, count, cached, cache_write_tokens=written)
        evaluated = chunks[-1].get("tokens_evaluated") if self.multimodal and reason else None
        if isinstance(evaluated, int):  # its count of a prompt with images: their tokens, not the markers'
            output = dataclasses.replace(output, prompt_tokens=evaluated)
        return output, None

    def _steps(self, chunk: dict) -> list[TokenStep]:
        ids = chunk.get("tokens") or []
        if not ids:
            return []
        probabilities = chunk.get("completion_probabilities")
        if probabilities:
            steps = [TokenStep(item["id"], self.token_bytes(item["id"]), item.get("logprob"),
                               tuple(TopLogprob(top["id"], self.token_bytes(top["id"]), top["logprob"])
                                     for top in (item.get("top_logprobs") or [])[:self.top_n]))
                     for item in probabilities]
        else:
            steps = [TokenStep(token_id, self.token_bytes(token_id)) for token_id in ids]
        held_back = chunk.get("tokens_predicted", 0) - self.counted - len(steps)
        if held_back > 0:
            steps = self._held_back(chunk.get("content", ""), steps, held_back) + steps
        self.counted += len(steps)
        return steps

    def _held_back(self, content: str, sent: list[TokenStep], count: int) -> list[TokenStep]:
        """The `count` tokens before `sent` whose text opens `content`, split into vocabulary pieces."""
        text = content.encode()
        tail = b"".join(step.token_bytes for step in sent)
        if not text.endswith(tail):  # a control token's marker, which content leaves empty
            tail = b""
        ids = _split_into_pieces(text[:len(text) - len(tail)], count, self.token_ids)
        return [TokenStep(token_id, self.token_bytes(token_id)) for token_id in ids or ()]


def _split_into_pieces(data: bytes, count: int, token_ids: dict[bytes, int]) -> list[int] | None:
    """`data` as exactly `count` vocabulary pieces (longest first), or None if it cannot be. The data is a
    character or two, so the search is tiny."""
    @functools.cache
    def split(start: int, left: int) -> tuple[int, ...] | None:
        if left == 0:
            return () if start == len(data) else None
        for end in range(len(data), start, -1):
            token_id = token_ids.get(data[start:end])
            if token_id is not None and (rest := split(end, left - 1)) is not None:
                return (token_id, *rest)
        return None

    found = split(0, count)
    return list(found) if found is not None else None
