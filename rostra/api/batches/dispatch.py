"""One batch line, served by the same route an online request to its endpoint takes: the app's own routes and
error handlers, called in-process (no socket, no HTTP), as the tenant of the batch's key. So a line's answer is
the answer the same request gets online, errors included (a 4xx in the API's own envelope)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from rostra.http.caller import Caller, current_caller
from rostra.http.gate import BatchLine
from rostra.store.tenancy import Tenant

log = logging.getLogger("rostra.batches")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Asgi = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class LineAnswer:
    status_code: int
    body: object  # the JSON body (or the text, if a route answered something else)


async def run_line(app: Asgi, url: str, body: bytes, tenant: str | None, request_id: str,
                   window_ends: float | None) -> LineAnswer:
    """POST `body` to `url` on `app` (the routes with their error handlers) and collect the answer. `window_ends`
    (epoch seconds; None: no end, offline): the end of the batch's completion window, which bounds the line's wait
    for admission (http/gate.py)."""
    scope: Scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": url, "raw_path": url.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"x-request-id", request_id.encode())],
        "client": ("batch", 0), "server": ("batch", 0),
        # The batch's owner: what the line stores (a response, with store: true) is theirs.
        "state": {"tenant": Tenant(tenant, sees_all=tenant is None), "request_id": request_id,
                  "batch_line": BatchLine(window_ends)},
    }
    sent = False
    status = 500
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if sent:  # the client of a batch line never goes away: a route that watches for a disconnect waits
            await asyncio.Event().wait()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    # Whose usage the line's model turns are (rostra/http/usage_recorder.py), recorded as a batch's.
    caller = current_caller.set(Caller(tenant, batch=True))
    try:
        await app(scope, receive, send)
    finally:
        current_caller.reset(caller)
    raw = b"".join(chunks)
    try:
        return LineAnswer(status, json.loads(raw))
    except ValueError:
        return LineAnswer(status, raw.decode("utf-8", "replace"))
