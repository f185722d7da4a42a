"""The engine interface: token ids in, token steps out.

An engine knows nothing of HTTP, chat messages or stop strings: it takes a prompt as token
ids plus sampling parameters and yields what it sampled, token by token, until it hits its
own end-of-generation token or `max_tokens`. Everything else (detokenization, stop strings,
parsing, rendering) happens once, in rostra's pipeline, for every engine alike.
"""

from __future__ import annotations

import abc
from contextlib import aclosing
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import AsyncGenerator, AsyncIterator, Literal, Mapping, Protocol

from rostra.core import EngineOutput, ModelInfo, Prompt, PromptImage, SamplingParams, TokenStep
from rostra.errors import InvalidRequest
from rostra.lora import AdapterRequests, LoraAdapter

class RelayedStream(Protocol):
    """An upstream's stream of chunks (OpenAI JSON objects); closing it early aborts it."""

    def events(self) -> AsyncIterator[dict]: ...

    async def aclose(self) -> None: ...


Task = Literal["generate", "embed", "rerank"]


@dataclass(frozen=True)
class PairScores:
    """A reranker's relevance score for each (query, document) pair, in order, and the tokens it read for them."""
    scores: list[float]
    prompt_tokens: int


@dataclass(frozen=True)
class Capabilities:
    """What a loaded engine can serve, by capability, with the switches its services read: one frozen record
    (`Engine.capabilities()`), from which the composition root gives a model the services it can serve and no
    others (rostra/server/app.py), and each route refuses a model without the capability it needs
    (rostra/serving/validation.py: check_generative, check_embedding, check_rerank). The engine's own attributes stay what each adapter sets."""

    # Text generation: Chat, Completions, Responses, Messages, Decisions, and the counting routes (a chat template).
    text: bool
    # Vision: images in prompts, on some model the engine serves (`takes_images` says which).
    vision: bool
    # Embedding: /v1/embeddings, with the engine's own vectors or relayed by a gateway.
    embedding: bool
    # Rerank: /v1/rerank, /v2/rerank and /v1/score, the engine's own scores or relayed by a gateway.
    rerank: bool
    # Gateway: requests for some models go to an upstream whole (relays, relay_embeddings, relay_scoring).
    gateway: bool
    # Text generation's switches: constraints enforced while sampling, vLLM's structural tags, prompt scoring.
    enforces_constraints: bool = False
    serves_structural_tags: bool = False
    scores_prompts: bool = False


# The switches of llama.cpp's samplers (rostra.core.NativeSamplers): what an engine with all of them lists.
NATIVE_SAMPLERS = frozenset({"typical_p", "mirostat", "dry_multiplier", "xtc_probability"})


class PairTooLong(ValueError):
    """A (query, document) pair longer than the reranker's context: the service names the part at fault."""

    def __init__(self, index: int, tokens: int, limit: int):
        super().__init__(f"pair {index} is {tokens} tokens long, more than the model's context length ({limit})")
        self.index, self.tokens, self.limit = index, tokens, limit


class EngineError(RuntimeError):
    """The engine failed while serving a request (not the client's fault)."""


class Engine(abc.ABC):
    model: ModelInfo
    chat_template: str | None = None
    # The model's architecture as its checkpoint names it (GGUF general.architecture, Hugging Face model_type):
    # how a model family with a prompt format of its own is recognised (gpt-oss: rostra/prompt/harmony.py).
    architecture: str = ""
    bos_token: str = ""
    eos_token: str = ""
    # The tokenizer's named special tokens (bos_token, eos_token, unk_token, pad_token, ...): chat templates read them.
    named_tokens: Mapping[str, str] = MappingProxyType({})
    vocab_size: int = 0
    parallel: int = 1  # sequences the engine runs at once (llama.cpp slots)
    compute_threads: int | None = None  # CPU threads it computes with, once loaded (None: not known)
    # Whether json_schema/grammar constraints are enforced while sampling (from the first token on).
    enforces_constraints: bool = False
    # Whether the engine enforces vLLM's structural tags (as a grammar, or read by the engine itself).
    serves_structural_tags: bool = False
    # Whether the engine can score a prompt (prompt_logprobs, Completions echo with logprobs).
    scores_prompts: bool = False
    # Control tokens (chat markup, not end-of-generation ones): their text goes when skip_special_tokens.
    special_token_ids: frozenset[int] = frozenset()
    # The text of every token `tokenize` reads as one special token (chat markup, end-of-generation,
    # added tokens). In user and tool content it is tokenized as plain text (`tokenize_plain`), so a
    # message cannot forge a turn (rostra/prompt/special_text.py). Empty: the engine cannot tell.
    special_texts: tuple[str, ...] = ()

    # llama.cpp's samplers (NativeSamplers' switches: typical_p, mirostat, dry_multiplier, xtc_probability)
    # this engine runs; one switched on that it lacks is a 400 naming the engine.
    native_samplers: frozenset[str] = frozenset()
    # tabby's tfs and top_a (llama.cpp removed tail-free sampling and never had top-a): those this engine runs.
    tail_samplers: frozenset[str] = frozenset()
    engine_name: str = "this"  # for the 400s: "the vLLM engine"
    # The LoRA adapters (--lora NAME=PATH) served over this model, by name; a request naming one runs with it.
    adapters: tuple[str, ...] = ()
    # Whether LoRA adapters can be loaded while serving (load_adapter: /v1/load_lora_adapter).
    loads_adapters: bool = False
    # Whether a request's `priority` reaches the engine's own scheduler (a gateway passes it upstream); on every
    # engine it orders admission (rostra/http/admission.py).
    schedules_by_priority: bool = False
    # Whether a prompt's `mm_processor_kwargs` reach a multimodal processor (vLLM's); else non-empty ones are a 400.
    takes_mm_processor_kwargs: bool = False
    # Whether a client may set them: they change what an image costs (tiles, pixels), so vLLM's own server refuses
    # them unless started with --trust-request-mm-kwargs; rostra's flag of that name sets this.
    trusts_request_mm_kwargs: bool = False

    def check_params(self, params: SamplingParams) -> None:
        """Raise InvalidRequest (naming the parameter) for what this engine cannot honour."""
        if params.prompt_logprobs is not None and not self.scores_prompts:
            raise InvalidRequest("prompt_logprobs is not supported by this engine: it cannot score prompt tokens",
                                 param="prompt_logprobs")
        for name in params.samplers.switched_on():
            if name not in self.native_samplers:
                raise InvalidRequest(f"{name} is not supported by the {self.engine_name} engine: it has no such "
                                     "sampler (llama.cpp has)", param=name)
        for name, on in (("tfs", params.tfs < 1.0), ("top_a", params.top_a > 0.0)):
            if on and name not in self.tail_samplers:
                raise InvalidRequest(f"{name} is not supported by the {self.engine_name} engine: it has no such sampler "
                                     "(the transformers engine has)", param=name)
        if params.structural_tag is not None and not self.serves_structural_tags:
            raise InvalidRequest(f"structural_tag is not supported by the {self.engine_name} engine: it enforces no "
                                 "grammar (llama.cpp, transformers and vLLM do)", param="structural_tag")
        if params.adapter is not None and params.adapter not in self.adapters:
            raise InvalidRequest(f"model {params.adapter!r}: no such LoRA adapter on the {self.engine_name} engine",
                                 param="model")
    # What the one served model does: "generate" (Chat, Completions, Responses), "embed" (/v1/embeddings) or
    # "rerank" (/v1/rerank, /v2/rerank, /v1/score), detected from the checkpoint or forced by `--task`.
    task: Task = "generate"
    # Embedding models: the vectors' width, whether the engine returns them L2-normalized (then a shortened
    # one is normalized again), and the widths `dimensions` may ask for: None none (the vector is not
    # trained to be cut), () any width up to the full one, else the widths the model was trained at.
    embedding_dimensions: int = 0
    normalizes_embeddings: bool = True
    matryoshka_dimensions: tuple[int, ...] | None = None
    # A gateway sends /v1/embeddings requests to an upstream whole (relay_embeddings).
    relays_embeddings: bool = False
    # The sampling the model's makers recommend, as request fields (temperature, top_p, top_k, min_p,
    # repetition_penalty, max_tokens): the defaults of `--generation-config auto`. Empty: none known.
    recommended_sampling: dict = {}
    recommended_sampling_source: str = "the model"  # where it came from, for the log and GET /v1/models

    def capabilities(self) -> Capabilities:
        """What this engine serves now (its task is known once it is loaded; a gateway's models come and go)."""
        gateway = self.relays_embeddings or self.relays_scoring
        return Capabilities(
            text=self.task == "generate", vision=any(self.takes_images(model.id) for model in self.models()),
            embedding=self.task == "embed" or self.relays_embeddings,
            rerank=self.task == "rerank" or self.relays_scoring, gateway=gateway,
            enforces_constraints=self.enforces_constraints, serves_structural_tags=self.serves_structural_tags,
            scores_prompts=self.scores_prompts)

    def takes_images(self, model: str) -> bool:
        """Whether `model` sees images (a prompt's `images`, each at its `image_marker` in the text)."""
        return False

    def image_marker(self, image: PromptImage) -> str:
        """The text that stands for `image` where it appears in the rendered prompt (engines that take images)."""
        raise NotImplementedError

    # Whether a template that loops over content parts gets each image as {"type": "image"} and writes the marker
    # itself, as the checkpoint's processor renders it (vision checkpoints: the marker is their image token), rather
    # than a text part holding the marker (llama.cpp's media marker, which no template writes).
    template_writes_image_marker: bool = False

    async def prompt_length(self, prompt: Prompt) -> int:
        """The tokens the engine evaluates for `prompt` (usage, budgets, count_tokens): its token ids, where each
        image counts as the tokens the engine gives it, not as its marker's text; a 400 for images and markers
        that do not pair up. Engines that take images compute it."""
        return len(prompt.token_ids)

    async def score_continuations(self, request_id: str, prompt: Prompt,
                                  continuations: list[list[int]]) -> list[list[float]]:
        """Teacher forcing: for each continuation, the logprob of each of its tokens after the prompt and the
        continuation's tokens before it, from the model's own distribution (nothing sampled; the Decisions API's
        answers). By default each continuation is scored as the tail of a prompt (`prompt_logprobs`): engines with
        a prefix cache read the shared prompt once. Engines that can read it more cheaply override it."""
        if not self.scores_prompts:
            raise InvalidRequest(f"the {self.engine_name} engine cannot score tokens, so it cannot answer decisions",
                                 param="model")
        scored: list[list[float]] = []
        for index, continuation in enumerate(continuations):
            steps = await self._scored_prompt(f"{request_id}-{index}",
                                              replace(prompt, token_ids=[*prompt.token_ids, *continuation]))
            tail = steps[len(prompt.token_ids):]
            if len(tail) != len(continuation) or any(step is None or step.logprob is None for step in tail):
                raise EngineError("the engine did not score every token of the answer")
            scored.append([step.logprob for step in tail if step is not None and step.logprob is not None])
        return scored

    async def _scored_prompt(self, request_id: str, prompt: Prompt) -> tuple[TokenStep | None, ...]:
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        scores: tuple[TokenStep | None, ...] | None = None
        async with aclosing(self.generate(request_id, prompt, params)) as outputs:
            async for output in outputs:
                if output.prompt_logprobs is not None:
                    scores = output.prompt_logprobs
                    break  # the one token it would sample is not needed: closing the stream aborts it
        if scores is None:
            raise EngineError("the engine did not score the prompt")
        return scores

    def speculative_tokens(self) -> tuple[int, int] | None:
        """Draft tokens proposed and accepted so far, where the engine drafts (speculative decoding); else None."""
        return None

    async def start(self) -> None:
        """Load the model; blocking work runs off the event loop."""

    async def close(self) -> None:
        """Release the model."""

    @abc.abstractmethod
    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        """Token ids of `text`; special-token markup in it is parsed as special tokens."""

    async def tokenize_plain(self, text: str) -> list[int]:
        """Token ids of `text` read as plain text: special-token markup in it is just characters.
        Engines that list `special_texts` implement it."""
        raise NotImplementedError

    @abc.abstractmethod
    async def detokenize(self, token_ids: list[int]) -> str: ...

    @abc.abstractmethod
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (cheap; used for echoed prompts)."""

    @abc.abstractmethod
    def generate(self, request_id: str, prompt: Prompt, params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        """Stream sampled tokens. Closing the iterator early aborts the generation."""

    @abc.abstractmethod
    async def abort(self, request_id: str) -> None:
        """Stop a running generation; its iterator ends soon after."""

    async def tokenize_texts(self, texts: list[str], add_special: bool, truncate_to: int | None) -> list[list[int]]:
        """Each text's token ids for embedding; `truncate_to`: cut to that many tokens (an engine whose
        tokenizer truncates itself keeps the end-of-text tokens it adds)."""
        ids = [await self.tokenize(text, add_special) for text in texts]
        return [tokens[:truncate_to] for tokens in ids] if truncate_to else ids

    async def embed(self, inputs: list[list[int]]) -> list[list[float]]:
        """One embedding vector per token-id sequence (task "embed"), in order, full width."""
        raise NotImplementedError

    async def relay_embeddings(self, model: str, body: dict) -> dict:
        """A gateway's: the upstream's answer to this /embeddings request body."""
        raise NotImplementedError

    # A gateway sends /v1/rerank, /v2/rerank and /v1/score requests to an upstream whole (relay_scoring).
    relays_scoring: bool = False

    async def score_pairs(self, pairs: list[tuple[str, str]]) -> PairScores:
        """A reranker's (task "rerank") relevance score of each (query, document) pair, in order: the score as the
        engine's reference implementation gives it (rostra/api/rerank/ says which)."""
        raise NotImplementedError

    async def relay_scoring(self, model: str, path: str, body: dict) -> dict:
        """A gateway's: the upstream's answer to this rerank or score request body, sent to its `path`
        ("rerank" or "score", under its /v1 base)."""
        raise NotImplementedError

    def running_requests(self) -> int:
        """How many generations hold engine capacity right now (for health and tests)."""
        return 0

    # What /metrics exports under vLLM's gauge names (the llm-d / KServe contract: schedulers pick the
    # replica from them). By default from the generations in flight and the engine's `parallel` sequences;
    # an engine that knows better (vLLM's own scheduler) says so.

    def queued_requests(self) -> int:
        """Generations the engine holds but does not run yet (more in flight than it runs at once)."""
        return max(0, self.running_requests() - self.parallel)

    def scheduled_requests(self) -> int:
        """Generations the engine runs right now (vllm:num_requests_running)."""
        return self.running_requests() - self.queued_requests()

    def cache_usage(self) -> float:
        """vllm:kv_cache_usage_perc, 0 to 1: the share of the engine's sequence slots that hold a generation
        (llama.cpp's slots, the transformers engine's batch rows, a gateway's upstream concurrency)."""
        return min(self.running_requests(), self.parallel) / max(self.parallel, 1)

    # A gateway serves several models, some of them relayed whole to an upstream; an engine
    # with its own model serves that one, under the names it is given.

    def models(self) -> list[ModelInfo]:
        return [self.model]

    def model_info(self, name: str) -> ModelInfo:
        return self.model

    def adapter_path(self, name: str) -> str | None:
        """Where the LoRA adapter `name` was loaded from."""
        return None

    async def load_adapter(self, adapter: LoraAdapter) -> None:
        """Load a LoRA adapter while serving (`POST /v1/load_lora_adapter`): once this returns, `adapters` names it
        and requests may. Raises FileNotFoundError (nothing at its path), ValueError (not an adapter this engine
        reads, or not for this model) or InvalidRequest."""
        raise InvalidRequest(f"LoRA adapters are not served by the {self.engine_name} engine", param="lora_name")

    async def unload_adapter(self, name: str) -> None:
        """Unload a LoRA adapter `adapters` names (`POST /v1/unload_lora_adapter`); Conflict while requests use it."""
        raise InvalidRequest(f"LoRA adapters are not served by the {self.engine_name} engine", param="lora_name")

    def adapter_requests(self) -> AdapterRequests:
        """The adapters of the requests running and waiting (vllm:lora_requests_info)."""
        return AdapterRequests(max_loras=len(self.adapters))

    def relays(self, model: str) -> bool:
        """True: requests for `model` go to an upstream whole (rostra renders its stream)."""
        return False

    async def relay(self, model: str, api: str, body: dict) -> RelayedStream:
        """Send a streamed Chat Completions ("chat/completions") or Completions ("completions")
        request upstream; returns once its status is 2xx (else raises APIError)."""
        raise NotImplementedError

    def slots_free(self) -> int | None:
        """Sequences the engine could start now, where it counts them (llama.cpp's slots)."""
        return None

    async def readiness(self) -> str | None:
        """Why the engine cannot take work right now (dead, lost its capacity), or None: it can. Readiness
        probes (/health/ready) ask it; keep it cheap (a loopback call at most)."""
        return None

    def health(self) -> dict:
        """Extra facts for /health (a gateway's upstreams)."""
        return {}
