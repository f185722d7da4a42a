"""Two servers on one SQLite store, in one process (each store holds its own lock descriptor, so they meet as two
processes would): a server that starts beside a running one leaves its runs alone, reads and replays them, and
cancels them through the store; the runner stops within a lease tick. Real processes and kill -9:
tests/test_faults_responses.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from harness import MODEL, InProcessServer

SCRIPT = [{"match": "^slow", "output": "word " * 1000, "delay_ms": 30}, {"match": "", "output": "Done."}]


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def status(server: InProcessServer, response_id: str) -> str:
    response = await server.client.get(f"/v1/responses/{response_id}")
    assert response.status_code == 200, response.text
    return response.json()["status"]


@pytest.mark.anyio
async def test_a_second_server_leaves_the_first_ones_runs_alone_and_cancels_them_through_the_store(tmp_path):
    async with InProcessServer(tmp_path, SCRIPT, lease_seconds=1.0) as first:
        created = (await first.client.post("/v1/responses", json={"model": MODEL, "input": "slow",
                                                                   "background": True})).json()
        await asyncio.sleep(0.3)
        async with InProcessServer(tmp_path, SCRIPT, lease_seconds=1.0) as second:  # recovers: not alone
            assert await status(second, created["id"]) == "in_progress"
            await asyncio.sleep(0.5)
            cancelled = await second.client.post(f"/v1/responses/{created['id']}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
            assert await status(first, created["id"]) == "cancelled"
            replay = (await second.client.get(f"/v1/responses/{created['id']}?stream=true")).text
            types = [json.loads(line[6:])["type"] for line in replay.splitlines() if line.startswith("data: ")]
            assert types[:2] == ["response.created", "response.in_progress"] and "response.output_text.delta" in types
            done = (await second.client.post("/v1/responses", json={"model": MODEL, "input": "hi"})).json()
            assert await status(first, done["id"]) == "completed"  # and the first reads the second's
