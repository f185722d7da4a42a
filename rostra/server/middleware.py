"""Pure ASGI middleware (no buffering, so streams stay streams): request ids and API keys."""

from __future__ import annotations

import hmac
import json
import logging
import os
import time

from rostra.api.messages.errors import error_body
from rostra.errors import PayloadTooLarge, Unauthorized


class RequestIdMiddleware:
    """Echo the client's x-request-id, or make one; it is on every response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
        # 32 random hex digits, like a uuid4's hex without building the UUID (once per request).
        request_id = given.decode("latin-1")[:200] or os.urandom(16).hex()
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id.encode("latin-1"))]}
            await send(message)

        await self.app(scope, receive, send_with_id)


# Routes that answer without a key: probes need them, and they reveal nothing about the model's use
# (`HEAD /`: Claude Code's probe of its base URL).
PUBLIC_PATHS = frozenset({"/health", "/health/ready", "/version", "/"})


class ApiKeyMiddleware:
    """Bearer auth on every route and method but the public routes (or Anthropic's `x-api-key` header, which its
    SDKs and Claude Code send); keys are compared in constant time. A public route learns whether its caller holds
    a key (`scope["state"]["authorized"]`): /health shows its details only then. CORS preflights are answered by
    the CORS middleware outside this one, so OPTIONS needs no exception here (it would leak the route table)."""

    def __init__(self, app, api_keys: list[str], public_paths: frozenset[str] = PUBLIC_PATHS,
                 admin_keys: list[str] | None = None):
        if any(not key.strip() for key in [*api_keys, *(admin_keys or [])]):
            raise ValueError("empty API keys are refused")
        self.app = app
        self.keys = [key.encode() for key in api_keys]
        self.admin_keys = [key.encode() for key in admin_keys or []]
        self.public_paths = public_paths

    @staticmethod
    def _authorized(scope, keys: list[bytes]) -> bool:
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer":
            token = headers.get(b"x-api-key", b"")
        if not token.strip():
            return False
        # Compare with every key, without stopping early, so timing tells nothing.
        matches = [hmac.compare_digest(token.strip(), key) for key in keys]
        return any(matches)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path = scope["path"]
            if path.startswith("/admin"):  # admin routes: only the admin key, and only when one is set
                if not (self.admin_keys and self._authorized(scope, self.admin_keys)):
                    return await _send_error(send, Unauthorized("an admin key is required"))
            elif path in self.public_paths:
                authorized = not self.keys or self._authorized(scope, self.keys)
                scope.setdefault("state", {})["authorized"] = authorized
            elif self.keys and not self._authorized(scope, self.keys):
                if path.startswith("/v1/messages"):  # Anthropic's clients read their own envelope
                    return await _send_json(send, 401, error_body(Unauthorized("invalid x-api-key")))
                return await _send_error(send, Unauthorized())
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """Request bodies above the limit are refused with 413, whether or not they declare a length."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            if scope["path"].startswith("/v1/messages"):  # Anthropic's clients read their own envelope
                return await _send_json(send, 413, error_body(self._error()))
            return await _send_error(send, self._error())
        received = 0

        async def counting_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise self._error()  # surfaces where the route reads its body: a 413 envelope
            return message

        await self.app(scope, counting_receive, send)

    def _error(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body larger than {self.max_bytes} bytes")


async def _send_error(send, error) -> None:
    body = json.dumps(error.body()).encode()
    await send({"type": "http.response.start", "status": error.status_code,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def _send_json(send, status: int, body: dict) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


access_log = logging.getLogger("rostra.requests")


class AccessLogMiddleware:
    """One structured (JSON) line per request: id, route, status, latency, and for generations the
    model, token counts and time to first token (the route leaves its job in scope["state"]);
    and the request counted in the metrics by its route template (bounded label values)."""

    def __init__(self, app, metrics=None):
        self.app = app
        self.metrics = metrics
        self._counters: dict[tuple[str, str, int], object] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.monotonic(), 500

        async def recording_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if self.metrics is not None:
                self._counter(route or "unmatched", scope["method"], status).inc()
            if access_log.isEnabledFor(logging.INFO):  # the record is built only for a log that writes it
                access_log.info(json.dumps(self._record(scope, route, status, started)))

    def _counter(self, route: str, method: str, status: int):
        """The labelled counter, looked up once per (route, method, status): prometheus_client's
        labels() takes a lock and builds a key on every call."""
        key = (route, method, status)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = self.metrics.http_requests.labels(route, method, str(status))
        return counter

    @staticmethod
    def _record(scope, route: str | None, status: int, started: float) -> dict:
        state = scope.get("state", {})
        record = {"request_id": state.get("request_id"), "method": scope["method"],
                  "route": route or scope["path"], "status": status,
                  "ms": round((time.monotonic() - started) * 1000, 1)}
        job = state.get("job")
        if job is not None:
            record.update(model=job.model, id=job.id, **job.stats.usage())
            if job.stats.first_token is not None:
                record["ttft_ms"] = round((job.stats.first_token - job.stats.started) * 1000, 1)
        return record
