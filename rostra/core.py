"""The data every layer shares: a prompt, the sampling parameters, and what an engine samples.

Plain frozen dataclasses, no behaviour: the engines (rostra/engines/) produce and consume them, the parsers
(rostra/parsing/) and the wire formats (rostra/protocol/) read them, and none of those layers has to import
another to do so.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class NativeSamplers:
    """llama.cpp's samplers beyond OpenAI's (README: "vLLM's and tabbyAPI's fields"); None: not set.
    A sampler is on when its switch is (typical_p below 1, mirostat 1 or 2, a DRY multiplier or an XTC
    probability above 0); the others tune it."""

    typical_p: float | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    dry_multiplier: float | None = None
    dry_base: float | None = None
    dry_allowed_length: int | None = None
    dry_penalty_last_n: int | None = None
    dry_sequence_breakers: tuple[str, ...] | None = None
    xtc_probability: float | None = None
    xtc_threshold: float | None = None

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.__dataclass_fields__)

    def given(self) -> dict[str, Any]:
        """The fields set, by name."""
        return {name: value for name in self.field_names() if (value := getattr(self, name)) is not None}

    def switched_on(self) -> list[str]:
        """The switches of the samplers this turns on: what an engine without them would ignore."""
        on = {"typical_p": (self.typical_p or 1.0) < 1.0, "mirostat": bool(self.mirostat),
              "dry_multiplier": bool(self.dry_multiplier), "xtc_probability": bool(self.xtc_probability)}
        return [name for name, is_on in on.items() if is_on]


@dataclass(frozen=True)
class ThinkFirst:
    """Think, then constrain (rostra/serving/think_first.py): the model thinks freely and the request's
    constraint starts after its reasoning ends. The markers are the reasoning parser's."""

    start: str
    end: str
    unopened_is_reasoning: bool  # an output that does not open with `start` is thinking (DeepSeek-R1)
    opened: bool  # the prompt ends inside an open thinking block
    budget: int  # the most tokens the thinking may take before it is closed for the model
    # Harmony (gpt-oss): the thinking is the analysis channel, and the constrained answer a message whose header
    # rostra writes for the model (rostra/serving/harmony_answer.py); None: the markers' plain continuation.
    harmony: HarmonyAnswer | None = None


@dataclass(frozen=True)
class HarmonyAnswer:
    """What gpt-oss answers with after its analysis under a constraint: its final message (the request's
    constraint binds the body), or a forced call to one of `calls` (name, the schema of its arguments)."""

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


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
    json_schema: dict[str, Any] | None = None
    grammar: str | None = None  # GBNF
    # vLLM's structural tag (rostra/guided/structural_tag.py), for engines that read it; `grammar` enforces it.
    structural_tag: dict[str, Any] | None = None
    # vLLM's extensions. min_tokens: no end-of-generation token (nor stop_token_ids) before that many.
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    allowed_token_ids: tuple[int, ...] | None = None  # only these may be sampled
    # Never generated: the strings (for engines that take them) and their tokenizations (with and
    # without a leading space), whose last token is banned where the others precede it.
    bad_words: tuple[str, ...] = ()
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    prompt_logprobs: int | None = None  # None: the prompt is not scored; N: its tokens' logprobs and top N
    samplers: NativeSamplers = NativeSamplers()
    tfs: float = 1.0  # tabby's tail-free sampling z: 1 is off
    top_a: float = 0.0  # tabby's top-a: 0 is off
    priority: int = 0  # vLLM's: lower runs first, where the engine schedules by priority
    adapter: str | None = None  # the LoRA adapter (--lora NAME) the request named as its model; None: the base
    # Set with a constraint on a reasoning model: the constraint applies to the answer only (engines never
    # see it: rostra/serving/think_first.py runs the thinking and the answer as two generations).
    think_first: ThinkFirst | None = None


@dataclass(frozen=True)
class PromptImage:
    """An image of the prompt, decoded and checked (rostra/images/): the client's own PNG or JPEG bytes where every
    engine reads them as they are, else re-encoded as PNG (rostra/images/decode.py)."""

    data: bytes = field(repr=False)
    width: int
    height: int
    media_type: str = "image/png"

    def data_url(self) -> str:
        return f"data:{self.media_type};base64," + base64.b64encode(self.data).decode("ascii")

    def placeholder(self) -> str:
        """How a model that shows images as text (the scripted engine) sees it."""
        return f"[image {self.width}x{self.height}]"


@dataclass(frozen=True)
class Prompt:
    token_ids: list[int]
    # What the scripted engine matches on: the last message of a chat (or a completion prompt).
    last_message_text: str = ""
    last_message_role: str | None = None
    model: str = ""  # the model the request names (a gateway routes by it)
    # The client's label for the conversation (`prompt_cache_key`, a Messages `metadata.user_id`): an engine
    # with per-slot prefix caches sends a session's turns where its prefix is (a hint: never needed).
    session_key: str | None = None
    # vLLM's `cache_salt`: a prefix cached for one salt is reused only by requests with the same salt (None too).
    cache_salt: str | None = None
    # vLLM's `mm_processor_kwargs`: options for the model's multimodal processor (engines that have one).
    mm_processor_kwargs: dict[str, Any] | None = None
    # The images the prompt shows, in order of appearance (an engine that sees images places each at its
    # marker in the rendered prompt).
    images: tuple[PromptImage, ...] = ()
    # The rendered prompt as text, given with images: an engine that reads them tokenizes text and images
    # together (llama.cpp's multimodal prompts), where `token_ids` counts each marker as its text.
    text: str | None = None


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
    # Prompt tokens the engine evaluated and keeps in its prefix cache for later requests that share the prefix (on
    # the output that reports it; None: not said, or the engine keeps no prefix cache).
    cache_write_tokens: int | None = None
    # The prompt's length as the engine counts it, where rostra's count of `token_ids` falls short (images: the
    # engine's image tokens, not their markers'). On the last output; None: `token_ids` is right.
    prompt_tokens: int | None = None
    # The prompt's tokens scored (params.prompt_logprobs): None for the first token, which nothing
    # predicts, then each token's step with its top alternatives. On the first output only.
    prompt_logprobs: tuple[TokenStep | None, ...] | None = None
    # What the engine says stopped it, where it matched a stop itself (an upstream's vLLM `stop_reason`: a stop
    # string, or a stop token's id); None: nothing, or rostra's decoder matched it.
    stop_reason: int | str | None = None


@dataclass(frozen=True)
class ModelInfo:
    id: str
    context_length: int
    owned_by: str = "rostra"
    # An upstream's model card lists "image" among its input_modalities (a gateway's models: it says so in turn).
    sees_images: bool = False
