"""The runs of stored responses on this server: their leases, background tasks, followers, cancel and delete.

Several replicas may share one store (PostgreSQL; SQLite between processes on one machine). Each stored response that runs here (a background run, or a
stored foreground stream) is leased to this replica (`owner`) and the lease is renewed every `tick` seconds; the
same tick reads the cancel requests other replicas recorded, and fails the responses of replicas whose leases
expired. A replica that does not run a response follows it through the store (`watch`), not memory.

The registry knows nothing of how a response is generated: it is handed the response object, its stream of events
and how to fail it, and owns what happens around them (the store rows, the event log, the task, the lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Callable

from rostra.api.responses.event_log import DEFAULT_INTERVAL, EventLog
from rostra.api.responses.recovery import settle_from_events
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.wire import Deleted
from rostra.errors import APIError, InvalidRequest, NotFound, ServerError, ServiceUnavailable, TooManyRequests
from rostra.store.base import RUNNING_STATUSES, ResponseStore
from rostra.store.tenancy import EVERYONE, Tenant

log = logging.getLogger("rostra.responses")

# The events that end a response's stream (a cancelled one ends with its status, not an event).
TERMINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete"}
FOLLOW_WAIT = 1.0  # seconds a follower waits for a notification before looking at the status
# Background responses queued or running at once on one server, unless --max-background-responses says otherwise:
# each holds its prompt, events and a task; past this a client is told to come back (429), not queued without end.
DEFAULT_MAX_BACKGROUND = 256
SHUTDOWN_ERROR = "the server shut down before this response finished"

Events = AsyncGenerator[dict[str, Any], None]
Fail = Callable[[APIError], list[dict[str, Any]]]  # the events that end a response with this error


class RunLost(Exception):
    """The store no longer has this replica as the runner of a response (deleted, or failed by another replica
    after this one's lease expired)."""


def replica_id() -> str:
    """This process's name as a lease owner: readable in the database, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def as_api_error(exc: Exception) -> APIError:
    return exc if isinstance(exc, APIError) else ServerError(f"{type(exc).__name__}: {exc}")


async def ended_on_error(events: Events, fail: Fail) -> Events:
    """An unstored stream: an error past the engine's (which are events already) ends it as failed."""
    try:
        async with aclosing(events):
            async for event in events:
                yield event
    except Exception as exc:
        log.exception("response failed")
        for event in fail(as_api_error(exc)):
            yield event


@dataclass
class LiveRun:
    """A background response while it runs: its events so far, for followers."""

    task: asyncio.Task[None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    finishing: bool = False  # in its final store update: no longer to be cancelled
    stopped_by: APIError | None = None  # set when the server stops it (shutdown): it fails, it is not cancelled

    def publish(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = asyncio.Event()

    def end(self) -> None:
        self.done = True
        self.changed.set()


class RunRegistry:
    def __init__(self, store: ResponseStore, *, lease_seconds: float = 10.0,
                 event_interval: float = DEFAULT_INTERVAL, shutdown_grace: float = 10.0,
                 max_background: int | None = DEFAULT_MAX_BACKGROUND):
        self.store = store
        self.shutdown_grace = shutdown_grace  # seconds background runs get to finish when the server stops
        self.max_background = max_background  # background runs at once on this server (None: no bound)
        self.live: dict[str, LiveRun] = {}  # background responses running here
        self.streaming: set[str] = set()  # stored foreground streams running here (leased too)
        self.owner = replica_id()
        self.lease_seconds = lease_seconds
        self.event_interval = event_interval  # seconds between batched writes of stream events
        self.tick = min(1.0, lease_seconds / 4)  # several renewals fit in one lease
        self._keeper: asyncio.Task[None] | None = None

    # -- leases ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """After the store is open: recover what a previous run left, then keep leases."""
        alone = await self.store.claim()
        try:
            if alone:  # no other live process uses the store: whatever was running stopped with its process
                failed = await self.store.mark_interrupted(settle_from_events)
            else:  # other processes (replicas) may be running theirs: only expired leases are dead
                failed = len(await self.store.fail_expired_leases(settle_from_events))
        finally:
            self.store.admit_others()
        if failed:
            log.warning("%d stored response(s) were running on a server that stopped: marked failed", failed)
        self._keeper = asyncio.create_task(self._keep_leases())

    async def stop(self) -> None:
        """At shutdown, before the store closes: running background responses get the grace period to finish;
        those still running then are stopped and stored as failed, saying why (never a silent `cancelled`, which
        is what a user's cancel reads as). The lease keeper runs until they are stored."""
        await self.stop_running(self.shutdown_grace)
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)

    async def _keep_leases(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self._renew_and_sweep()
            except Exception:  # a database hiccup must not end lease keeping for good
                log.exception("renewing leases failed; trying again in %.1f s", self.tick)

    async def _renew_and_sweep(self) -> None:
        running = [*self.live, *self.streaming]
        held = await self.store.renew_leases(self.owner, running, self.lease_seconds)
        for response_id in running:
            live = self.live.get(response_id)
            if live is None or live.task is None or live.finishing:
                continue
            if response_id not in held:
                log.warning("response %s is no longer this server's to run (deleted, or failed after its "
                            "lease expired): stopping it", response_id)
            if response_id not in held or held[response_id]:  # lost, or a cancel was asked elsewhere
                live.task.cancel()
        failed = await self.store.fail_expired_leases(settle_from_events)
        if failed:
            log.warning("marked failed, their server's lease expired: %s", ", ".join(failed))

    # -- running ---------------------------------------------------------------------------------
    async def stream(self, response: ResponseObject, items: list[dict[str, Any]], events: Events,
                     fail: Fail, tenant: str | None = None) -> Events:
        """A stored foreground stream: leased while it runs, every event stored as it goes (for replay).
        `tenant`: the key fingerprint it belongs to."""
        await self.store.create(response.wire(), items, owner=self.owner, lease_seconds=self.lease_seconds,
                                tenant=tenant)
        self.streaming.add(response.id)
        event_log = EventLog(self.store, response.id, self.event_interval)
        try:
            async with aclosing(events):
                async for event in events:
                    event_log.append(event)
                    if event["type"] in TERMINAL_EVENTS:  # the client hears of the end once it is all stored
                        await event_log.flush()
                    yield event
        except Exception as exc:  # the store failed (the engine's failures are events already)
            log.exception("response %s failed", response.id)
            for event in fail(as_api_error(exc)):
                yield event
        finally:
            if response.status == "in_progress":  # the client left mid-stream
                response.status = "cancelled"
            self.streaming.discard(response.id)
            await self._store_final(response, event_log)

    async def launch(self, response: ResponseObject, items: list[dict[str, Any]], events: Events, fail: Fail,
                     on_done: Callable[[], None], tenant: str | None = None) -> ResponseObject:
        """Store the response as queued (belonging to `tenant`) and run it in a task of its own; `on_done` runs
        when the run has ended, however it ends."""
        self.check_room()
        response.status = "queued"
        queued = response.model_copy(deep=True)  # what the client is told: the run changes `response` from now on
        await self.store.create(queued.wire(), items, owner=self.owner, lease_seconds=self.lease_seconds,
                                tenant=tenant)
        live = self.live[response.id] = LiveRun()
        live.task = asyncio.create_task(self._run(response, events, fail, live))
        live.task.add_done_callback(lambda _: on_done())  # runs even for a task cancelled before it started
        return queued

    async def _run(self, response: ResponseObject, events: Events, fail: Fail, live: LiveRun) -> None:
        event_log = EventLog(self.store, response.id, self.event_interval)
        try:
            async with aclosing(events):
                async for event in events:
                    event_log.append(event)
                    if event["type"] == "response.in_progress":  # what a client polling any replica sees
                        if not await self.store.progress(response.wire(), self.owner):
                            raise RunLost(response.id)
                    elif event["type"] in TERMINAL_EVENTS:  # followers here hear of the end once it is stored
                        await event_log.flush()
                    live.publish(event)
        except asyncio.CancelledError:
            if live.stopped_by is None:  # a user's cancel (here, or asked on another replica)
                response.status = "cancelled"
            else:
                log.warning("background response %s stopped at shutdown: stored as failed", response.id)
                for event in fail(live.stopped_by):
                    with contextlib.suppress(Exception):  # a log that failed already: the store keeps what it has
                        event_log.append(event)
                    live.publish(event)
        except RunLost:  # nothing of it is this replica's to write any more
            log.warning("response %s is no longer this server's to run (deleted, or failed after its lease "
                        "expired): stopped", response.id)
        except Exception as exc:  # a store error: the run fails, and says so to its followers
            log.exception("background response %s failed", response.id)
            for event in fail(as_api_error(exc)):
                live.publish(event)
        finally:
            live.finishing = True
            try:
                await asyncio.shield(self._store_final(response, event_log))
            finally:  # followers here end even if this task is cancelled once more meanwhile
                live.end()
                self.live.pop(response.id, None)

    async def _store_final(self, response: ResponseObject, events: EventLog) -> None:
        """The end of a run this replica owns: its events still queued, then its final state (a follower
        that sees the response ended finds every event stored). Unless the response was deleted meanwhile,
        or failed by another replica (this one's lease expired): then there is nothing left to write."""
        try:
            await events.flush()
        except Exception:  # already reported by the stream, which failed for it
            pass
        try:
            if not await self.store.finish(response.wire(), self.owner):
                log.warning("response %s was deleted, or failed by another replica, before it ended here",
                            response.id)
        except Exception:  # nothing more can be done: its lease expires and a sweep marks it failed
            log.exception("could not store the final state of response %s", response.id)

    # -- read, follow, cancel, delete ------------------------------------------------------------
    async def retrieve(self, response_id: str, tenant: Tenant = EVERYONE) -> ResponseObject:
        """The stored response, or a 404 (also when it is another tenant's: the same answer, so an id tells
        nothing about whether it exists)."""
        response = await self.store.get(response_id, tenant)
        if response is None:
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return ResponseObject.stored(response)

    async def follow(self, response_id: str, starting_after: int | None, tenant: Tenant = EVERYONE) -> Events:
        """Stored events after `starting_after`, then live ones until the response ends."""
        await self.retrieve(response_id, tenant)
        live = self.live.get(response_id)  # taken before the store is read: no event falls between the two
        if live is None:  # finished, or running on another replica: the store has it all
            async for event in self._follow_store(response_id, starting_after):
                yield event
            return
        last = -1 if starting_after is None else starting_after
        for event in await self.store.events(response_id, last):
            last = event["sequence_number"]
            yield event
        while live is not None:
            waiting, done = live.changed, live.done
            for event in list(live.events):  # drained once more after the end: the last events too
                if event["sequence_number"] > last:
                    last = event["sequence_number"]
                    yield event
            if done:
                return
            await waiting.wait()

    async def _follow_store(self, response_id: str, starting_after: int | None) -> Events:
        """The logged events after `starting_after`, read by sequence number (so never repeated
        nor reordered) each time the store says there may be more, until the response ends."""
        last = -1 if starting_after is None else starting_after
        with self.store.watch(response_id) as watch:  # opened before the first read: no wake-up lost
            while True:
                events = await self.store.events(response_id, last)
                for event in events:
                    last = event["sequence_number"]
                    yield event
                if events and events[-1]["type"] in TERMINAL_EVENTS:
                    return
                if not events and not await self._running(response_id):
                    for event in await self.store.events(response_id, last):  # logged before it ended
                        last = event["sequence_number"]
                        yield event
                    return
                await watch.wait(FOLLOW_WAIT)

    async def _running(self, response_id: str) -> bool:
        response = await self.store.get(response_id)
        return response is not None and ResponseObject.stored(response).status in RUNNING_STATUSES

    async def cancel(self, response_id: str, tenant: Tenant = EVERYONE) -> ResponseObject:
        response = await self.retrieve(response_id, tenant)
        live = self.live.get(response_id)
        if live is not None and live.task is not None:
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
            return await self.retrieve(response_id)
        if response.background and await self.store.request_cancel(response_id):
            return await self._until_ended(response_id)  # its replica reads the request within a tick
        raise InvalidRequest(f"Response '{response_id}' is not a running background response "
                             f"(status: {response.status}); it cannot be cancelled.", param="response_id")

    async def _until_ended(self, response_id: str) -> ResponseObject:
        """The response once it has stopped running on whichever replica runs it. If that replica
        died, its lease expires and a sweep fails the response: bounded by about two leases."""
        deadline = asyncio.get_running_loop().time() + 2 * self.lease_seconds + 2 * self.tick
        with self.store.watch(response_id) as watch:
            while await self._running(response_id) and asyncio.get_running_loop().time() < deadline:
                await watch.wait(self.tick)
        return await self.retrieve(response_id)

    async def stop_running(self, grace: float) -> None:
        """Background runs still running after `grace` seconds end as failed (SHUTDOWN_ERROR), and are stored so."""
        tasks = [run.task for run in list(self.live.values()) if run.task]
        if tasks and grace > 0:
            log.info("waiting up to %.0f s for %d background response(s) to finish", grace, len(tasks))
            await asyncio.wait(tasks, timeout=grace)
        for run in list(self.live.values()):
            if run.task is not None and not run.task.done():
                run.stopped_by = ServiceUnavailable(SHUTDOWN_ERROR, code="server_shutdown")
                run.task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def check_room(self) -> None:
        """A 429 when this server already runs as many background responses as it may."""
        if self.max_background is not None and len(self.live) >= self.max_background:
            raise TooManyRequests(f"this server is running its limit of {self.max_background} background responses; "
                                  "try again when some have finished (rostra serve --max-background-responses)")

    async def delete(self, response_id: str, tenant: Tenant = EVERYONE) -> Deleted:
        await self.retrieve(response_id, tenant)  # the tenant never changes: checked once, before anything stops
        live = self.live.get(response_id)
        if live and live.task:
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
        if not await self.store.delete(response_id):
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return Deleted(id=response_id, object="response.deleted")
