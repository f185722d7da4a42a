"""Per-key limits at admission (`--api-key-file` with `rpm`, `tpm`, `max_concurrent`, `daily_tokens`).

A request that runs a model (MODEL_ROUTES; on a Responses WebSocket, each `response.create`: key_turn) from a key
with limits is admitted only if the key is within every one of them, counted in the usage store, so replicas sharing a store
share the counts. A refused request gets a 429 in its API's envelope with `Retry-After`; every admitted one gets
OpenAI's `x-ratelimit-*` headers (which the official SDKs and LiteLLM read) for the limits the key has. Token limits
count the tokens of model turns that finished: a request admitted under them runs to its end, and the next one
waits.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from rostra.api_keys import KeyLimits
from rostra.errors import APIError
from rostra.http.caller import Caller
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.middleware import send_error
from rostra.store.usage_store import DAY, MINUTE, KeyWindow, UsageStore

log = logging.getLogger("rostra.requests")

MODEL_ROUTES = frozenset({
    "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/responses/compact", "/v1/messages",
    "/v1/embeddings", "/v1/rerank", "/v2/rerank", "/rerank", "/v1/score", "/score", "/v1/decisions",
})


class RateLimited(APIError):
    status_code = 429
    error_type = "rate_limit_error"  # Anthropic's name; OpenAI's envelope carries the same 429 and code

    def __init__(self, message: str, retry_after: float, kind: str):
        super().__init__(message, code="rate_limit_exceeded")
        self.kind = kind
        self.headers = {"Retry-After": str(max(1, math.ceil(retry_after)))}


@dataclass(frozen=True)
class Refusal:
    limit: str
    message: str
    retry_after: float


def refusal(limits: KeyLimits, window: KeyWindow) -> Refusal | None:
    """Why `window` leaves no room for one more request under `limits`, or None."""
    now = window.now
    if limits.max_concurrent is not None and window.running >= limits.max_concurrent:
        return Refusal("max_concurrent", f"Concurrency limit reached: {window.running} of "
                       f"{limits.max_concurrent} requests are running.", 1.0)
    if limits.rpm is not None and window.requests_last_minute >= limits.rpm:
        return Refusal("rpm", f"Rate limit reached for requests per minute (rpm): limit {limits.rpm}, used "
                       f"{window.requests_last_minute}.", _until(window.oldest_request_at, now))
    if limits.tpm is not None and window.tokens_last_minute >= limits.tpm:
        return Refusal("tpm", f"Rate limit reached for tokens per minute (tpm): limit {limits.tpm}, used "
                       f"{window.tokens_last_minute}.", _until(window.oldest_tokens_at, now))
    if limits.daily_tokens is not None and window.tokens_today >= limits.daily_tokens:
        return Refusal("daily_tokens", f"Daily token budget reached: limit {limits.daily_tokens}, used "
                       f"{window.tokens_today} today (UTC).", DAY - now % DAY)
    return None


def _until(oldest: float | None, now: float) -> float:
    """Seconds until the oldest entry of the last minute leaves it."""
    return MINUTE if oldest is None else max(0.0, oldest + MINUTE - now)


def rate_limit_headers(limits: KeyLimits, window: KeyWindow, admitted: bool) -> list[tuple[bytes, bytes]]:
    """OpenAI's x-ratelimit-* headers for the limits the key has; `admitted`: this request is one of the minute's."""
    headers: list[tuple[str, str]] = []
    if limits.rpm is not None:
        used = window.requests_last_minute + admitted
        headers += [("x-ratelimit-limit-requests", str(limits.rpm)),
                    ("x-ratelimit-remaining-requests", str(max(0, limits.rpm - used))),
                    ("x-ratelimit-reset-requests",
                     duration(_until(window.oldest_request_at if window.requests_last_minute else window.now,
                                     window.now)))]
    if limits.tpm is not None:
        headers += [("x-ratelimit-limit-tokens", str(limits.tpm)),
                    ("x-ratelimit-remaining-tokens", str(max(0, limits.tpm - window.tokens_last_minute))),
                    ("x-ratelimit-reset-tokens", duration(_until(window.oldest_tokens_at, window.now)
                                                          if window.tokens_last_minute else 0.0))]
    return [(name.encode(), value.encode()) for name, value in headers]


def duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it: `20ms`, `1s`, `6m0s`, `1h2m3s`."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


@dataclass(frozen=True)
class KeyAdmission:
    """One request's place in its key's limits: `request_id` (its usage row, to finish) when admitted, else why not;
    `headers`, the x-ratelimit-* headers either way."""
    request_id: int | None
    headers: list[tuple[bytes, bytes]]
    refused: RateLimited | None = None


async def admit_key(usage: UsageStore, caller: Caller, route: str) -> KeyAdmission:
    """Counts one request of `caller` (whose key has limits) in the store, or says why it is refused."""
    limits, tenant = caller.limits, caller.tenant
    assert tenant is not None  # keys with limits have a tenant (the callers below check)
    window, request_id = await usage.admit(tenant, time.time(), lambda seen: refusal(limits, seen) is None)
    headers = rate_limit_headers(limits, window, admitted=request_id is not None)
    if request_id is not None:
        return KeyAdmission(request_id, headers)
    refused = refusal(limits, window)
    assert refused is not None
    log.warning("429 for key %s on %s: %s", caller.name or "(unnamed)", route, refused.message)
    return KeyAdmission(None, headers, RateLimited(refused.message, refused.retry_after, refused.limit))


@asynccontextmanager
async def key_turn(usage: UsageStore, caller: Caller | None, route: str) -> AsyncIterator[None]:
    """One model turn that is not an HTTP request of its own (a WebSocket's `response.create`) within its caller's
    limits: RateLimited if the key has no room, else counted until the turn ends."""
    if caller is None or caller.tenant is None or not caller.limits.any:
        yield
        return
    admission = await admit_key(usage, caller, route)
    if admission.request_id is None:
        raise admission.refused or RateLimited("Rate limit reached.", 1.0, "unknown")
    try:
        yield
    finally:
        await asyncio.shield(usage.finish(admission.request_id, time.time()))


class KeyLimitsMiddleware:
    """Admission by the caller's limits (inside the API key middleware, which says who calls). A WebSocket is not a
    request of its own: each turn on it is (key_turn, from the connection)."""

    def __init__(self, app, usage: UsageStore, envelopes: ErrorEnvelopes | None = None):
        self.app = app
        self.usage = usage
        self.envelopes = envelopes or ErrorEnvelopes()

    async def __call__(self, scope, receive, send):
        caller: Caller | None = scope.get("state", {}).get("caller")
        if (caller is None or caller.tenant is None or not caller.limits.any or scope["path"] not in MODEL_ROUTES
                or scope["type"] != "http" or scope["method"] != "POST"):
            return await self.app(scope, receive, send)
        admission = await admit_key(self.usage, caller, scope["path"])
        if admission.request_id is None:
            assert admission.refused is not None
            return await send_error(scope, _with_headers(send, admission.headers), admission.refused, self.envelopes)
        try:
            await self.app(scope, receive, _with_headers(send, admission.headers))
        finally:
            # Shielded: a client gone mid-request cancels this task, and the row must still be closed.
            await asyncio.shield(self.usage.finish(admission.request_id, time.time()))


def _with_headers(send, headers: list[tuple[bytes, bytes]]):
    """`send` with `headers` added to the response's start."""
    async def sending(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *headers]}
        await send(message)
    return sending
