"""rostra as a gateway: the models of remote OpenAI-compatible servers behind one API.

Pass-through upstreams get the Chat/Completions request as it came (always streamed; rostra
renders the stream or folds it, so stream and non-stream agree). Raw upstreams are asked for
the plain completion of a prompt rendered and tokenized here, and their text goes through
rostra's own reasoning and tool parsers like a local engine's tokens: correct tool calling
in front of servers whose own parsing is broken. Either way the Responses API, its store and
the metrics are rostra's, so an upstream needs to speak only Chat Completions.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import AsyncGenerator

from rostra.engines.base import NATIVE_SAMPLERS, Engine
from rostra.core import EngineOutput, ModelInfo, Prompt, SamplingParams
from rostra.engines.remote.pool import UpstreamPool, UpstreamResponse
from rostra.engines.remote.prompt_scores import prompt_steps
from rostra.engines.remote.upstream import UpstreamConfig
from rostra.errors import BadGateway, InvalidRequest
from rostra.protocol.logprobs import completion_steps
from rostra.tokenizer import TextTokenizer, load_local_tokenizer

log = logging.getLogger("rostra.gateway")


class RemoteEngine(Engine):
    relays_embeddings = True  # /v1/embeddings goes to an upstream serving the model, whatever its mode
    relays_scoring = True  # and so do /v1/rerank, /v2/rerank and /v1/score
    # Forwarded: the upstream honours them or answers the 400 itself.
    native_samplers = NATIVE_SAMPLERS
    schedules_by_priority = True
    engine_name = "remote"
    tail_samplers = frozenset({"tfs", "top_a"})  # forwarded (a tabbyAPI upstream runs them)
    scores_prompts = True  # raw mode: the upstream's prompt_logprobs (a passthrough model's go in relay.py)

    def __init__(self, upstreams: list[UpstreamConfig], tokenizer_path: str | Path | None = None,
                 max_model_len: int | None = None, retries: int = 2, health_interval: float = 5.0,
                 timeout: float = 600.0):
        if not upstreams:
            raise ValueError("the remote engine needs at least one --upstream")
        if any(config.mode == "raw" for config in upstreams) and tokenizer_path is None:
            raise ValueError("raw upstreams need --tokenizer (the model's GGUF, tokenizer.json or checkpoint "
                             "directory): rostra renders and tokenizes their prompts")
        self.pool = UpstreamPool(upstreams, retries=retries, health_interval=health_interval, timeout=timeout)
        self.max_model_len = max_model_len
        self.model = ModelInfo("gateway", max_model_len or 0, owned_by="rostra")
        self.tokenizer: TextTokenizer | None = None
        if tokenizer_path is not None:
            local = load_local_tokenizer(tokenizer_path)
            self.tokenizer = local.tokenizer
            self.chat_template, self.bos_token, self.eos_token = local.chat_template, local.bos_token, local.eos_token
            self.named_tokens = local.named_tokens
            self.vocab_size = local.tokenizer.vocab_size
        self._streams: dict[str, UpstreamResponse] = {}

    async def start(self) -> None:
        await self.pool.start()
        for upstream in self.pool.upstreams:
            state = upstream.state()
            log.info("upstream %s (%s): %s", state["url"], state["mode"],
                     ", ".join(state["models"]) if state["models"] else f"unreachable ({state['last_error']})")
            if upstream.config.mode == "raw" and not self.max_model_len:
                for name in state["models"]:
                    if not self.model_info(name).context_length:
                        log.warning("raw upstream %s does not say %s's context length: give --max-model-len",
                                    state["url"], name)

    async def close(self) -> None:
        await self.pool.close()

    # -- models -----------------------------------------------------------------------------

    def models(self) -> list[ModelInfo]:
        return [self.model_info(name) for name in sorted(self.pool.models())]

    def model_info(self, name: str) -> ModelInfo:
        info = self.pool.models().get(name) or ModelInfo(name, 0)
        context = self.max_model_len or info.context_length
        return ModelInfo(name, context, info.owned_by, info.sees_images)

    def takes_images(self, model: str) -> bool:
        """A relayed model whose upstream says it sees images: rostra checks and inlines each image and the upstream
        reads it. A raw upstream gets a plain completion of text: no place for an image."""
        return self.relays(model) and self.model_info(model).sees_images

    def relays(self, model: str) -> bool:
        upstreams = self.pool.upstreams_for(model)
        return not upstreams or upstreams[0].config.mode == "passthrough"

    async def relay(self, model: str, api: str, body: dict) -> UpstreamResponse:
        return await self.pool.post(model, f"/{api}", body)

    async def relay_embeddings(self, model: str, body: dict) -> dict:
        """The request as it came, to the least busy upstream that serves `model` (retried elsewhere on
        connection errors, 5xx and 429 as chat requests are); its JSON answer, as it is."""
        response = await self.pool.post(model, "/embeddings", body)
        try:
            return await response.json()
        finally:
            await response.aclose()

    async def relay_scoring(self, model: str, path: str, body: dict) -> dict:
        """As relay_embeddings, to the upstream's /rerank or /score under its /v1 base (vLLM, llama.cpp's server,
        rostra: a /v2/rerank request is sent there too, its body and answer being the same)."""
        response = await self.pool.post(model, f"/{path}", body)
        try:
            return await response.json()
        finally:
            await response.aclose()

    def running_requests(self) -> int:
        return sum(upstream.outstanding for upstream in self.pool.upstreams)

    def health(self) -> dict:
        return {"upstreams": [upstream.state() for upstream in self.pool.upstreams]}

    # -- raw mode: rostra's prompt, the upstream's plain completion -------------------------

    def _tokenizer(self) -> TextTokenizer:
        if self.tokenizer is None:
            raise InvalidRequest("this gateway has no tokenizer (start it with --tokenizer)")
        return self.tokenizer

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        return await asyncio.to_thread(self._tokenizer().encode, text)

    async def detokenize(self, token_ids: list[int]) -> str:
        return self._tokenizer().decode(token_ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self.tokenizer.token_bytes(token_id) if self.tokenizer else b""

    async def abort(self, request_id: str) -> None:
        stream = self._streams.get(request_id)
        if stream is not None:
            await stream.aclose()

    async def generate(self, request_id: str, prompt: Prompt,
                       params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        stream = await self.pool.post(prompt.model, "/completions", completion_body(prompt, params))
        self._streams[request_id] = stream
        scored = params.prompt_logprobs is None
        try:
            async for chunk in stream.events():
                usage = chunk.get("usage")
                for choice in chunk.get("choices") or ():
                    if not scored and choice.get("prompt_logprobs") is not None:
                        scored = True
                        yield EngineOutput(prompt_logprobs=prompt_steps(
                            prompt.token_ids, choice["prompt_logprobs"], params.prompt_logprobs or 0, self.token_bytes))
                    steps = completion_steps(choice.get("text") or "", choice.get("logprobs"))
                    reason = choice.get("finish_reason")
                    if steps or reason:
                        stop = choice.get("stop_reason") if reason else None  # vLLM's: a stop string or token id
                        yield EngineOutput(steps, "length" if reason == "length" else "stop" if reason else None,
                                           stop_reason=stop if isinstance(stop, (int, str)) else None)
                if usage:
                    details = usage.get("prompt_tokens_details") or {}
                    cached, written = details.get("cached_tokens"), details.get("cache_write_tokens")
                    yield EngineOutput(completion_tokens=int(usage.get("completion_tokens") or 0),
                                       cached_tokens=int(cached) if cached is not None else None,
                                       cache_write_tokens=int(written) if written is not None else None)
            if not scored:  # an upstream that does not know the field (llama.cpp's server ignores it)
                raise BadGateway("the upstream did not score the prompt (prompt_logprobs): it may not support it")
        finally:
            self._streams.pop(request_id, None)
            await stream.aclose()


def completion_body(prompt: Prompt, params: SamplingParams) -> dict:
    """A Completions request for the rendered prompt's token ids (exact: no second BOS, no
    re-tokenization upstream). Stop strings stay here: rostra's decoder holds them back."""
    body: dict = {"model": prompt.model, "prompt": prompt.token_ids, "max_tokens": params.max_tokens,
                  "temperature": params.temperature, "top_p": params.top_p, "stream": True,
                  "stream_options": {"include_usage": True}}
    if params.seed is not None:
        body["seed"] = params.seed
    if params.presence_penalty:
        body["presence_penalty"] = params.presence_penalty
    if params.frequency_penalty:
        body["frequency_penalty"] = params.frequency_penalty
    if params.logit_bias:
        body["logit_bias"] = {str(token): bias for token, bias in params.logit_bias.items()}
    if params.top_logprobs is not None:
        body["logprobs"] = params.top_logprobs
    # vLLM's and llama.cpp's extensions, sent only when asked for (OpenAI itself refuses them).
    # repeat_penalty: llama.cpp's server's name for it (vLLM's ignores a field it does not know).
    for name, value, off in (("top_k", params.top_k, 0), ("min_p", params.min_p, 0.0),
                             ("repetition_penalty", params.repetition_penalty, 1.0),
                             ("repeat_penalty", params.repetition_penalty, 1.0),
                             ("ignore_eos", params.ignore_eos, False)):
        if value != off:
            body[name] = value
    if params.min_tokens:  # the upstream holds back its end token and the stop tokens until then
        body["min_tokens"] = params.min_tokens
    if params.stop_token_ids:  # the upstream's text pieces carry no token ids: it matches them itself
        body["stop_token_ids"] = list(params.stop_token_ids)
    if params.bad_words:
        body["bad_words"] = list(params.bad_words)
    if params.prompt_logprobs is not None:
        body["prompt_logprobs"] = params.prompt_logprobs
    if prompt.cache_salt:
        body["cache_salt"] = prompt.cache_salt
    if params.allowed_token_ids is not None:
        body["allowed_token_ids"] = list(params.allowed_token_ids)
    if params.priority:
        body["priority"] = params.priority
    if params.tfs < 1.0:
        body["tfs"] = params.tfs
    if params.top_a > 0.0:
        body["top_a"] = params.top_a
    body.update({name: list(value) if isinstance(value, tuple) else value
                 for name, value in params.samplers.given().items()})
    return body

