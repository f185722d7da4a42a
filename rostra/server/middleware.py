"""Pure ASGI middleware (no buffering, so streams stay streams): request ids and API keys."""

from __future__ import annotations

import hmac
import json
import uuid

from rostra.errors import Unauthorized


class RequestIdMiddleware:
    """Echo the client's x-request-id, or make one; it is on every response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:200] or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", request_id.encode("latin-1"))]}
            await send(message)

        await self.app(scope, receive, send_with_id)


class ApiKeyMiddleware:
    """Bearer auth on the API routes (/v1/*); keys are compared in constant time."""

    def __init__(self, app, api_keys: list[str]):
        self.app = app
        self.keys = [key.encode() for key in api_keys]

    def _authorized(self, scope) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        # Compare with every key, without stopping early, so timing tells nothing.
        matches = [hmac.compare_digest(token.strip(), key) for key in self.keys]
        return any(matches)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.keys and scope["path"].startswith("/v1") and not self._authorized(scope):
            error = Unauthorized()
            body = json.dumps(error.body()).encode()
            await send({"type": "http.response.start", "status": error.status_code,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
