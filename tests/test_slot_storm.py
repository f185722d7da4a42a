"""A cancellation storm over HTTP on the llama.cpp engine (issue 33): hundreds of streaming requests on
`--parallel 2`, dropped by their clients at random moments (before the first byte, while waiting for a slot,
mid-stream); afterwards no slot is lost: `--parallel` concurrent requests complete together and readiness
reports every slot free."""

from __future__ import annotations

import asyncio
import random
import time

import httpx

from servers import RunningServer

PARALLEL = 2


async def _stream(client: httpx.AsyncClient, drop_after: float | None) -> None:
    body = {"model": "m", "stream": True, "max_tokens": 8, "messages": [{"role": "user", "content": "Say hi."}]}

    async def read() -> None:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code in (200, 429, 503), response.status_code
            async for _ in response.aiter_lines():
                pass

    if drop_after is None:
        await read()
        return
    try:  # the client goes away: the connection closes under the server
        await asyncio.wait_for(read(), timeout=drop_after)
    except (asyncio.TimeoutError, httpx.HTTPError):
        pass


async def _storm(base_url: str, requests: int, seed: int) -> None:
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        tasks = []
        for _ in range(requests):
            drop = None if rng.random() < 0.2 else rng.choice([0.0, 0.001, 0.01, 0.05, 0.2, 0.5])
            tasks.append(asyncio.create_task(_stream(client, drop)))
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() * 0.02)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert not [r for r in results if isinstance(r, AssertionError)], results


async def _full_capacity(base_url: str) -> list[float]:
    """`PARALLEL` requests at once, each timed: with every slot usable they all finish."""
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "Count to three."}]}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        async def one() -> float:
            started = time.monotonic()
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            return time.monotonic() - started
        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(PARALLEL))), timeout=60)


def test_a_storm_of_dropped_streams_loses_no_slot():
    server = RunningServer(["--parallel", str(PARALLEL), "--max-model-len", "512", "--max-queue", "1000",
                            "--speculative", "off", "--served-model-name", "m"], startup_timeout=300)
    try:
        asyncio.run(_storm(server.base_url, requests=300, seed=33))
        time.sleep(1)  # the last disconnects reach the server
        asyncio.run(_full_capacity(server.base_url))
        ready = httpx.get(f"{server.base_url}/health/ready", timeout=10)
        assert ready.status_code == 200, ready.text
        engine = ready.json()["models"][0]
        assert engine["slots_free"] == PARALLEL and engine["running"] == 0, ready.json()
        assert server.process.poll() is None
    finally:
        server.stop()
