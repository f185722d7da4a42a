"""The soak over every API and engine (issue 33): one real `rostra serve --models-config` holding the scripted
engine, the embedded llama.cpp model (`parallel: 2`), an embedding GGUF on llama.cpp (tests/bert_gguf.py), the
MiniLM checkpoint on the transformers engine (its embeddings batcher) and a gateway model in front of a scripted
`rostra serve` upstream. Hundreds of requests over Chat, Completions, Responses (background ones, some cancelled),
Messages, embeddings, count_tokens, tokenize and two small batches, behind `--max-concurrency 4`, with
clients that hang up at random moments (waiting for admission, before the first byte, mid-stream) and a
`--request-timeout` the slow ones run past.

At the end nothing is leaked, each read back from a gauge or a /health detail: llama.cpp slots free ==
parallel, model leases 0, admission slots held and queued 0, engine queues (the batcher's) 0, the gateway's
upstream requests in flight 0 (and the upstream's own running 0), the server's open fds back near their
baseline; then `parallel` concurrent llama.cpp requests complete together. The batches have finished.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Awaitable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from embedding_models import minilm_gguf
from rostra.embedded import embedded_model_path
from servers import DATA, RunningServer

PARALLEL = 2
REQUESTS = 360
BATCH_LINES = 3
CLIENTS = 16  # at once: the admission queue holds a dozen, most of them served within the timeout
FD_SLACK = 24  # kept-alive upstream connections, SQLite's journal, a thread pool's pipes: not per request


@pytest.fixture(scope="module")
def upstream():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--served-model-name",
                            "upstream-model"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(upstream, minilm_checkpoint, tmp_path_factory):
    config = tmp_path_factory.mktemp("soak") / "models.yaml"
    config.write_text(json.dumps({"models": [
        {"name": "scripted", "engine": "scripted", "script": str(DATA / "script.jsonl")},
        {"name": "smol", "model": str(embedded_model_path()), "parallel": PARALLEL, "max_model_len": 1024,
         "speculative": "off", "threads": 1},
        {"name": "bert", "model": str(minilm_gguf()), "threads": 1},
        {"name": "minilm", "engine": "transformers", "model": str(minilm_checkpoint), "threads": 1},
        {"name": "gateway", "engine": "remote", "upstream": [upstream.v1]},
    ]}))  # (JSON is YAML)
    running = RunningServer(["--models-config", str(config), "--max-concurrency", "4", "--max-queue", "1000",
                             "--request-timeout", "4", "--preload", "smol", "--preload", "bert",
                             "--preload", "minilm"], startup_timeout=300)
    yield running
    running.stop()


# -- the requests ------------------------------------------------------------------------------------------

GENERATIVE = ("scripted", "smol", "upstream-model")
PROMPTS = ("say hello", "count to ten", "slow story", "unicode please", "Name a colour.")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: dict | None
    stream: bool = False


def generation(rng: random.Random) -> Call:
    model, text, stream = rng.choice(GENERATIVE), rng.choice(PROMPTS), rng.random() < 0.6
    budget = {"max_tokens": 8} if model == "smol" else {}
    api = rng.choice(("chat", "completions", "responses", "messages"))
    if api == "chat":
        return Call("POST", "/v1/chat/completions", {"model": model, "stream": stream, **budget,
                                                     "messages": [{"role": "user", "content": text}]}, stream)
    if api == "completions":
        return Call("POST", "/v1/completions", {"model": model, "prompt": text, "stream": stream,
                                                "max_tokens": 8 if model == "smol" else 64}, stream)
    if api == "responses":
        output = {"max_output_tokens": 16} if model == "smol" else {}
        return Call("POST", "/v1/responses", {"model": model, "input": text, "stream": stream, **output}, stream)
    return Call("POST", "/v1/messages", {"model": model, "max_tokens": 8 if model == "smol" else 64, "stream": stream,
                                         "messages": [{"role": "user", "content": text}]}, stream)


def counting(rng: random.Random) -> Call:
    kind = rng.choice(("embeddings", "count_tokens", "tokenize"))
    if kind == "embeddings":
        texts = [f"soak text {n} " * rng.randint(1, 20) for n in range(rng.randint(1, 40))]
        return Call("POST", "/v1/embeddings", {"model": rng.choice(("bert", "minilm")), "input": texts})
    if kind == "count_tokens":  # a gateway's model: 501, never an upstream generation
        return Call("POST", "/v1/messages/count_tokens", {"model": rng.choice(GENERATIVE), "messages": [
            {"role": "user", "content": rng.choice(PROMPTS)}]})
    return Call("POST", "/tokenize", {"model": rng.choice(("scripted", "smol")), "prompt": rng.choice(PROMPTS)})


# 429: the queue; 499 never reaches a client; 501: count_tokens on the gateway; 504: --request-timeout.
ALLOWED = {200, 429, 501, 504}


async def perform(client: httpx.AsyncClient, call: Call) -> int:
    async with client.stream(call.method, call.path, json=call.body) as response:
        async for _ in response.aiter_bytes():
            pass
    assert response.status_code in ALLOWED, (call, response.status_code, await response.aread())
    if response.status_code == 501:
        assert call.path == "/v1/messages/count_tokens" and call.body and call.body["model"] == "upstream-model"
    return response.status_code


async def maybe_dropped(client: httpx.AsyncClient, call: Call, drop_after: float | None) -> int | None:
    """The call, or None where its client hung up after `drop_after` seconds (the connection closes under it)."""
    if drop_after is None:
        return await perform(client, call)
    try:
        return await asyncio.wait_for(perform(client, call), timeout=drop_after)
    except (asyncio.TimeoutError, httpx.HTTPError):
        return None


async def paced(clients: asyncio.Semaphore, call: Awaitable[int | None]) -> int | None:
    async with clients:
        return await call


async def background_response(client: httpx.AsyncClient, rng: random.Random) -> None:
    """A background response on a model, cancelled at a random moment or followed to its end."""
    made = await client.post("/v1/responses", json={"model": rng.choice(("scripted", "smol")), "background": True,
                                                    "input": rng.choice(PROMPTS), "max_output_tokens": 16})
    assert made.status_code in (200, 429, 504), made.text  # 504: its admission wait ran past the timeout
    if made.status_code != 200:
        return
    response_id = made.json()["id"]
    if rng.random() < 0.5:
        await asyncio.sleep(rng.choice((0.0, 0.05, 0.3)))
        cancelled = await client.post(f"/v1/responses/{response_id}/cancel")
        assert cancelled.status_code in (200, 400), cancelled.text  # 400: it had finished already
    await settled_response(client, response_id)


async def settled_response(client: httpx.AsyncClient, response_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = (await client.get(f"/v1/responses/{response_id}")).json()
        if body["status"] not in ("queued", "in_progress"):
            return body
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.1)


async def start_batch(client: httpx.AsyncClient, model: str) -> str:
    lines = [{"custom_id": f"b{n}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "say hello"}]}}
             for n in range(BATCH_LINES)]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    upload = await client.post("/v1/files", files={"file": ("soak.jsonl", content)}, data={"purpose": "batch"})
    assert upload.status_code == 200, upload.text
    batch = await client.post("/v1/batches", json={"input_file_id": upload.json()["id"], "completion_window": "24h",
                                                   "endpoint": "/v1/chat/completions"})
    assert batch.status_code == 200, batch.text
    return batch.json()["id"]


async def storm(base_url: str, requests: int, seed: int) -> dict[int | None, int]:
    """`requests` calls of every kind, a third of them dropped at random moments; the statuses seen."""
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=48, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        clients = asyncio.Semaphore(CLIENTS)
        batch_ids = [await start_batch(client, model) for model in ("smol", "upstream-model")]
        tasks, backgrounds = [], []
        for _ in range(requests):
            call = generation(rng) if rng.random() < 0.6 else counting(rng)
            drop = None if rng.random() < 0.65 else rng.choice((0.0, 0.005, 0.02, 0.1, 0.3, 1.0))
            tasks.append(asyncio.create_task(paced(clients, maybe_dropped(client, call, drop))))
            if rng.random() < 0.03:
                backgrounds.append(asyncio.create_task(background_response(client, rng)))
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() * 0.03)
        statuses = await asyncio.gather(*tasks)
        await asyncio.gather(*backgrounds)
        for batch_id in batch_ids:
            await settled_batch(client, batch_id)
    return {status: statuses.count(status) for status in set(statuses)}


async def settled_batch(client: httpx.AsyncClient, batch_id: str, timeout: float = 60) -> None:
    """The batch completes, every line answered: a 200, or a 504 where the line, run behind the storm, waited
    past --request-timeout for its admission slot (the timeout holds for batch lines too)."""
    deadline = time.monotonic() + timeout
    while (batch := (await client.get(f"/v1/batches/{batch_id}")).json())["status"] != "completed":
        assert batch["status"] in ("validating", "in_progress", "finalizing"), batch
        assert time.monotonic() < deadline, batch
        await asyncio.sleep(0.2)
    counts = batch["request_counts"]
    assert counts["total"] == counts["completed"] + counts["failed"] == BATCH_LINES, batch
    answers = [json.loads(line) for key in ("output_file_id", "error_file_id") if batch.get(key)
               for line in (await client.get(f"/v1/files/{batch[key]}/content")).text.splitlines()]
    assert sorted(answer["custom_id"] for answer in answers) == [f"b{n}" for n in range(BATCH_LINES)]
    assert {answer["response"]["status_code"] for answer in answers} <= {200, 504}, answers


# -- the gauges ---------------------------------------------------------------------------------------------

def gauges(base_url: str) -> dict[str, float]:
    """Every sample of /metrics, named `name{label=value,...}` (labels sorted), the leak gauges among them."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{key}={value}" for key, value in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def leaks(server: RunningServer, upstream: RunningServer, fd_baseline: float) -> list[str]:
    """What is still held once every client is done (empty: nothing leaked)."""
    found = []
    samples = gauges(server.base_url)
    for name, value in samples.items():
        if name.split("{")[0] in ("rostra_requests_admitted", "rostra_requests_waiting_for_slot",
                                  "rostra_model_leases", "rostra_engine_running_generations",
                                  "rostra_engine_queued_requests", "vllm:num_requests_waiting") and value:
            found.append(f"{name} = {value}")
    if samples["process_open_fds"] > fd_baseline + FD_SLACK:
        found.append(f"open fds {samples['process_open_fds']} (baseline {fd_baseline})")
    ready = httpx.get(f"{server.base_url}/health/ready", timeout=10)
    smol = next(model for model in ready.json()["models"] if model["name"] == "smol")
    if ready.status_code != 200 or smol["slots_free"] != PARALLEL:
        found.append(f"readiness {ready.status_code}: {ready.json()}")
    health = httpx.get(f"{server.base_url}/health", timeout=10).json()
    found += [f"upstream in flight: {state}" for state in health["models"]["gateway"]["upstreams"]
              if state["outstanding"]]
    if (running := httpx.get(f"{upstream.base_url}/health", timeout=10).json()["running"]):
        found.append(f"the upstream still runs {running} generations")
    return found


def settled_leaks(server: RunningServer, upstream: RunningServer, fd_baseline: float, timeout: float = 30) -> list[str]:
    """Leaks once the last disconnects have reached the server (a dropped stream is noticed within ~1 s)."""
    deadline = time.monotonic() + timeout
    while (found := leaks(server, upstream, fd_baseline)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


async def full_capacity(base_url: str) -> None:
    """`PARALLEL` llama.cpp requests at once: with every slot usable they all complete."""
    body = {"model": "smol", "max_tokens": 4, "messages": [{"role": "user", "content": "Count to three."}]}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        answers = await asyncio.wait_for(asyncio.gather(
            *(client.post("/v1/chat/completions", json=body) for _ in range(PARALLEL))), timeout=60)
    assert [answer.status_code for answer in answers] == [200] * PARALLEL, [answer.text for answer in answers]


def test_soak_every_api_and_engine_leaks_nothing(server, upstream):
    started = time.monotonic()
    asyncio.run(storm(server.base_url, requests=40, seed=1))  # every path warm: lazy pools, loaded models
    assert settled_leaks(server, upstream, fd_baseline=float("inf")) == []
    fd_baseline = gauges(server.base_url)["process_open_fds"]
    statuses = asyncio.run(storm(server.base_url, requests=REQUESTS, seed=33))
    print(f"statuses {statuses}, {time.monotonic() - started:.1f} s")
    # It served (200s), and its clients hung up (None) at every stage: the storm was one.
    assert statuses.get(200, 0) > REQUESTS // 6 and statuses.get(None, 0) > REQUESTS // 10, statuses
    assert settled_leaks(server, upstream, fd_baseline) == []
    asyncio.run(full_capacity(server.base_url))
    assert server.process.poll() is None and upstream.process.poll() is None
