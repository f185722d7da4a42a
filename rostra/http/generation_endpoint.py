"""The one way every generation request is served, whatever its API (Chat, Completions, Responses).

A service prepares a job from the validated body, then streams it, folds it into one response, or (Responses)
runs it in the background. Around that, in this one place: the admission slot, the request's deadline,
disconnect = abort, and the request log. The slot is owned by whatever outlives this call (the streamed
response, or the background run) and released by it, never by the `finally` of a generator that may never start.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Any, Callable

from starlette.requests import Request
from starlette.responses import Response

from rostra.http.context import server_context
from rostra.http.gate import admit
from rostra.http.sse import EventStreamResponse, KeepAlive, comment_keep_alive, json_bytes, until_disconnected
from rostra.models.bundle import ModelBundle
from rostra.serving.validation import check_generative

log = logging.getLogger("rostra.server")
CLIENT_CLOSED = 499  # nginx's code for "the client went away first"


async def serve_generation(request: Request, service_of: Callable[[ModelBundle], Any], body,
                           responses_api: bool = False, keep_alive: KeepAlive = comment_keep_alive) -> Response:
    """`service_of`: the service of the request's model that serves it (its chat, completions or messages;
    the server's Responses service). The model is leased (loaded first if need be) for as long as the request
    runs, stream and background run included: it is never unloaded under it. `keep_alive`: what its stream sends
    while silent (rostra/http/sse.py)."""
    settings = server_context(request).settings
    # The deadline bounds the admission wait and a model's load too; a client gone while they last is dropped at
    # once (gate.py: the same gate as the other engine work's).
    admitted = await admit(request, body.model)
    if admitted is None:
        return Response(status_code=CLIENT_CLOSED)
    deadline = admitted.deadline
    release: Callable[[], None] | None = admitted.release  # handed on to whatever outlives this call
    try:
        check_generative(admitted.bundle.engine.task, body.model)
        service = service_of(admitted.bundle)
        if request.headers.get("x-request-id") and hasattr(body, "request_id"):
            body.request_id = request.headers["x-request-id"][:256]  # vLLM's: the header names the completion
        # prepare downloads images, lists MCP tools, opens upstreams: bounded and watched like the generation
        job = await until_disconnected(request, deadline.wait_for(service.prepare(body)))
        if job is None:
            return Response(status_code=CLIENT_CLOSED)
        request.state.job = job  # for the access log
        if settings.log_requests:
            log.info("request %s prompt: %r", job.id, job.runs[0].prompt.last_message_text)
        if getattr(body, "background", False):
            response, release = await service.start_background(job, deadline, release), None
            if body.stream:
                return EventStreamResponse(service.follow(response["id"], None), responses_api=True,
                                           keep_alive=keep_alive)
            return json_response(response)
        if body.stream:
            stream = service.stream(job, deadline)
            streamed = EventStreamResponse(_logged(stream) if settings.log_outputs else stream, responses_api,
                                           on_close=release, keep_alive=keep_alive)
            release = None
            return streamed
        result = await until_disconnected(request, service.complete(job, deadline))
    finally:
        if release is not None:
            release()
    if settings.log_outputs and result:
        log.info("request %s output: %r", job.id, result.get("choices", result.get("output")))
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    if len(result.get("choices", ())) > MANY_CHOICES:  # a large answer is encoded off the event loop
        return Response(await asyncio.to_thread(json_bytes, result), media_type="application/json")
    return json_response(result)


MANY_CHOICES = 16


def json_response(body: dict) -> Response:
    """A JSON answer encoded with orjson (see json_bytes), not the standard library's JSONResponse."""
    return Response(json_bytes(body), media_type="application/json")


async def _logged(stream):
    async with aclosing(stream):
        async for item in stream:
            log.info("stream chunk: %s", item)
            yield item
