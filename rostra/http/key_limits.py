"""Per-key limits at admission (`--api-key-file` with `rpm`, `tpm`, `max_concurrent`, `daily_tokens`).

A request that runs a model (MODEL_ROUTES; a Responses WebSocket counts once, at its upgrade) from a key with limits
is admitted only if the key is within every one of them, counted in the usage store, so replicas sharing a store
share the counts. A refused request gets a 429 in its API's envelope with `Retry-After`; every admitted one gets
OpenAI's `x-ratelimit-*` headers (which the official SDKs and LiteLLM read) for the limits the key has. Token limits
count the tokens of model turns that finished: a request admitted under them runs to its end, and the next one
waits.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from rostra.api_keys import KeyLimits
from rostra.errors import APIError
from rostra.http.caller import Caller
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.middleware import deny_websocket, send_error
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


class KeyLimitsMiddleware:
    """Admission by the caller's limits (inside the API key middleware, which says who calls)."""

    def __init__(self, app, usage: UsageStore, envelopes: ErrorEnvelopes | None = None):
        self.app = app
        self.usage = usage
        self.envelopes = envelopes or ErrorEnvelopes()

    async def __call__(self, scope, receive, send):
        caller: Caller | None = scope.get("state", {}).get("caller")
        if (caller is None or caller.tenant is None or not caller.limits.any or scope["path"] not in MODEL_ROUTES
                or (scope["type"] == "http" and scope["method"] != "POST")):
            return await self.app(scope, receive, send)
        limits = caller.limits
        window, request_id = await self.usage.admit(caller.tenant, time.time(),
                                                     lambda seen: refusal(limits, seen) is None)
        headers = rate_limit_headers(limits, window, admitted=request_id is not None)
        if request_id is None:
            refused = refusal(limits, window)
            assert refused is not None
            log.warning("429 for key %s on %s: %s", caller.name or "(unnamed)", scope["path"], refused.message)
            error = RateLimited(refused.message, refused.retry_after, refused.limit)
            if scope["type"] == "websocket":
                return await deny_websocket(scope, receive, send, error, self.envelopes)
            return await send_error(scope, _with_headers(send, headers), error, self.envelopes)
        try:
            await self.app(scope, receive, _with_headers(send, headers) if scope["type"] == "http" else send)
        finally:
            await self.usage.finish(request_id, time.time())


def _with_headers(send, headers: list[tuple[bytes, bytes]]):
    """`send` with `headers` added to the response's start."""
    async def sending(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *headers]}
        await send(message)
    return sending
