"""A short soak on loopback (the long one is benchmarks/soak.py): 32 concurrent streams, repeated;
no error, no mixed or truncated stream, memory flat; and a graceful SIGTERM mid-stream."""

import asyncio
import json
import signal
import time

import httpx

from servers import DATA, RunningServer


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def one_stream(client: httpx.AsyncClient, text: str) -> str:
    out, done = "", False
    async with client.stream("POST", "/v1/chat/completions", json={
            "model": "scripted", "stream": True, "messages": [{"role": "user", "content": text}]}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                assert "error" not in chunk, chunk
                out += "".join(c["delta"].get("content") or "" for c in chunk["choices"])
    assert done, "truncated stream"
    return out


def soak(base_url: str, rounds: int, concurrency: int = 32) -> None:
    async def run():
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
            for r in range(rounds):
                texts = [f"soak {r}-{i}: " + " ".join(f"w{i}x{j}" for j in range(20)) for i in range(concurrency)]
                assert await asyncio.gather(*(one_stream(client, t) for t in texts)) == texts

    asyncio.run(run())


def test_short_soak_memory_flat(scripted_server):
    pid = scripted_server.process.pid
    soak(scripted_server.base_url, rounds=3)  # warm up allocators and caches
    before = rss_kib(pid)
    soak(scripted_server.base_url, rounds=10)
    after = rss_kib(pid)
    print(f"RSS before {before} KiB, after {after} KiB")
    assert after < before * 1.10 + 10_000, (before, after)  # flat: no growth per request
    assert httpx.get(f"{scripted_server.base_url}/health").json()["running"] == 0


def test_sigterm_lets_a_running_stream_finish():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--shutdown-grace", "10"])
    try:
        with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", timeout=30, json={
                "model": "scripted", "stream": True,
                "messages": [{"role": "user", "content": "slow story"}]}) as response:
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            server.process.send_signal(signal.SIGTERM)
            rest = [line for line in lines if line.startswith("data: ")]
        assert first and rest[-1] == "data: [DONE]"
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in [first, *rest[:-1]] if json.loads(line[6:])["choices"])
        assert text.endswith("the server must notice.")  # the whole story, not cut
        deadline = time.monotonic() + 15
        while server.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        # uvicorn re-raises the signal once its graceful shutdown is over: exit by SIGTERM, not a kill.
        assert server.process.returncode in (0, -signal.SIGTERM)
        try:
            httpx.get(f"{server.base_url}/health", timeout=1)
            raise AssertionError("still accepting after SIGTERM")
        except httpx.ConnectError:
            pass
    finally:
        server.stop()
