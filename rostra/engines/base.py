"""The engine interface: token ids in, token steps out.

An engine knows nothing of HTTP, chat messages or stop strings: it takes a prompt as token
ids plus sampling parameters and yields what it sampled, token by token, until it hits its
own end-of-generation token or `max_tokens`. Everything else (detokenization, stop strings,
parsing, rendering) happens once, in rostra's pipeline, for every engine alike.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import AsyncGenerator, AsyncIterator, Literal, Protocol

from rostra.errors import InvalidRequest

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    top_logprobs: int | None = None  # None: no logprobs; 0: the sampled token's only
    ignore_eos: bool = False
    # Constrained decoding (structured outputs, forced tool calls): at most one of the two.
    json_schema: dict | None = None
    grammar: str | None = None  # GBNF
    # vLLM's extensions. min_tokens: no end-of-generation token (nor stop_token_ids) before that many.
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    allowed_token_ids: tuple[int, ...] | None = None  # only these may be sampled
    # Never generated: the strings (for engines that take them) and their tokenizations (with and
    # without a leading space), whose last token is banned where the others precede it.
    bad_words: tuple[str, ...] = ()
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    prompt_logprobs: int | None = None  # None: the prompt is not scored; N: its tokens' logprobs and top N


@dataclass(frozen=True)
class Prompt:
    token_ids: list[int]
    # What the scripted engine matches on: the last message of a chat (or a completion prompt).
    last_message_text: str = ""
    last_message_role: str | None = None
    model: str = ""  # the model the request names (a gateway routes by it)


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    token_bytes: bytes
    logprob: float


@dataclass(frozen=True)
class TokenStep:
    token_id: int
    token_bytes: bytes
    logprob: float | None = None
    top_logprobs: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True)
class EngineOutput:
    """Tokens sampled since the previous output; `finish_reason` is set on the last one."""

    tokens: tuple[TokenStep, ...] = ()
    finish_reason: FinishReason | None = None
    # The engine's own count of the tokens generated so far, when it knows better than the
    # steps it reported (a remote upstream streams text pieces, then its usage).
    completion_tokens: int | None = None
    # Prompt tokens the engine took from its prefix cache (on the output that reports it; None: not said).
    cached_tokens: int | None = None
    # The prompt's tokens scored (params.prompt_logprobs): None for the first token, which nothing
    # predicts, then each token's step with its top alternatives. On the first output only.
    prompt_logprobs: tuple[TokenStep | None, ...] | None = None


@dataclass(frozen=True)
class ModelInfo:
    id: str
    context_length: int
    owned_by: str = "rostra"


class RelayedStream(Protocol):
    """An upstream's stream of chunks (OpenAI JSON objects); closing it early aborts it."""

    def events(self) -> AsyncIterator[dict]: ...

    async def aclose(self) -> None: ...


class EngineError(RuntimeError):
    """The engine failed while serving a request (not the client's fault)."""


class Engine(abc.ABC):
    model: ModelInfo
    chat_template: str | None = None
    bos_token: str = ""
    eos_token: str = ""
    vocab_size: int = 0
    parallel: int = 1  # sequences the engine runs at once (llama.cpp slots)
    # Whether json_schema/grammar constraints are enforced while sampling (from the first token on).
    enforces_constraints: bool = False
    # Whether the engine can score a prompt (prompt_logprobs, Completions echo with logprobs).
    scores_prompts: bool = False
    # Control tokens (chat markup, not end-of-generation ones): their text goes when skip_special_tokens.
    special_token_ids: frozenset[int] = frozenset()

    def check_params(self, params: SamplingParams) -> None:
        """Raise InvalidRequest (naming the parameter) for what this engine cannot honour."""
        if params.prompt_logprobs is not None and not self.scores_prompts:
            raise InvalidRequest("prompt_logprobs is not supported by this engine: it cannot score prompt tokens",
                                 param="prompt_logprobs")
    # The sampling the model's makers recommend, as request fields (temperature, top_p, top_k, min_p,
    # repetition_penalty, max_tokens): the defaults of `--generation-config auto`. Empty: none known.
    recommended_sampling: dict = {}

    async def start(self) -> None:
        """Load the model; blocking work runs off the event loop."""

    async def close(self) -> None:
        """Release the model."""

    @abc.abstractmethod
    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        """Token ids of `text`; special-token markup in it is parsed as special tokens."""

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

    def running_requests(self) -> int:
        """How many generations hold engine capacity right now (for health and tests)."""
        return 0

    # A gateway serves several models, some of them relayed whole to an upstream; an engine
    # with its own model serves that one, under the names it is given.

    def models(self) -> list[ModelInfo]:
        return [self.model]

    def model_info(self, name: str) -> ModelInfo:
        return self.model

    def relays(self, model: str) -> bool:
        """True: requests for `model` go to an upstream whole (rostra renders its stream)."""
        return False

    async def relay(self, model: str, api: str, body: dict) -> RelayedStream:
        """Send a streamed Chat Completions ("chat/completions") or Completions ("completions")
        request upstream; returns once its status is 2xx (else raises APIError)."""
        raise NotImplementedError

    def health(self) -> dict:
        """Extra facts for /health (a gateway's upstreams)."""
        return {}
