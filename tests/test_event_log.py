"""Stream events written in batches (EventLog, ResponseStore.append_events), on both store backends:
the stored log is always a gapless prefix of the stream, and a crash or an expired lease loses at
most the batch not yet written, with the response then failed right after its last stored event."""

from __future__ import annotations

import asyncio

import pytest

from rostra.api.responses.event_log import EventLog
from rostra.store import StoreError
from rostra.store.base import INTERRUPTED_ERROR, LEASE_EXPIRED_ERROR
from test_store import backend, response, run_with_store  # noqa: F401 (backend: the fixture)

WAIT_FOREVER = 3600.0  # an interval no test reaches: only flush() writes


def delta(n: int) -> dict:
    return {"type": "response.output_text.delta", "sequence_number": n, "delta": f"t{n}"}


def numbers(events: list[dict]) -> list[int]:
    return [event["sequence_number"] for event in events]


def counting_writes(store) -> list[list[int]]:
    """Record the sequence numbers of every batch the store is asked to write."""
    batches: list[list[int]] = []
    write = store.append_events

    async def recorded(response_id, events):
        batches.append(numbers(events))
        await write(response_id, events)

    store.append_events = recorded
    return batches


def test_a_batch_is_stored_whole_or_not_at_all(backend):
    async def body(store):
        await store.create(response("resp_b", "in_progress"), [])
        await store.append_events("resp_b", [delta(n) for n in range(5)])
        await store.append_events("resp_b", [])
        with pytest.raises(StoreError):  # 3 is taken: 5 and 6 must not be stored without it
            await store.append_events("resp_b", [delta(5), delta(6), delta(3)])
        with pytest.raises(StoreError):
            await store.append_events("resp_unknown", [delta(0), delta(1)])
        assert numbers(await store.events("resp_b")) == [0, 1, 2, 3, 4]
        assert [e["delta"] for e in await store.events("resp_b", starting_after=2)] == ["t3", "t4"]
    run_with_store(backend, body)


def test_events_queued_together_are_written_in_one_batch_and_flush_writes_the_rest(backend):
    async def body(store):
        await store.create(response("resp_q", "in_progress"), [])
        batches = counting_writes(store)
        log = EventLog(store, "resp_q", interval=WAIT_FOREVER)
        for n in range(10):
            log.append(delta(n))
        await asyncio.sleep(0)  # the writer starts, and waits for its interval
        assert await store.events("resp_q") == []
        await log.flush()
        assert numbers(await store.events("resp_q")) == list(range(10))
        log.append(delta(10))  # after a flush: queued again until the next
        await log.flush()
        assert batches == [list(range(10)), [10]]
        assert numbers(await store.events("resp_q", starting_after=8)) == [9, 10]
    run_with_store(backend, body)


def test_batches_are_written_as_the_interval_passes(backend):
    async def body(store):
        await store.create(response("resp_i", "in_progress"), [])
        log = EventLog(store, "resp_i", interval=0.01)
        for n in range(3):
            log.append(delta(n))
        for _ in range(500):  # written without a flush: by the writer, after its interval
            if len(await store.events("resp_i")) == 3:
                break
            await asyncio.sleep(0.01)
        assert numbers(await store.events("resp_i")) == [0, 1, 2]
        await log.flush()
    run_with_store(backend, body)


def test_a_crash_mid_batch_loses_only_the_unwritten_events_and_restart_fails_the_response(backend):
    async def crashed(store):
        await store.create(response("resp_c", "in_progress"), [], owner="replica-a", lease_seconds=60)
        log = EventLog(store, "resp_c", interval=WAIT_FOREVER)
        for n in range(3):
            log.append(delta(n))
        await log.flush()
        for n in range(3, 6):  # queued, never written: the process dies before the interval ends
            log.append(delta(n))
        await asyncio.sleep(0)

    async def restarted(store):
        assert await store.mark_interrupted() == 1
        stored = await store.get("resp_c")
        assert stored["status"] == "failed" and stored["error"] == INTERRUPTED_ERROR
        events = await store.events("resp_c")
        assert numbers(events) == [0, 1, 2, 3]  # what was written, then the failure right after it
        assert events[-1]["type"] == "response.failed" and events[-1]["response"] == stored

    run_with_store(backend, crashed)
    run_with_store(backend, restarted)


def test_a_runner_whose_lease_expired_cannot_write_past_the_failure_another_replica_stored(backend):
    async def body(store):
        await store.create(response("resp_l", "in_progress"), [], owner="replica-slow", lease_seconds=0.2)
        log = EventLog(store, "resp_l", interval=WAIT_FOREVER)
        log.append(delta(0))
        await log.flush()
        for n in range(1, 4):
            log.append(delta(n))
        await asyncio.sleep(0.3)
        other = backend.new()  # another replica sweeps while the slow one still holds events 1-3
        await other.open()
        try:
            assert await other.fail_expired_leases() == ["resp_l"]
        finally:
            await other.close()
        with pytest.raises(StoreError):  # its batch collides with the failure event: none of it is stored
            await log.flush()
        with pytest.raises(StoreError):  # and nothing after it either
            log.append(delta(4))
        events = await store.events("resp_l")
        assert numbers(events) == [0, 1] and events[-1]["type"] == "response.failed"
        assert events[-1]["response"]["error"] == LEASE_EXPIRED_ERROR
    run_with_store(backend, body)
