"""Priority orders admission (issue 48): a request's `priority` (vLLM's: lower first) picks its place in line on
every engine, arrival order among equals, batch lines behind every online request; a waiter cancelled as its slot
is granted passes the slot on; with --restrict-priority only the keys allowed to may set one."""

from __future__ import annotations

import asyncio

import openai
import pytest

from harness import InProcessServer
from rostra.api_keys import ApiKey
from rostra.http.admission import Admission


async def test_the_line_is_ordered_by_priority_then_arrival():
    admission = Admission(max_running=1, max_waiting=10)
    await admission.acquire()
    order: list[str] = []

    async def wait(name: str, priority: int, online: bool = True) -> None:
        await admission.acquire(online=online, priority=priority)
        order.append(name)
        admission.release()

    waiters = [asyncio.create_task(wait(name, priority, online)) for name, priority, online in
               [("batch", 0, False), ("low", 5, True), ("urgent", -1, True), ("first-1", 1, True),
                ("second-1", 1, True)]]
    await asyncio.sleep(0)
    assert admission.waiting == 4 and not admission.has_free_slot()
    admission.release()
    await asyncio.gather(*waiters)
    assert order == ["urgent", "first-1", "second-1", "low", "batch"]
    assert (admission.running, admission.waiting, admission.has_free_slot()) == (0, 0, True)


@pytest.mark.parametrize("cancel_first", [True, False])
async def test_a_waiter_cancelled_as_it_is_granted_passes_the_slot_on(cancel_first):
    """Both orders of the grant and the cancel in one loop turn: the slot ends with the next in line, never lost."""
    admission = Admission(max_running=1, max_waiting=10)
    await admission.acquire()
    first = asyncio.create_task(admission.acquire(priority=0))
    second = asyncio.create_task(admission.acquire(priority=1))
    await asyncio.sleep(0)
    if cancel_first:
        first.cancel()
        admission.release()
    else:
        admission.release()
        first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)
    assert (admission.running, admission.waiting) == (1, 0)
    admission.release()
    assert admission.has_free_slot()


def test_the_queue_bound_still_refuses():
    async def run():
        admission = Admission(max_running=1, max_waiting=1)
        await admission.acquire()
        waiter = asyncio.create_task(admission.acquire(priority=-5))
        await asyncio.sleep(0)
        with pytest.raises(Exception, match="at capacity"):
            await admission.acquire(priority=-10)
        admission.release()
        await waiter
    asyncio.run(run())


SCRIPT = [{"match": "", "output": "done"}]


async def test_a_server_admits_the_lower_priority_first(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1) as server:
        client = openai.AsyncOpenAI(api_key="none", base_url="http://rostra/v1", http_client=server.client)
        admission = server.app.state.rostra.admission
        finished: list[int] = []

        async def ask(text: str, priority: int) -> None:
            await client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": text}],
                                                 extra_body={"priority": priority})
            finished.append(priority)

        await admission.acquire()  # the one slot taken, as a long request would hold it
        queued = [asyncio.create_task(ask(f"q{priority}", priority)) for priority in (9, 4, -3)]
        while admission.waiting < 3:
            await asyncio.sleep(0.01)
        admission.release()
        await asyncio.gather(*queued)
        assert finished == [-3, 4, 9]


async def test_restrict_priority_lets_only_allowed_keys_set_one(tmp_path):
    keys = {"api_keys": ["sk-ops", "sk-user"], "admin_keys": ["sk-admin"], "restrict_priority": True,
            "api_key_details": [ApiKey("sk-ops", "ops", priority=True), ApiKey("sk-user", "user")]}
    async with InProcessServer(tmp_path, SCRIPT, **keys) as server:
        def client(key: str) -> openai.AsyncOpenAI:
            return openai.AsyncOpenAI(api_key=key, base_url="http://rostra/v1", http_client=server.client)

        async def ask(key: str, priority: int):
            return await client(key).chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "hi"}], extra_body={"priority": priority})

        assert (await ask("sk-ops", -1)).choices[0].message.content == "done"
        assert (await ask("sk-admin", 2)).choices[0].message.content == "done"
        assert (await ask("sk-user", 0)).choices[0].message.content == "done"
        with pytest.raises(openai.BadRequestError) as refused:
            await ask("sk-user", 1)
        assert refused.value.body["param"] == "priority" and "--restrict-priority" in refused.value.message
