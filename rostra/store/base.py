"""The storage interface for the Responses API (`store: true`, `GET /v1/responses/{id}`, ...)
and the Conversations API.

A store keeps three things per response: the response object itself (replaced whole on every
update), its input items in the order they were given, and the log of streaming events, so a
client can re-attach to a stream with `starting_after`. Per conversation it keeps the
conversation object and its items in order. All values are plain JSON dicts/lists; the store
never interprets them beyond the few fields named below.

Several rostra processes (replicas) may share one store. A running response then belongs to the
replica that runs it: that replica holds a lease on it (`owner`, renewed every few seconds). Any
replica may ask for it to be cancelled (a flag the owner reads when it renews), and any replica
marks it failed once the lease has expired, i.e. when the owner died without finishing it.

Responses and conversations belong to a tenant (the API key that made them, rostra/store/tenancy.py): the reads
that take a `tenant` find only the rows it may see, as if the others did not exist.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Callable

from rostra.errors import InsufficientStorage, ServiceUnavailable
from rostra.store.tenancy import EVERYONE, Tenant

# The error object written into responses that were running when the process died.
INTERRUPTED_ERROR = {
    "code": "server_error",
    "message": "the server restarted while this response was running",
}
# The error object written into responses whose runner (another replica) stopped renewing its lease.
LEASE_EXPIRED_ERROR = {
    "code": "server_error",
    "message": "the server running this response stopped (its lease expired)",
}
# Statuses that mean "still running"; after a restart nothing can be running any more.
RUNNING_STATUSES = ("queued", "in_progress")


def failed_copy(response: dict, error: dict) -> dict:
    """The response object as stored once its runner is gone: failed, with `error`."""
    return {**response, "status": "failed", "error": dict(error)}


def failed_event(response: dict, sequence_number: int) -> dict:
    """The terminal event a store appends when it fails a response whose runner is gone, so a
    follower's stream ends the way a failure in the runner would have ended it."""
    return {"type": "response.failed", "sequence_number": sequence_number, "response": response}


# How a store ends a response whose runner is gone: (stored response, its logged events, the error) ->
# (the failed response, the events to log after the last one, numbered by the store in order).
Settle = Callable[[dict, list[dict], dict], tuple[dict, list[dict]]]


def settle_failed(response: dict, events: list[dict], error: dict) -> tuple[dict, list[dict]]:
    """The plain settlement: failed with `error`, one `response.failed` event. The API that made the events
    can do better (rostra/api/responses/recovery.py closes the item that was being written)."""
    failed = failed_copy(response, error)
    return failed, [failed_event(failed, 0)]


def numbered(events: list[dict], first: int) -> list[dict]:
    return [{**event, "sequence_number": first + offset} for offset, event in enumerate(events)]


class Watch:
    """Wakes a follower when a response may have new events or a new status. This one cannot be
    notified: `wait` sleeps a little and the follower looks again."""

    def __init__(self, poll_interval: float):
        self.poll_interval = poll_interval

    async def wait(self, timeout: float) -> bool:
        """Wait for a change, at most `timeout` s. True if notified of one, False if it only waited."""
        await asyncio.sleep(min(timeout, self.poll_interval))
        return False

    def close(self) -> None:
        """Stop watching (a notifying store forgets the waiter)."""

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class StoreError(Exception):
    """A store operation failed: unknown id where one is required, duplicate id, bad database."""


class StoreFull(StoreError, InsufficientStorage):
    """The store's disk (or its file-size limit) is full: a 507 in the API's error envelope, not a generic 500."""

    def __init__(self, message: str = "the response store is full (no space left for it on the server's disk)"):
        InsufficientStorage.__init__(self, message, code="storage_full")


class StoreWriteFailed(StoreError, ServiceUnavailable):
    """The store could not write (an I/O error: a disk that is full, or failing): a 503 in the envelope."""

    def __init__(self, message: str = "the response store could not be written (disk full or failing)"):
        ServiceUnavailable.__init__(self, message, code="storage_unavailable")


class ResponseStore(ABC):
    """Durable storage of response objects, their input items and their streaming events."""

    # How long a follower sleeps between looks for new events when the store cannot notify it.
    poll_interval: float = 0.1

    @abstractmethod
    async def open(self) -> None:
        """Open (and create or migrate) the underlying storage. Call once before anything else."""

    async def claim(self) -> bool:
        """For a server, before it recovers what earlier runs left: join the processes that use this store.
        True when no other live process uses it, so whatever is still running there was left by processes that
        are gone; False where others may (always, for a store that replicas on other machines share). Until
        `admit_others()` no other process joins. Held until `release()` (or `close()`, or the process's end)."""
        return False

    def admit_others(self) -> None:
        """Recovery is done: other processes may join."""

    def release(self) -> None:
        """Give up what `claim()` took."""

    @abstractmethod
    async def close(self) -> None:
        """Flush and release the storage. The store cannot be used afterwards."""

    @abstractmethod
    async def create(self, response: dict, input_items: list[dict], *, owner: str | None = None,
                     lease_seconds: float | None = None, tenant: str | None = None) -> None:
        """Store a new response (`id`, `created_at`, `status` are read from it) and its input
        items in order (each has an `id`). With `owner`, that replica holds a lease on it for
        `lease_seconds`. `tenant`: the key fingerprint it belongs to (None: shared).
        Raises StoreError if the id already exists."""

    @abstractmethod
    async def update(self, response: dict) -> None:
        """Replace the stored response object with the same `id`. Raises StoreError if unknown."""

    @abstractmethod
    async def progress(self, response: dict, owner: str) -> bool:
        """The owner's update of a response it runs (queued -> in_progress): replace the stored object, but
        only while `owner` still holds the lease and it is still running. False (nothing written) otherwise:
        a run whose lease expired must not bring a response another replica failed back to in_progress."""

    @abstractmethod
    async def finish(self, response: dict, owner: str) -> bool:
        """The owner's last update of a response it ran: replace the stored object and drop the
        lease, but only while `owner` still holds it and it is still running. False (nothing
        written) if the response was deleted, or failed by another replica after the lease expired."""

    @abstractmethod
    async def get(self, response_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        """The stored response object, or None (also when `tenant` may not see it)."""

    @abstractmethod
    async def find_item(self, item_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        """Any stored item by its id (what an `item_reference` names): an output item of a response (kept from
        `create` and `finish`), else an input item, the first stored with that id, of the responses `tenant`
        may see; None if there is none."""

    @abstractmethod
    async def delete(self, response_id: str) -> bool:
        """Delete a response with its input items and events; False if it was unknown."""

    @abstractmethod
    async def delete_finished_before(self, created_before: int) -> int:
        """Store maintenance: delete every finished response created before this Unix time
        (running ones are kept); returns how many."""

    @abstractmethod
    async def input_items(self, response_id: str, *, after: str | None = None, limit: int = 20,
                          order: str = "desc") -> tuple[list[dict], bool]:
        """One page of a response's input items, as OpenAI's list endpoint pages them.

        `order` "asc" is the order they were given in, "desc" the reverse. The page starts after
        the item whose id is `after` (in that order) and holds at most `limit` items. Returns
        (items, has_more). Raises StoreError for an unknown response or an unknown `after`.
        """

    async def append_event(self, response_id: str, event: dict) -> None:
        """Append one streaming event (it has a `sequence_number`) to the response's event log.
        Raises StoreError for an unknown response or a repeated sequence number."""
        await self.append_events(response_id, [event])

    @abstractmethod
    async def append_events(self, response_id: str, events: list[dict]) -> None:
        """Append streaming events, in order, to the response's event log in one transaction: a
        reader sees all of them or none, and never one without those before it. Raises StoreError
        (and appends none) for an unknown response or a repeated sequence number."""

    @abstractmethod
    async def events(self, response_id: str, starting_after: int | None = None) -> list[dict]:
        """The logged events with sequence_number > starting_after (all if None), in order."""

    def watch(self, response_id: str) -> "Watch":
        """A watch on one response's events, for a follower on any replica: open it before
        reading the events, then `wait()` between reads. This default polls."""
        return Watch(self.poll_interval)

    # -- leases: several replicas on one store ----------------------------------------------------

    @abstractmethod
    async def renew_leases(self, owner: str, response_ids: list[str], lease_seconds: float) -> dict[str, bool]:
        """Extend `owner`'s leases on these running responses. Returns {id: cancel requested} for
        those it still holds; an id left out is no longer the owner's to run (finished, deleted,
        or failed by another replica) and its runner should stop."""

    @abstractmethod
    async def request_cancel(self, response_id: str) -> bool:
        """Flag a running response for cancellation by its owner; False if it is not running."""

    @abstractmethod
    async def fail_expired_leases(self, settle: Settle = settle_failed) -> list[str]:
        """Mark every running response whose lease has expired as failed (LEASE_EXPIRED_ERROR),
        and append a `response.failed` event after its last one (as `settle` makes them). Returns their ids."""

    @abstractmethod
    async def mark_interrupted(self, settle: Settle = settle_failed) -> int:
        """At start-up: mark every "queued"/"in_progress" response as "failed" with
        INTERRUPTED_ERROR as its `error` (as `settle` makes it). Returns how many were marked."""

    # -- conversations ------------------------------------------------------------------------

    @abstractmethod
    async def create_conversation(self, conversation: dict, items: list[dict], tenant: str | None = None) -> None:
        """Store a new conversation (`id`, `created_at` read from it) and its first items in order;
        `tenant`: the key fingerprint it belongs to (None: shared)."""

    @abstractmethod
    async def get_conversation(self, conversation_id: str, tenant: Tenant = EVERYONE) -> dict | None:
        """The stored conversation object, or None (also when `tenant` may not see it)."""

    @abstractmethod
    async def list_conversations(self, *, after: str | None = None, limit: int = 20, order: str = "desc",
                                 tenant: Tenant = EVERYONE) -> tuple[list[dict], bool]:
        """One page of the conversation objects `tenant` may see, ordered by (`created_at`, `id`): "desc" newest
        first. The page starts after the conversation whose id is `after`. Returns (conversations, has_more).
        Raises StoreError for an unknown `after` (or one `tenant` may not see)."""

    @abstractmethod
    async def update_conversation(self, conversation: dict) -> None:
        """Replace the stored conversation object with the same `id`. Raises StoreError if unknown."""

    @abstractmethod
    async def delete_conversation(self, conversation_id: str) -> bool:
        """Delete a conversation with its items; False if it was unknown."""

    @abstractmethod
    async def add_conversation_items(self, conversation_id: str, items: list[dict]) -> None:
        """Append items (each has an `id`) after the conversation's last one. StoreError if unknown."""

    @abstractmethod
    async def conversation_items(self, conversation_id: str, *, after: str | None = None, limit: int = 20,
                                 order: str = "desc") -> tuple[list[dict], bool]:
        """One page of a conversation's items, paged as `input_items` pages a response's."""

    @abstractmethod
    async def get_conversation_item(self, conversation_id: str, item_id: str) -> dict | None:
        """One item of a conversation, or None."""

    @abstractmethod
    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool:
        """Remove one item from a conversation; False if there was no such item."""
