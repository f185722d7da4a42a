"""The model manager (rostra/models/manager.py) in-process, with fake engines: every pair of events in
one loop turn (issue 33): an unload beginning vs a request acquiring, two loads at once against the limits,
a waiter's timeout vs its model becoming loaded."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from rostra.config import Settings
from rostra.engines.base import Engine
from rostra.errors import RequestTimeout, ServiceUnavailable
from rostra.models.manager import Lease, ModelManager
from rostra.models.specs import ModelSpec


class FakeEngine(Engine):
    """Starts in `load_turns` loop turns; counts closes; refuses work once closed."""

    task = "generate"

    def __init__(self, name: str, load_turns: int = 1):
        self.name, self.load_turns, self.closed = name, load_turns, False

    async def start(self) -> None:
        for _ in range(self.load_turns):
            await asyncio.sleep(0)

    async def close(self) -> None:
        self.closed = True

    async def detokenize(self, token_ids):  # pragma: no cover - unused
        return ""

    async def tokenize(self, text, add_special):  # pragma: no cover - unused
        return []

    def token_bytes(self, token_id):  # pragma: no cover - unused
        return b""

    async def abort(self, request_id):  # pragma: no cover - unused
        pass

    def generate(self, request_id, prompt, params):  # pragma: no cover - unused
        raise NotImplementedError


@dataclasses.dataclass
class FakeBundle:
    engine: FakeEngine


def manager(names: list[str], size: int = 100, **limits: Any) -> tuple[ModelManager, list[FakeEngine]]:
    settings = Settings(**limits)
    engines: list[FakeEngine] = []

    def make_engine(own: Settings) -> FakeEngine:
        engines.append(FakeEngine(own.served_model_name[0]))
        return engines[-1]

    specs = []
    for name in names:
        spec = ModelSpec(name, dataclasses.replace(settings, served_model_name=[name], engine="llamacpp"))
        spec.__dict__["size_bytes"] = size  # the cached property, fixed: no file behind a fake
        specs.append(spec)
    return ModelManager(specs, settings, make_engine, lambda spec, engine: FakeBundle(engine)), engines


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 10))


def test_a_lease_taken_as_an_unload_begins_never_gets_a_closed_engine():
    """The admin unload and a request in one loop turn, both orders: the request either gets an engine that
    stays open while it holds it, or waits for the unload and gets a fresh one."""
    for unload_first in (True, False):
        async def scenario():
            models, engines = manager(["a"])
            await models.load("a")
            unload = asyncio.ensure_future(models.unload("a"))
            acquire = asyncio.ensure_future(models.acquire("a"))
            if not unload_first:
                unload, acquire = acquire, unload  # (only the order of creation differs)
            results = await asyncio.gather(unload, acquire, return_exceptions=True)
            lease = next(r for r in results if isinstance(r, Lease))
            assert not lease.bundle.engine.closed
            await asyncio.sleep(0)
            assert not lease.bundle.engine.closed
            lease.release()
        run(scenario())


def test_an_eviction_racing_a_request_never_closes_a_leased_engine():
    """A TTL or make-room unload decided in the same turn a request takes its lease."""
    async def scenario():
        models, engines = manager(["a", "b"], max_loaded_models=1)
        first = await models.acquire("a")
        first.release()
        # b's load evicts a (idle) while, in the same turn, a request asks for a

        async def ask(name: str) -> None:
            lease = await models.acquire(name)
            for _ in range(3):
                assert not lease.bundle.engine.closed
                await asyncio.sleep(0)
            lease.release()

        await asyncio.gather(ask("b"), ask("a"))
    run(scenario())


@pytest.mark.parametrize("limit", [{"max_loaded_models": 1}, {"memory_budget": 150}])
def test_concurrent_first_requests_for_different_models_respect_the_limits(limit):
    """Four models asked for in one loop turn: at no moment are more loaded (or loading) than the limits allow,
    and every request is served in turn."""
    async def scenario():
        models, engines = manager(["a", "b", "c", "d"], size=100, **limit)
        peak = 0

        async def ask(name: str):
            nonlocal peak
            lease = await models.acquire(name)
            held = [s for s in models.slots if s.state in ("loaded", "loading")]
            peak = max(peak, len(held))
            await asyncio.sleep(0)
            lease.release()

        await asyncio.gather(*(ask(name) for name in "abcd"))
        return peak, sum(1 for s in models.slots if s.state == "loaded")

    peak, loaded = run(scenario())
    assert peak == 1 and loaded == 1


def test_a_model_larger_than_the_budget_is_refused_at_once():
    async def scenario():
        models, _ = manager(["a"], size=500, memory_budget=100)
        with pytest.raises(ServiceUnavailable):
            await models.acquire("a")
    run(scenario())


def test_a_load_waiting_for_room_gives_up_at_its_timeout_and_frees_nothing_it_did_not_take():
    async def scenario():
        models, _ = manager(["a", "b"], max_loaded_models=1, request_timeout=0.2)
        held = await models.acquire("a")
        with pytest.raises((RequestTimeout, ServiceUnavailable)):
            await models.acquire("b")  # a is in use: b cannot load before the timeout
        assert [s.state for s in models.slots] == ["loaded", "unloaded"]
        held.release()
        lease = await models.acquire("b")  # now a is idle: evicted for b
        assert [s.state for s in models.slots] == ["unloaded", "loaded"]
        lease.release()
    run(scenario())


def test_a_timeout_in_the_turn_the_model_becomes_loaded_leaks_no_count():
    async def scenario():
        models, _ = manager(["a"])
        waiter = asyncio.ensure_future(models.acquire("a"))
        for _ in range(3):
            await asyncio.sleep(0)
        waiter.cancel()  # the load completes around now
        result = (await asyncio.gather(waiter, return_exceptions=True))[0]
        if hasattr(result, "release"):
            result.release()
        slot = models.slots[0]
        assert slot.leases == 0 and slot.waiting == 0
    run(scenario())
