"""One Responses WebSocket connection (OpenAI's WebSocket mode; the wire is ws_events.py, steering ws_steering.py).

The connection reads its client's events as they come, so that a `response.steer` reaches a running response and
a client that goes away is noticed at once. Each `response.create` runs on its lane (its `stream_id`; none: the
default lane): a lane runs its creates in order, one at a time, and lanes run side by side. Every turn is a
POST /v1/responses turn: the same key limits (each turn counts as one request of its key: http/key_limits.py), the
same gate (an admission slot, a lease on the model, the request's deadline, all given back when the turn ends
however it ends), the same ResponsesService prepare and stream, so the events are the SSE
stream's own objects. A client gone mid-turn cancels its lanes: their streams close, which aborts the engine work
and gives back the slot and the lease (a stored response is stored `cancelled`, as an HTTP stream's is).

The connection keeps the conversations of its recent responses (a connection-local cache), so a `store: false`
response can be continued by `previous_response_id` on this connection; a new connection has none
(`previous_response_not_found` unless the response was stored). A continuation refused or failed evicts the
parent it named when it ran on the same lane (a fork from another lane leaves it to its own lane)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket

from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.service import ResponseJob, ResponsesService, conversation_after
from rostra.api.responses.ws_events import CreateEvent, EventWriter, SocketEvent, client_event, create_event, steer_input
from rostra.api.responses.wire import ResponseUsage
from rostra.api.responses.ws_steering import Refusal, Steering
from rostra.errors import APIError, InvalidRequest, ServerError, TooManyRequests
from rostra.http.context import server_context
from rostra.http.gate import admit
from rostra.http.key_limits import key_turn
from rostra.http.scope import RequestScope
from rostra.serving.validation import check_generative
from rostra.http.sse import json_bytes
from rostra.store.tenancy import Tenant

log = logging.getLogger("rostra.responses")

CACHED_RESPONSES = 64  # conversations a connection keeps for continuation, most recent first
MAX_LANES = 32  # named lanes (stream_id) on one connection, as OpenAI allows; the default lane does not count
MAX_QUEUED = 64  # creates waiting on one lane
STEER_FIELDS = {"type", "previous_response_id", "input"}


@dataclass
class Cached:
    conversation: list[dict[str, Any]]  # what a continuation reads (service.conversation_after)
    lane: str | None  # the lane the response ran on


class ResponsesSocket:
    def __init__(self, websocket: WebSocket, service: ResponsesService, tenant: Tenant):
        self.websocket, self.service, self.tenant = websocket, service, tenant
        self.writer = EventWriter()
        self.steering = Steering(self.writer)
        self.cache: OrderedDict[str, Cached] = OrderedDict()
        self.lanes: dict[str | None, asyncio.Queue[CreateEvent]] = {}
        self.workers: list[asyncio.Task[None]] = []
        self._sending = asyncio.Lock()

    async def serve(self) -> None:
        """Until the client goes (or the server stops): then every lane is cancelled and has given back all."""
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                await self.handle(message.get("text") or message.get("bytes"))
        finally:
            for worker in self.workers:
                worker.cancel()
            await asyncio.gather(*self.workers, return_exceptions=True)

    async def handle(self, raw: str | bytes | None) -> None:
        """One client event; a bad one is answered with an `error` event and the connection stays open."""
        lane = None
        try:
            event = client_event(raw)
            if event["type"] == "response.create":
                lane = event["stream_id"] if isinstance(event.get("stream_id"), str) else None
                self._queue(await create_event(self.websocket, event))
            elif event["type"] == "response.steer":
                await self.steer(event)
            else:
                raise InvalidRequest(f"unknown client event type {event['type']!r}: response.create or "
                                     "response.steer", param="type", code="unknown_event_type")
        except APIError as exc:
            log.warning("WebSocket client event refused: %s", exc.message)
            await self.send(self.writer.error(exc, lane))

    async def send(self, event: dict[str, Any] | SocketEvent) -> None:
        """`event`: one of a response's stream (JSON already, as SSE sends it) or the connection's own."""
        wire = event.wire() if isinstance(event, SocketEvent) else event
        async with self._sending:  # lanes send side by side: one whole message at a time
            await self.websocket.send_text(json_bytes(wire).decode())

    def _queue(self, create: CreateEvent) -> None:
        queue = self.lanes.get(create.stream_id)
        if queue is None:
            if create.stream_id is not None and len(self.lanes) - (None in self.lanes) >= MAX_LANES:
                raise InvalidRequest(f"a connection has at most {MAX_LANES} stream_ids", param="stream_id",
                                     code="websocket_stream_limit_reached")
            queue = self.lanes[create.stream_id] = asyncio.Queue(MAX_QUEUED)
            self.workers.append(asyncio.create_task(self._run_lane(queue)))
        try:
            queue.put_nowait(create)
        except asyncio.QueueFull:
            raise TooManyRequests(f"{MAX_QUEUED} responses wait on this lane already") from None

    async def _run_lane(self, queue: asyncio.Queue[CreateEvent]) -> None:
        while True:
            create: CreateEvent | None = await queue.get()
            while create is not None:  # a turn, then the automatic successor its steering asked for
                lane = create.stream_id
                try:
                    create = await self._turn(create)
                except Exception as exc:  # a fault here, or the socket failed under a send: the lane serves on
                    log.exception("a WebSocket turn failed")
                    with contextlib.suppress(Exception):
                        await self.send(self.writer.error(ServerError(f"internal error: {type(exc).__name__}"), lane))
                    create = None

    # -- a turn ------------------------------------------------------------------------------------------
    async def _turn(self, create: CreateEvent) -> CreateEvent | None:
        """One response through the gate; its successor, when steering queued input into it."""
        create = self.steering.with_waiting(create)
        caller = self.websocket.scope.get("state", {}).get("caller")
        try:
            # Each turn is a request of its key's limits (rate, concurrency, tokens), as a POST would be.
            async with key_turn(server_context(self.websocket).usage.store, caller, "/v1/responses (WebSocket)"):
                scope = await admit(self.websocket, create.request.model)
                if scope is None:
                    return None
                async with scope:
                    response = await self._respond(create, scope)
        except APIError as exc:
            await self._refused(create, exc)
            return None
        events, successor = self.steering.finished(response)
        for event in events:
            await self.send(event)
        return successor

    async def _respond(self, create: CreateEvent, scope: RequestScope) -> ResponseObject:
        check_generative(scope.bundle.engine.capabilities(), create.request.model)
        known = {response_id: cached.conversation for response_id, cached in self.cache.items()}
        # Inside the request's scope and deadline, as on HTTP (the socket's transport cancels a turn whose
        # client went away).
        job = await scope.deadline.wait_for(self.service.prepare(create.request, self.tenant, known))
        scope.hold(job.close)
        if not create.generate:
            return await self._warm_up(job, create)
        async with aclosing(self.service.stream(job, scope.deadline)) as events:
            async for event in events:
                if event["type"] == "response.created":  # steering may target it from now on
                    self.steering.started(job.id, create)
                await self.send(self._on_wire(event, job, create.stream_id))
        self._settle(job, create)
        return job.builder.response

    def _on_wire(self, event: dict[str, Any], job: ResponseJob, lane: str | None) -> dict[str, Any] | SocketEvent:
        if event["type"] == "error":  # SSE's flat error event, in the WebSocket's shape
            error = job.builder.error or ServerError(str(event.get("message")))
            return self.writer.error(error, lane, event.get("sequence_number"))
        return self.writer.on_lane(event, lane)

    async def _warm_up(self, job: ResponseJob, create: CreateEvent) -> ResponseObject:
        """`generate: false`: the request prepared (validated, its history read) and answered as a completed
        response without output, which a later turn continues with its new input."""
        await job.close()
        builder = job.builder
        events = [builder.lifecycle("response.created")]
        builder.response.status = "in_progress"
        events += [builder.lifecycle("response.in_progress"), builder.finish("stop", ResponseUsage.nothing())]
        if job.request.store:
            await self.service.store.create(builder.response.wire(), job.items, tenant=job.tenant.key)
        for event in events:
            await self.send(self.writer.on_lane(event, create.stream_id))
        self._settle(job, create)
        return builder.response

    # -- the connection-local cache ------------------------------------------------------------------------
    def _settle(self, job: ResponseJob, create: CreateEvent) -> None:
        """A response that can be continued is cached; one that failed evicts the parent it continued."""
        if job.builder.response.status in ("completed", "incomplete"):
            self.cache[job.id] = Cached(conversation_after(job), create.stream_id)
            while len(self.cache) > CACHED_RESPONSES:
                self.cache.popitem(last=False)
        else:
            self._evict(create)

    def _evict(self, create: CreateEvent) -> None:
        parent = create.request.previous_response_id
        if parent is not None and parent in self.cache and self.cache[parent].lane == create.stream_id:
            del self.cache[parent]

    async def _refused(self, create: CreateEvent, error: APIError) -> None:
        log.warning("WebSocket response.create refused (%d): %s", error.status_code, error.message)
        self._evict(create)
        await self.send(self.writer.error(error, create.stream_id))
        for steer in create.steers:  # an automatic successor (or a continuation) that never started
            await self.send(self.steering.failed(steer, "successor_creation_failed", error.message,
                                                 create.stream_id))

    # -- steering ------------------------------------------------------------------------------------------
    async def steer(self, event: dict[str, Any]) -> None:
        target, given = event.get("previous_response_id"), event.get("input")
        if not isinstance(target, str) or not target or set(event) - STEER_FIELDS:
            await self.send(self.writer.steer_failed(
                "invalid_input", "response.steer takes type, previous_response_id (a response id) and input only",
                str(target or ""), given))
            return
        try:
            outcome = self.steering.submit(target, steer_input(given))
        except InvalidRequest as exc:
            outcome = Refusal("invalid_input", exc.message)
        running = self.steering.running.get(target)
        lane = running.create.stream_id if running else None
        if isinstance(outcome, Refusal):
            await self.send(self.writer.steer_failed(outcome.code, outcome.message, target, given, None, lane))
        else:
            await self.send(self.writer.steer_accepted(outcome, lane))
