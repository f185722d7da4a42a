"""A job: a validated request ready to run, its choices and the ids every chunk repeats; and the jobs of front ends
that a chat job generates (Responses, Messages)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Awaitable, Callable

from rostra import __version__
from rostra.parsing.events import Event
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from rostra.serving.choices import ChoiceRun
from rostra.serving.request_stats import RequestStats
from rostra.turn import OutputOptions, Turn

# Identifies the serving stack a response came from (OpenAI's field for backend changes).
SYSTEM_FINGERPRINT = f"fp_rostra_{__version__}"


def job_id(prefix: str, request: JobRequest) -> str:
    """vLLM's: the client's `request_id` (or its X-Request-Id header) after the prefix, else a fresh one."""
    return f"{prefix}-{getattr(request, 'request_id', None) or uuid.uuid4().hex}"


JobRequest = Turn | ChatCompletionRequest | CompletionRequest


@dataclass
class Job:
    """A validated request, ready to run: its choices and the ids every chunk repeats."""

    # What it was made of: a turn (any API's conversation), or the wire request it relays or completes whole.
    request: JobRequest
    id: str
    model: str
    runs: list[ChoiceRun]
    stats: RequestStats
    created: int = field(default_factory=lambda: int(time.time()))
    # Chat: the message field(s) the thinking goes to; empty: it is left out of the response.
    reasoning_fields: tuple[str, ...] = ()
    # Where the events come from when not from the engine's generations (a relayed upstream stream).
    source: Callable[[], AsyncGenerator[tuple[int, Event], None]] | None = None
    # What frees what preparing opened (a relayed upstream's connection) when the job may never run: idempotent.
    release: Callable[[], Awaitable[None]] | None = None
    options: OutputOptions = field(init=False)
    # The id the engine's generations run under: unique even where the client named the request
    # (request_id, X-Request-Id), a name two requests may share.
    engine_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.options = OutputOptions.of(self.request)
        named = getattr(self.request, "request_id", None)
        self.engine_id = f"{self.id}-{uuid.uuid4().hex[:12]}" if named else self.id

    async def close(self) -> None:
        """Free what the job holds before (or without) running it; harmless once it ran."""
        if self.release is not None:
            await self.release()

    def envelope(self, object_name: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """The fields every response and chunk of this job repeats."""
        return {"id": self.id, "object": object_name, "created": self.created, "model": self.model,
                "system_fingerprint": SYSTEM_FINGERPRINT, "choices": choices}

    def response(self, object_name: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """A non-streamed response: the choices, usage and timings."""
        return {**self.envelope(object_name, choices), "usage": self.stats.usage(), "timings": self.stats.timings()}


class OverChatJob:
    """A front end's prepared request that a chat job generates (Responses, Messages): what the access log
    and the request log read of any job comes from that chat job."""

    chat: Job

    @property
    def id(self) -> str:
        return self.chat.id

    @property
    def model(self) -> str:
        return self.chat.model

    @property
    def stats(self) -> RequestStats:
        return self.chat.stats

    @property
    def runs(self) -> list[ChoiceRun]:
        return self.chat.runs

    async def close(self) -> None:
        """Free what its chat job holds (a relayed upstream) if it never ran: idempotent."""
        await self.chat.close()
