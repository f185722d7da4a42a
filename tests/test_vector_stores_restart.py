"""A server stopped mid-indexing loses nothing (issue 47): the files its indexer held are taken over by the next
process on the store once their lease runs out, and every file ends indexed, searchable, once."""

from __future__ import annotations

import asyncio

import pytest
from openai import AsyncOpenAI

from harness import InProcessServer
from rostra.api.vector_stores.embedder import Embedder
from test_api_vector_stores import models_config

pytestmark = pytest.mark.anyio
TEXTS = {"otters.txt": "Sea otters hold hands while they sleep so they do not drift apart.",
         "comets.txt": "A comet's tail always points away from the sun, pushed by the solar wind.",
         "bread.txt": "Sourdough bread rises thanks to wild yeast and lactic acid bacteria."}


def sdk(server: InProcessServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url="http://rostra/v1", api_key="none", max_retries=0, http_client=server.client)


async def test_a_restart_mid_indexing_loses_nothing(tmp_path, minilm_checkpoint, monkeypatch):
    settings = {"models_config": models_config(tmp_path, minilm_checkpoint), "lease_seconds": 1.0, "threads": 1}
    started, real_embed = asyncio.Event(), Embedder.embed

    async def stuck(self, texts):  # the first process dies (is stopped) while it embeds
        started.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(Embedder, "embed", stuck)
    async with InProcessServer(tmp_path, [], **settings) as first:
        client = sdk(first)
        store = await client.vector_stores.create(name="restart")
        ids = {name: (await client.files.create(file=(name, text.encode()), purpose="user_data")).id
               for name, text in TEXTS.items()}
        batch = await client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=list(ids.values()))
        await asyncio.wait_for(started.wait(), 60)
        assert (await client.vector_stores.retrieve(store.id)).file_counts.in_progress == 3
    monkeypatch.setattr(Embedder, "embed", real_embed)

    async with InProcessServer(tmp_path, [], **settings) as second:
        client = sdk(second)
        for _ in range(600):
            done = await client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=store.id)
            if done.status != "in_progress":
                break
            await asyncio.sleep(0.1)
        assert (done.status, done.file_counts.completed) == ("completed", 3)
        for name, file_id in ids.items():
            content = await client.vector_stores.files.content(file_id, vector_store_id=store.id)
            assert [part.text for part in content.data] == [TEXTS[name]]  # one chunk each, written once
        found = await client.vector_stores.search(store.id, query="Why do otters hold hands?")
        assert found.data[0].file_id == ids["otters.txt"]
