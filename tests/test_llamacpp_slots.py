"""The llama.cpp engine's slot choice (rostra/engines/llamacpp_slots.py), without a model: which slot a prompt
goes to, which waiting request a freed slot goes to, and that none waits forever."""

from __future__ import annotations

import asyncio
import random

import pytest

from rostra.engines.llamacpp_slots import SlotRouter, common_prefix_length


def _slow_common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.parametrize("seed", range(200))
def test_common_prefix_length_matches_a_plain_loop(seed):
    rng = random.Random(seed)
    a = [rng.randrange(5) for _ in range(rng.randrange(0, 300))]
    b = a[:rng.randrange(0, len(a) + 1)] + [rng.randrange(5) for _ in range(rng.randrange(0, 50))]
    assert common_prefix_length(a, b) == _slow_common_prefix(a, b) == common_prefix_length(b, a)


SYSTEM = list(range(1000, 1100))  # a shared system prompt: 100 tokens


def session(number: int, length: int = 300) -> list[int]:
    return SYSTEM + [number * 10_000 + i for i in range(length)]


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_session_returns_to_the_slot_that_holds_it():
    async def scenario():
        # Without the host-memory cache, a state pushed out would be lost: sessions that share only the system
        # prompt each take a slot of their own (with it, see below, they reuse the system prompt instead).
        router = SlotRouter(3, host_cache=False)
        for number in range(3):  # one after the other: each into a slot of its own (no state destroyed)
            async with router.claim(session(number)) as slot:
                slot.tokens += [7, 7]
        async with router.claim(session(1) + [7, 7, 42]) as slot:
            return slot.index, [s.index for s in router.slots if s.tokens[:len(session(0))] == session(0)]

    index, holding_zero = run(scenario())
    assert index == 1 and holding_zero == [0]


def test_without_a_prefix_to_reuse_the_least_recently_used_slot_is_taken():
    async def scenario():
        router = SlotRouter(2)
        for tokens in ([1] * 50, [2] * 50, [1] * 50):  # slot 0, slot 1, slot 0 again (it holds [1] * 50)
            async with router.claim(tokens):
                pass
        async with router.claim([3] * 50) as slot:  # shares nothing: slot 1 was used longest ago
            return slot.index

    assert run(scenario()) == 1


def test_ties_go_to_the_slot_of_the_same_session_key():
    async def scenario():
        router = SlotRouter(2)
        async with router.claim(SYSTEM + [5], key="a"):
            pass
        async with router.claim(SYSTEM + [6], key="b"):
            pass
        async with router.claim(SYSTEM + [7], key="a") as slot:
            return slot.index

    assert run(scenario()) == 0


def test_a_state_llama_cpp_would_drop_is_not_pushed_out_for_a_short_shared_prefix():
    """Without the host-memory cache a slot's state pushed out is lost: a prompt that shares a system prompt of
    200 tokens with a session of 500 goes to the empty slot instead. With it, llama.cpp saves the session (the
    prompt keeps less than half of it) and the system prompt is reused."""
    system = list(range(200))

    async def scenario(host_cache: bool):
        router = SlotRouter(2, host_cache=host_cache)
        async with router.claim(system + [1] * 300):
            pass
        async with router.claim(system + [2] * 300) as slot:
            return slot.index

    assert run(scenario(False)) == 1
    assert run(scenario(True)) == 0


def test_a_freed_slot_goes_to_the_waiting_request_whose_prefix_it_holds():
    async def scenario():
        router = SlotRouter(1)
        order: list[str] = []
        release = asyncio.Event()

        async def request(name: str, tokens: list[int], hold: bool = False):
            async with router.claim(tokens):
                order.append(name)
                if hold:
                    await release.wait()

        first = asyncio.create_task(request("first", session(0), hold=True))
        await asyncio.sleep(0)
        others = [asyncio.create_task(request("other", session(1))),
                  asyncio.create_task(request("returning", session(0) + [1, 2]))]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, *others)
        return order

    assert run(scenario()) == ["first", "returning", "other"]


def test_no_request_is_passed_over_more_than_once_per_slot():
    """A stream of requests that all match the freed slot better never starves an early one that matches none."""
    async def scenario():
        router = SlotRouter(2)
        order: list[str] = []

        async def request(name: str, tokens: list[int]):
            async with router.claim(tokens):
                order.append(name)
                await asyncio.sleep(0.001)

        tasks = [asyncio.create_task(request("a0", session(0))), asyncio.create_task(request("b0", session(1)))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(request("stranger", [9] * 400)))
        await asyncio.sleep(0)
        for n in range(1, 8):
            tasks.append(asyncio.create_task(request(f"a{n}", session(0) + [n])))
            tasks.append(asyncio.create_task(request(f"b{n}", session(1) + [n])))
        await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    order = run(scenario())
    assert sorted(order) == sorted(["a0", "b0", "stranger"] + [f"{s}{n}" for s in "ab" for n in range(1, 8)])
    assert order.index("stranger") <= 2 + 2  # the two running, then at most one pass per slot


def test_a_request_cancelled_while_waiting_gives_its_turn_away():
    async def scenario():
        router = SlotRouter(1)
        release = asyncio.Event()
        served: list[str] = []

        async def request(name: str, hold: bool = False):
            async with router.claim(session(0)):
                served.append(name)
                if hold:
                    await release.wait()

        first = asyncio.create_task(request("first", hold=True))
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(request("cancelled"))
        last = asyncio.create_task(request("last"))
        await asyncio.sleep(0)
        cancelled.cancel()
        release.set()
        await asyncio.gather(first, last, cancelled, return_exceptions=True)
        return served, [slot.busy for slot in router.slots]

    served, busy = run(scenario())
    assert served == ["first", "last"] and busy == [False]
