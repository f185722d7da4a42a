"""Pure ASGI middleware (no buffering, so streams stay streams): request ids, API keys, body size, access log.
An error they answer with leaves in the envelope its path's API registered (envelopes.py)."""

from __future__ import annotations

import hmac
import json
import logging
import os
import time

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from rostra.api_keys import ApiKey
from rostra.errors import APIError, PayloadTooLarge, Unauthorized, UnsupportedMediaType
from rostra.http.content_encoding import BodyDecoder, body_decoder
from rostra.http.caller import ANONYMOUS, Caller, current_caller
from rostra.http.envelopes import ErrorEnvelopes
from rostra.http.error_log import MAX_ERROR_BODY, MAX_LOGGED_BODY, ErrorSummary, read_error, redacted_body
from rostra.store.tenancy import EVERYONE, Tenant, fingerprint


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
# Admin routes outside /admin, where vLLM has them: loading and unloading LoRA adapters (vLLM opens them only with
# VLLM_ALLOW_RUNTIME_LORA_UPDATING; here only an --admin-key does, as /admin).
ADMIN_PATHS = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter"})


class ApiKeyMiddleware:
    """Bearer auth on every route and method but the public routes (or Anthropic's `x-api-key` header, which its
    SDKs and Claude Code send); keys are compared in constant time. A public route learns whether its caller holds
    a key (`scope["state"]["authorized"]`): /health shows its details only then. CORS preflights are answered by
    the CORS middleware outside this one, so OPTIONS needs no exception here (it would leak the route table).

    Every request is told its tenant (`scope["state"]["tenant"]`, rostra/store/tenancy.py): an API key's own, which
    sees only what that key stored (all, with `shared_store`); an admin key's, which sees all (admin keys open the
    API routes too); without API keys, the one tenant that sees all."""

    def __init__(self, app, api_keys: list[str], public_paths: frozenset[str] = PUBLIC_PATHS,
                 admin_keys: list[str] | None = None, shared_store: bool = False,
                 envelopes: ErrorEnvelopes | None = None, key_details: list[ApiKey] | None = None):
        if any(not key.strip() for key in [*api_keys, *(admin_keys or [])]):
            raise ValueError("empty API keys are refused")
        self.app = app
        self.keys = [key.encode() for key in api_keys]
        self.admin_keys = [key.encode() for key in admin_keys or []]
        self.tenants = [Tenant(fingerprint(key), sees_all=shared_store) for key in self.keys]
        self.admin_tenants = [Tenant(fingerprint(key), sees_all=True) for key in self.admin_keys]
        details = {detail.key: detail for detail in key_details or []}
        self.callers = [Caller(tenant.key, details[key].name, details[key].limits, may_prioritize=details[key].priority)
                        if key in details else Caller(tenant.key) for key, tenant in zip(api_keys, self.tenants)]
        self.admin_callers = [Caller(tenant.key, "admin", admin=True) for tenant in self.admin_tenants]
        self.public_paths = public_paths
        self.envelopes = envelopes or ErrorEnvelopes()

    @staticmethod
    def _match(scope, keys: list[bytes]) -> int | None:
        """The index of the key the request carries, or None."""
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer":
            token = headers.get(b"x-api-key", b"")
        if not token.strip():
            return None
        # Compare with every key, without stopping early, so timing tells nothing.
        matches = [hmac.compare_digest(token.strip(), key) for key in keys]
        return matches.index(True) if any(matches) else None

    def _authorized(self, scope, keys: list[bytes]) -> bool:
        return self._match(scope, keys) is not None

    def _caller(self, scope) -> tuple[Tenant, Caller] | None:
        """The caller's tenant and key on an API route; None for a caller with no valid key where keys are
        required."""
        if not self.keys:
            return EVERYONE, ANONYMOUS
        index = self._match(scope, self.keys)
        if index is not None:
            return self.tenants[index], self.callers[index]
        index = self._match(scope, self.admin_keys)
        return None if index is None else (self.admin_tenants[index], self.admin_callers[index])

    def _admit(self, scope, receive, send, who: tuple[Tenant, Caller]):
        """The app called as `who`: its tenant in the scope, its key in the scope and the request's context."""
        tenant, caller = who
        state = scope.setdefault("state", {})
        state["tenant"], state["caller"] = tenant, caller
        current_caller.set(caller)  # this task's context: the request's, and what it starts
        return self.app(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            path = scope["path"]
            if path.startswith("/admin") or path in ADMIN_PATHS:  # only the admin key, and only when one is set
                if not (self.admin_keys and self._authorized(scope, self.admin_keys)):
                    return await send_error(scope, send, Unauthorized("an admin key is required"), self.envelopes)
            elif path in self.public_paths:
                authorized = not self.keys or self._authorized(scope, self.keys)
                scope.setdefault("state", {})["authorized"] = authorized
            elif (who := self._caller(scope)) is not None:
                return await self._admit(scope, receive, send, who)
            else:
                return await send_error(scope, send, Unauthorized(), self.envelopes)
        elif scope["type"] == "websocket":  # the Responses API's WebSocket mode: the same keys, checked at the upgrade
            if (who := self._caller(scope)) is None:
                return await deny_websocket(scope, receive, send, Unauthorized(), self.envelopes)
            return await self._admit(scope, receive, send, who)
        await self.app(scope, receive, send)


class BodySizeLimitMiddleware:
    """Request bodies above the limit are refused with 413, whether or not they declare a length. A compressed body
    (Content-Encoding) is decoded here, for every route, as it arrives: the limit holds for both its size on the
    wire and its decoded size, and decoding stops as soon as that passes the limit (a decompression bomb)."""

    def __init__(self, app, max_bytes: int, upload_bytes: int | None = None,
                 envelopes: ErrorEnvelopes | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.envelopes = envelopes or ErrorEnvelopes()
        self.upload_bytes = upload_bytes  # POST /v1/files: a file upload has its own limit (--max-file-bytes)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/v1/files" and self.upload_bytes is not None:
            return await BodySizeLimitMiddleware(self.app, self.upload_bytes, envelopes=self.envelopes)(
                scope, receive, send)
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await send_error(scope, send, self._error(), self.envelopes)
        encoding = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
        decoder: BodyDecoder | None = None
        if encoding not in ("", "identity"):
            decoder = body_decoder(encoding)
            if decoder is None:
                error = UnsupportedMediaType(f"unsupported Content-Encoding {encoding!r}: gzip, deflate or zstd")
                return await send_error(scope, send, error, self.envelopes)
            # The route sees the decoded body, of a length no header states. In place: the access log reads the
            # route the router leaves in this scope.
            scope["headers"] = [(name, value) for name, value in scope["headers"]
                                if name not in (b"content-encoding", b"content-length")]
        received = decoded = 0

        async def counting_receive():
            nonlocal received, decoded
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise self._error()  # surfaces where the route reads its body: a 413 envelope
            if decoder is None or message["type"] != "http.request":
                return message
            body = decoder.decode(message.get("body", b""), self.max_bytes - decoded)
            if body is None:
                raise self._error()
            decoded += len(body)
            if not message.get("more_body", False) and received:  # no body at all is no body, whatever its header
                decoder.finish()
            return {**message, "body": body}

        await self.app(scope, counting_receive, send)

    def _error(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body larger than {self.max_bytes} bytes")


async def send_error(scope, send, error: APIError, envelopes: ErrorEnvelopes) -> None:
    """`error` in the envelope of the API whose path this is; the access log reads it from the scope (an envelope
    may have no `param` or `code`)."""
    state = scope.setdefault("state", {})
    state["error"] = error
    body = json.dumps(envelopes.body(scope["path"], error, state.get("request_id"))).encode()
    headers = [(b"content-type", b"application/json"),
               *((name.lower().encode(), value.encode()) for name, value in error.headers.items())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def deny_websocket(scope, receive, send, error: APIError, envelopes: ErrorEnvelopes) -> None:
    """A refused WebSocket upgrade: the HTTP error an HTTP request would get, where the server lets an app answer
    the handshake (uvicorn does: the ASGI `websocket.http.response` extension), else a close with 1008 (policy)."""
    access_log.warning("WebSocket upgrade on %s refused: %s", scope["path"], error.message)
    websocket = WebSocket(scope, receive, send)
    body = envelopes.body(scope["path"], error, scope.get("state", {}).get("request_id"))
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse(body, status_code=error.status_code, headers=error.headers))
    else:
        await websocket.close(1008, error.message[:120])


access_log = logging.getLogger("rostra.requests")


class AccessLogMiddleware:
    """One structured (JSON) line per request: id, route, status, latency, and for generations the
    model, token counts and time to first token (the route leaves its job in scope["state"]);
    and the request counted in the metrics by its route template (bounded label values).
    A 4xx or 5xx is logged at warning (5xx: error) with the error the client got (error_log.py) and,
    with `log_bodies` (--log-request-bodies), the request body, its secrets redacted."""

    def __init__(self, app, metrics=None, log_bodies: bool = False):
        self.app = app
        self.metrics = metrics
        self.log_bodies = log_bodies
        self._counters: dict[tuple[str, str, int], object] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.monotonic(), 500
        sent_error: list[bytes] = []  # the body of an error response, as it goes out
        request_body: list[bytes] = []  # with log_bodies: the request's, as it comes in

        async def recording_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400 and \
                    sum(map(len, sent_error)) < MAX_ERROR_BODY:
                sent_error.append(message.get("body", b""))
            await send(message)

        async def recording_receive():
            message = await receive()
            if message["type"] == "http.request" and sum(map(len, request_body)) <= MAX_LOGGED_BODY:
                request_body.append(message.get("body", b""))
            return message

        try:
            await self.app(scope, recording_receive if self.log_bodies else receive, recording_send)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if self.metrics is not None:
                self._counter(route or "unmatched", scope["method"], status).inc()
            level = logging.INFO if status < 400 else logging.WARNING if status < 500 else logging.ERROR
            if access_log.isEnabledFor(level):  # the record is built only for a log that writes it
                record = self._record(scope, route, status, started)
                if status >= 400:
                    record.update(self._failure(scope, b"".join(sent_error), b"".join(request_body)))
                access_log.log(level, json.dumps(record))

    def _failure(self, scope, response_body: bytes, request_body: bytes) -> dict:
        """Why a request failed, for the operator: the client's error, and its body when asked for. An API
        whose envelope has no `param` or `code` (Anthropic's) leaves its error in scope["state"]."""
        failure: dict = {}
        raised = scope.get("state", {}).get("error")
        error = ErrorSummary(raised.error_type, raised.code, raised.param, raised.message) \
            if isinstance(raised, APIError) else read_error(response_body)
        if error is not None:
            failure["error"] = error.record()
        if self.log_bodies:
            failure["body"] = redacted_body(request_body)
        return failure

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
            # running=True: the tokens sampled so far, so a generation the client hung up on (which never
            # reached its Finish) is logged with what it generated, not 0; a finished one counts the same.
            record.update(model=job.model, id=job.id, **job.stats.usage(running=True))
            if job.stats.first_token is not None:
                record["ttft_ms"] = round((job.stats.first_token - job.stats.started) * 1000, 1)
        return record
