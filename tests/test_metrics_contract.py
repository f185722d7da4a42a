"""The llm-d / KServe model-server contract on /metrics: vLLM's gauge names, with vLLM's meaning, read by
Prometheus' own text parser while requests pile up and after they have drained.

The scripted engine runs one sequence at a time (parallel 1), so with --max-concurrency 3 and five slow
streams: one runs in the engine, two wait in the engine's queue and two in rostra's admission queue.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from servers import DATA, RunningServer

MODEL = "scripted"
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


@pytest.fixture(scope="module")
def server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--public-metrics",
                            "--max-concurrency", "3", "--max-queue", "5"])
    yield server
    server.stop()


def scrape(base_url: str) -> dict[str, dict[str, float]]:
    """Each vLLM gauge's value per model_name, as Prometheus' parser reads the exposition."""
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    values: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name in GAUGES:
            assert family.type == "gauge", family
            values[family.name] = {sample.labels["model_name"]: sample.value for sample in family.samples}
    return values


def slow_story(base_url: str) -> None:
    httpx.post(f"{base_url}/v1/chat/completions", timeout=60, json={
        "model": MODEL, "messages": [{"role": "user", "content": "slow story"}], "max_tokens": 30})


def test_idle_server_exports_vllms_gauges_at_zero(server):
    values = scrape(server.base_url)
    assert set(values) == set(GAUGES)
    assert all(values[name] == {MODEL: 0.0} for name in GAUGES)


def test_gauges_follow_the_load_and_return_to_zero(server):
    clients = [threading.Thread(target=slow_story, args=(server.base_url,)) for _ in range(5)]
    for client in clients:
        client.start()
    deadline, seen = time.monotonic() + 20, None
    while time.monotonic() < deadline:
        values = scrape(server.base_url)
        seen = {name: values[name][MODEL] for name in GAUGES}
        if seen["vllm:num_requests_waiting"] == 4:
            break
        time.sleep(0.05)
    # One generation runs (the engine's one slot, full), two queue in the engine, two in admission.
    assert seen == {"vllm:num_requests_running": 1.0, "vllm:num_requests_waiting": 4.0,
                    "vllm:kv_cache_usage_perc": 1.0}
    for client in clients:
        client.join(60)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(scrape(server.base_url)[name][MODEL] for name in GAUGES):
        time.sleep(0.1)
    values = scrape(server.base_url)
    assert all(values[name] == {MODEL: 0.0} for name in GAUGES)
