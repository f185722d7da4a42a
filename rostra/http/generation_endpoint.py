"""The one way every generation request is served, whatever its API (Chat, Completions, Responses).

A service prepares a job from the validated body, then streams it, folds it into one response, or (Responses)
runs it in the background. Around that, in this one place: the request's scope (scope.py: the admission slot,
the model's lease, what `prepare` opened, the deadline, the image budget), disconnect = abort, and the request
log. The scope is closed by whatever outlives this call (the streamed response, or the background run) when it
takes it, else by this call: never by the `finally` of a generator that may never start.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import aclosing
from typing import Any, AsyncGenerator, Callable, Protocol, TypeVar, runtime_checkable

from starlette.requests import Request
from starlette.responses import Response

from rostra.core import Prompt
from rostra.errors import InvalidRequest
from rostra.http.caller import ANONYMOUS
from rostra.http.context import server_context
from rostra.http.gate import admit
from rostra.http.scope import RequestScope
from rostra.http.sse import EventStreamResponse, KeepAlive, comment_keep_alive, json_bytes
from rostra.models.bundle import ModelBundle
from rostra.serving.deadline import Deadline
from rostra.serving.request_stats import RequestStats
from rostra.serving.validation import check_generative

log = logging.getLogger("rostra.server")
CLIENT_CLOSED = 499  # nginx's code for "the client went away first"


class GenerationBody(Protocol):
    """What the endpoint reads of a validated request body, whatever its API."""

    @property
    def model(self) -> str: ...

    @property
    def stream(self) -> bool: ...


class ChoicePrompt(Protocol):
    @property
    def prompt(self) -> Prompt: ...


class PreparedJob(Protocol):
    """A prepared request (a chat job, or a front end's over one): what the access log and the request log read,
    and `close`, which frees what preparing opened (held by the request's scope)."""

    @property
    def id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def stats(self) -> RequestStats: ...

    @property
    def runs(self) -> Any: ...  # a list of ChoiceRun: only the first one's prompt is read (the request log)

    async def close(self) -> None: ...


B = TypeVar("B", bound=GenerationBody, contravariant=True)
J = TypeVar("J", bound=PreparedJob)


class FrontEnd(Protocol[B, J]):
    """An API's service as the endpoint drives it: prepare a job from the body, fold it into one answer."""

    async def prepare(self, body: B, /) -> J: ...

    async def complete(self, job: J, deadline: Deadline, /) -> dict[str, Any]: ...


@runtime_checkable
class StreamingFrontEnd(Protocol):
    """A front end that streams (all but compaction)."""

    def stream(self, job: Any, deadline: Deadline, /) -> AsyncGenerator[dict[str, Any], None]: ...


@runtime_checkable
class BackgroundFrontEnd(Protocol):
    """A front end that runs a job in the background (Responses): it takes the request's scope and closes it
    when the run has ended; `follow` streams a stored response's events."""

    async def start_background(self, job: Any, scope: RequestScope, /) -> dict[str, Any]: ...

    def follow(self, response_id: str, starting_after: int | None, /) -> AsyncGenerator[dict[str, Any], None]: ...


async def serve_generation(request: Request, service_of: Callable[[ModelBundle], FrontEnd[B, J]], body: B,
                           responses_api: bool = False, keep_alive: KeepAlive = comment_keep_alive) -> Response:
    """`service_of`: the service of the request's model that serves it (its chat, completions or messages;
    the server's Responses service). The request's scope (rostra/http/scope.py) holds its slot, the model's
    lease (loaded first if need be) and what `prepare` opens, for as long as the request runs, stream and
    background run included: the model is never unloaded under it. `keep_alive`: what its stream sends while
    silent (rostra/http/sse.py)."""
    # The deadline bounds the admission wait and a model's load too; a client gone while they last is dropped at
    # once (gate.py: the same gate as the other engine work's).
    scope = await admit(request, body.model, allowed_priority(request, getattr(body, "priority", 0) or 0))
    if scope is None:
        return Response(status_code=CLIENT_CLOSED)
    async with scope:
        check_generative(scope.bundle.engine.capabilities(), body.model)
        service = service_of(scope.bundle)
        if request.headers.get("x-request-id") and hasattr(body, "request_id"):
            body.request_id = request.headers["x-request-id"][:256]  # vLLM's: the header names the completion
        # prepare downloads images, lists MCP tools, opens upstreams: inside the scope, as the generation
        job = await scope.run(_prepared(service, body, scope))
        if job is None:
            return Response(status_code=CLIENT_CLOSED)
        request.state.job = job  # for the access log
        if server_context(request).settings.log_requests:
            log.info("request %s prompt: %r", job.id, job.runs[0].prompt.last_message_text)
        return await _answer(request, service, body, job, scope, responses_api, keep_alive)


def allowed_priority(request: Request, priority: int) -> int:
    """The request's `priority` (vLLM's: lower is admitted first); with --restrict-priority, a key not allowed to
    set one (its key-file entry has no `priority: true`; admin keys may) gets a 400 for any other than 0."""
    if priority and server_context(request).settings.restrict_priority:
        caller = request.scope.get("state", {}).get("caller", ANONYMOUS)
        if not (caller.admin or caller.may_prioritize):
            raise InvalidRequest("priority: this key may not set a priority (the server runs with "
                                 "--restrict-priority)", param="priority", code="priority_not_allowed")
    return priority


async def _prepared(service: FrontEnd[B, J], body: B, scope: RequestScope) -> J:
    job = await service.prepare(body)
    scope.hold(job.close)  # before anything else can happen: a cancel that comes now still closes it
    return job


async def _answer(request: Request, service: FrontEnd[B, J], body: B, job: J, scope: RequestScope,
                  responses_api: bool, keep_alive: KeepAlive) -> Response:
    """The job run as the body asks: in the background, streamed, or folded into one answer."""
    settings = server_context(request).settings
    if getattr(body, "background", False) and isinstance(service, BackgroundFrontEnd):
        response = await service.start_background(job, scope.hand_off())
        if body.stream:
            return EventStreamResponse(service.follow(response["id"], None), responses_api=True,
                                       keep_alive=keep_alive)
        return json_response(response)
    if body.stream and isinstance(service, StreamingFrontEnd):
        stream = service.stream(job, scope.deadline)
        return EventStreamResponse(_logged(stream) if settings.log_outputs else stream, responses_api,
                                   on_close=scope.hand_off().close, keep_alive=keep_alive)
    result = await scope.run(service.complete(job, scope.deadline))
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    if settings.log_outputs:
        log.info("request %s output: %r", job.id, result.get("choices", result.get("output")))
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
