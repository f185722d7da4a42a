"""Several streams at once, and clients that hang up."""

import asyncio
import json
import time

import httpx

from wire import check

MODEL = "scripted"


async def _stream_text(client: httpx.AsyncClient, content: str) -> str:
    text = ""
    async with client.stream("POST", "/v1/chat/completions", json={
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": content}]}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = check("chat_chunk", json.loads(line[6:]))
                for choice in chunk["choices"]:
                    text += choice["delta"].get("content") or ""
    return text


def test_concurrent_streams_are_not_mixed(scripted_server):
    # No script line matches these, so each stream must echo exactly its own prompt.
    prompts = [f"stream number {i}: " + " ".join(f"word{i}-{j}" for j in range(30)) for i in range(12)]

    async def run():
        async with httpx.AsyncClient(base_url=scripted_server.base_url, timeout=60) as client:
            return await asyncio.gather(*(_stream_text(client, p) for p in prompts))

    assert asyncio.run(run()) == prompts


def _running(server) -> int:
    return httpx.get(f"{server.base_url}/health").json()["running"]


def _wait_until_idle(server, limit: float = 5.0) -> float:
    start = time.monotonic()
    while _running(server) and time.monotonic() - start < limit:
        time.sleep(0.05)
    return time.monotonic() - start


def test_disconnect_mid_stream_frees_the_engine(scripted_server):
    assert _wait_until_idle(scripted_server) < 5
    with httpx.stream("POST", f"{scripted_server.base_url}/v1/chat/completions", timeout=30, json={
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": "slow story"}]}) as response:
        lines = response.iter_lines()
        while "content" not in next(lines):
            pass
        assert _running(scripted_server) == 1
    # The client is gone: the generation (100 ms per token, ~30 tokens left) must stop at once.
    assert _wait_until_idle(scripted_server) < 1.0
    assert _running(scripted_server) == 0


def test_disconnect_non_stream_frees_the_engine(scripted_server):
    try:
        httpx.post(f"{scripted_server.base_url}/v1/chat/completions", timeout=0.5, json={
            "model": MODEL, "messages": [{"role": "user", "content": "slow story"}]})
    except httpx.ReadTimeout:
        pass
    assert _wait_until_idle(scripted_server) < 1.0
