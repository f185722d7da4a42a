"""Pass-through: an upstream's Chat/Completions stream as rostra's semantic events.

The request goes upstream as the client wrote it (always streamed, usage asked for); each
chunk becomes the events a local engine's pipeline would have made, so the same renderers
stream it, the same fold answers non-streamed requests and the Responses API is built on it.
"""

from __future__ import annotations

import uuid
from typing import Any, AsyncGenerator, Callable, Sequence, get_args

from rostra.engines.base import Engine, RelayedStream
from rostra.core import Prompt
from rostra.errors import BadGateway, InvalidRequest
from rostra.parsing.decoder import StopToken
from rostra.parsing.events import (Event, Finish, FinishReason, Reasoning, Text, ToolCallArgs, ToolCallEnd,
                                   ToolCallStart)
from rostra.parsing.tools.emitter import CallEmitter
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.protocol.seeds import FOLDED_FIELDS
from rostra.protocol.logprobs import chat_steps, completion_steps
from rostra.serving.choices import ChoiceRun
from rostra.serving.job import Job, JobRequest, job_id
from rostra.serving.request_stats import RequestStats

# An upstream's finish_reason -> rostra's (one it does not know reads as "stop").
FINISH_REASONS: dict[str, FinishReason] = {reason: reason for reason in get_args(FinishReason)}


async def relay_job(engine: Engine, request: ChatCompletionRequest | CompletionRequest, api: str, id_prefix: str,
                    choices: int, last_text: str, reasoning_fields: tuple[str, ...] = (),
                    make_emitter: Callable[[], CallEmitter] | None = None) -> Job:
    """Open the upstream stream now (its 4xx are the client's error, before any byte is sent).
    `make_emitter`: the request's CallEmitter, which the upstream's tool calls pass too.
    Sampling extensions (min_tokens, bad_words, ...) go upstream with the body; the ones that add
    fields to the answer are refused: the chunks are read as events, which carry no such fields (but
    `prompt_logprobs`, which the upstream's chunks carry as they are to be answered: relayed verbatim)."""
    for name in ("return_token_ids", "return_tokens_as_token_ids"):
        if getattr(request, name, None) not in (None, False):
            raise InvalidRequest(f"{name} is not supported for models served through the gateway", param=name)
    # Folded aliases go as the fields they were folded into; the request's id names rostra's completion.
    body = request.model_dump(mode="json", exclude_unset=True, exclude={*FOLDED_FIELDS, "request_id"})
    return await relay_body_job(engine, request, body, api, id_prefix, choices, last_text, reasoning_fields,
                                make_emitter)


async def relay_body_job(engine: Engine, request: JobRequest, body: dict[str, Any], api: str, id_prefix: str, choices: int,
                         last_text: str, reasoning_fields: tuple[str, ...] = (),
                         make_emitter: Callable[[], CallEmitter] | None = None) -> Job:
    """The job of `body` sent upstream (streamed, usage asked for); `request`: what the job was made of (a wire
    request, or a turn)."""
    model = str(body["model"])
    body.update(stream=True, stream_options={"include_usage": True})
    upstream = await engine.relay(model, api, body)
    chunk_events: ChunkEvents = ChatChunkEvents() if api == "chat/completions" else CompletionChunkEvents()
    runs = [ChoiceRun(index, Prompt([], last_text, model=model)) for index in range(choices)]
    stats = RequestStats()
    job = Job(request, job_id(id_prefix, request), model, runs, stats, reasoning_fields=reasoning_fields)
    emitters = {index: make_emitter() for index in range(choices)} if make_emitter else {}
    job.source = lambda: relayed_events(upstream, chunk_events, stats, range(choices), emitters, runs)
    job.release = upstream.aclose  # a job that never runs (its store write failed) still closes its upstream
    return job


async def relayed_events(upstream: RelayedStream, chunk_events: ChunkEvents, stats: RequestStats, indices: range,
                         emitters: dict[int, CallEmitter] | None = None, runs: Sequence[ChoiceRun] = ()
                         ) -> AsyncGenerator[tuple[int, Event], None]:
    """`runs`: where the upstream's prompt_logprobs go (a chat chunk's top-level ones: every choice's)."""
    emitters = emitters or {}

    def gated(index: int, events: list[Event]) -> list[Event]:
        return emitters[index].feed(events) if index in emitters else events

    finished: set[int] = set()
    try:
        async for chunk in upstream.events():
            usage = chunk.get("usage")
            if usage:
                stats.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                details = usage.get("prompt_tokens_details") or {}
                stats.note_cached(0, int(details.get("cached_tokens") or 0))
                stats.note_cache_write(0, int(details.get("cache_write_tokens") or 0))
                stats.completion_tokens = int(usage.get("completion_tokens") or 0)
                reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
                if reasoning is not None:
                    stats.reasoning_tokens = int(reasoning)
            keep_prompt_scores(runs, chunk.get("prompt_logprobs"))
            for choice in chunk.get("choices") or ():
                index = choice.get("index", 0)
                if index not in indices:
                    raise BadGateway(f"the upstream sent a choice index {index} that was not asked for")
                keep_prompt_scores(runs[index:index + 1], choice.get("prompt_logprobs"))
                for event in gated(index, chunk_events.events(index, choice)):
                    if isinstance(event, Finish):
                        finished.add(index)
                    stats.observe(event)
                    yield index, event
    finally:
        await upstream.aclose()
    for index in indices:  # a stream that ended without saying why: it stopped
        if index not in finished:
            for event in gated(index, chunk_events.finish(index, "stop")):
                stats.observe(event)
                yield index, event


def keep_prompt_scores(runs: Sequence[ChoiceRun], scores: Any) -> None:
    """An upstream's prompt_logprobs (vLLM's shape: a list, the first entry null), kept for the runs' answers."""
    if scores is None:
        return
    if not isinstance(scores, list):
        raise BadGateway("the upstream sent prompt_logprobs that are not a list")
    for run in runs:
        run.relayed_prompt_logprobs = run.relayed_prompt_logprobs or scores


class ChatChunkEvents:
    """chat.completion.chunk choices -> events; tool calls are announced once, then their
    argument pieces, and closed when the choice finishes."""

    def __init__(self) -> None:
        self.open_calls: dict[int, list[int]] = {}

    def events(self, index: int, choice: dict[str, Any]) -> list[Event]:
        delta = choice.get("delta") or {}
        events: list[Event] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            events.append(Reasoning(reasoning))
        content = delta.get("content")
        logprobs = chat_steps(content or "", choice.get("logprobs"))
        if content or logprobs:
            events.append(Text(content or "", logprobs))
        for call in delta.get("tool_calls") or ():
            events += self._tool_call(index, call)
        reason = choice.get("finish_reason")
        if reason:
            events += self.finish(index, reason, choice)
        return events

    def _tool_call(self, index: int, call: dict[str, Any]) -> list[Event]:
        number = call.get("index", 0)
        function = call.get("function") or {}
        calls = self.open_calls.setdefault(index, [])
        events: list[Event] = []
        if number not in calls:
            calls.append(number)
            events.append(ToolCallStart(number, call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                                        function.get("name") or ""))
        if function.get("arguments"):
            events.append(ToolCallArgs(number, function["arguments"]))
        return events

    def finish(self, index: int, reason: str, choice: dict[str, Any] | None = None) -> list[Event]:
        ends: list[Event] = [ToolCallEnd(number) for number in self.open_calls.pop(index, [])]
        return ends + [upstream_finish(reason, choice or {})]


class CompletionChunkEvents:
    """text_completion choices -> events (legacy logprobs become token steps)."""

    def events(self, index: int, choice: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        text = choice.get("text") or ""
        if text:
            steps = completion_steps(text, choice.get("logprobs"))
            events.append(Text(text, steps if choice.get("logprobs") else ()))
        if choice.get("finish_reason"):
            events += self.finish(index, choice["finish_reason"], choice)
        return events

    def finish(self, index: int, reason: str, choice: dict[str, Any] | None = None) -> list[Event]:
        return [upstream_finish(reason, choice or {})]


def upstream_finish(reason: str, choice: dict[str, Any]) -> Finish:
    """The upstream's finish, with what it says stopped the choice (vLLM's stop_reason, tabby's stop_str)."""
    stop_reason, stop_str = choice.get("stop_reason"), choice.get("stop_str")
    text = stop_str if isinstance(stop_str, str) else None
    if isinstance(stop_reason, str):
        return Finish(FINISH_REASONS.get(reason, "stop"), 0, stop_string=stop_reason)
    if isinstance(stop_reason, int) and not isinstance(stop_reason, bool):
        return Finish(FINISH_REASONS.get(reason, "stop"), 0, stop_token=StopToken(stop_reason, text))
    return Finish(FINISH_REASONS.get(reason, "stop"), 0)  # (a stop_str alone may name an end-of-generation token)


ChunkEvents = ChatChunkEvents | CompletionChunkEvents

