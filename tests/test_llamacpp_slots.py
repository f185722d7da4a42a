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


# Every pair of events in one loop turn (issue 33): a waiter cancelled (client gone, request timeout) in the same
# turn another request frees a slot must not be handed the slot; nothing may be lost, whatever the order.

def _settle_all(router: SlotRouter) -> list[bool]:
    return [slot.busy for slot in router.slots]


async def _holders(router: SlotRouter, count: int) -> tuple[list[asyncio.Task], list[asyncio.Event]]:
    """`count` requests that hold a slot each until their event is set."""
    releases = [asyncio.Event() for _ in range(count)]

    async def hold(release: asyncio.Event, number: int):
        async with router.claim(session(number)):
            await release.wait()

    tasks = [asyncio.create_task(hold(release, n)) for n, release in enumerate(releases)]
    await asyncio.sleep(0)
    return tasks, releases


async def _waiter(router: SlotRouter, served: list[str], name: str, number: int = 50):
    async with router.claim(session(number)):
        served.append(name)
        await asyncio.sleep(0)


EVENTS = ("cancel", "release", "timeout")


@pytest.mark.parametrize("slots", [1, 2])
@pytest.mark.parametrize("first,second", [(a, b) for a in EVENTS for b in EVENTS])
def test_two_events_in_one_loop_turn_lose_no_slot(slots, first, second):
    """Every slot busy, two waiters; two events in one turn: a waiter cancelled, a holder releasing, a waiter
    timing out (asyncio.timeout expiring). Afterwards every slot is free, every live waiter was served, and a
    full round of `slots` concurrent requests runs at once."""
    async def scenario():
        router = SlotRouter(slots)
        holders, releases = await _holders(router, slots)
        served: list[str] = []

        async def timed(name: str, deadline: asyncio.Future):
            try:
                async with asyncio.timeout(None) as scope:
                    deadline.add_done_callback(lambda _: scope.reschedule(asyncio.get_running_loop().time()))
                    await _waiter(router, served, name)
            except TimeoutError:
                pass

        loop = asyncio.get_running_loop()
        deadlines = [loop.create_future() for _ in range(2)]
        waiters = [asyncio.create_task(timed(f"w{n}", deadlines[n])) for n in range(2)]
        await asyncio.sleep(0)
        used = {"cancel": 0, "release": 0, "timeout": 0}

        def fire(event: str):
            n = used[event]
            used[event] += 1
            if event == "cancel":
                waiters[n % 2].cancel()
            elif event == "release":
                releases[n % slots].set() if n < slots else releases[0].set()
            else:
                target = deadlines[(n + 1) % 2]
                if not target.done():
                    target.set_result(None)

        fire(first)
        fire(second)
        await asyncio.gather(*waiters, return_exceptions=True)
        for release in releases:
            release.set()
        results = await asyncio.gather(*holders, return_exceptions=True)
        assert not [r for r in results if isinstance(r, BaseException)], results
        assert _settle_all(router) == [False] * slots
        # full capacity: `slots` requests hold a slot each at the same time
        holders, releases = await _holders(router, slots)
        assert [s.busy for s in router.slots] == [True] * slots
        for release in releases:
            release.set()
        await asyncio.gather(*holders)
        return served

    run(asyncio.wait_for(scenario(), 10))  # a lost slot shows as a hang


@pytest.mark.parametrize("seed", range(30))
def test_random_cancellations_and_releases_never_lose_a_slot(seed):
    """A storm in-process: requests that arrive, hold, and are cancelled at random moments (several per loop
    turn); at the end every slot is free and the router has no waiter left."""
    rng = random.Random(seed)

    async def scenario():
        router = SlotRouter(rng.randint(1, 3))
        tasks: list[asyncio.Task] = []

        async def request(number: int, turns: int):
            async with router.claim(session(number % 4)):
                for _ in range(turns):
                    await asyncio.sleep(0)

        for _ in range(200):
            tasks.append(asyncio.create_task(request(rng.randrange(100), rng.randrange(3))))
            for task in rng.sample(tasks, k=min(len(tasks), rng.randrange(3))):
                task.cancel()
            if rng.random() < 0.5:
                await asyncio.sleep(0)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
        assert not errors, errors
        assert [slot.busy for slot in router.slots] == [False] * len(router.slots)
        assert router.waiting == 0

    run(asyncio.wait_for(scenario(), 20))


def test_a_cache_salt_shares_a_prefix_only_with_its_own_salt():
    """vLLM's cache_salt: another tenant's slot is no better than an empty one, and is read afresh."""
    async def scenario():
        router = SlotRouter(2)
        async with router.claim(session(1), salt="tenant-a") as slot:
            first = slot.index
            assert not slot.reuses  # an empty slot last used with no salt: nothing of it is reused
        async with router.claim(session(1), salt="tenant-a") as slot:
            assert (slot.index, slot.reuses) == (first, True)
        async with router.claim(session(1), salt="tenant-b") as slot:
            assert slot.index != first and not slot.reuses  # the other (empty) slot: it destroys nothing
        async with router.claim(session(1)) as slot:  # no salt is a salt of its own
            assert not slot.reuses
        async with router.claim(session(1)) as slot:
            assert slot.reuses

    run(scenario())
