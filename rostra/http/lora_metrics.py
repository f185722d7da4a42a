"""`vllm:lora_requests_info`, as vLLM exports it and llm-d's inference pool reads it to route by adapter: a gauge
whose value is the time of the reading and whose labels say which adapters the requests running and waiting use
(`running_lora_adapters`, `waiting_lora_adapters`: each adapter named once, comma-separated, as vLLM writes them)
and how many adapters one batch can mix (`max_lora`: on llama.cpp and transformers every loaded adapter, so the
number loaded). One series per loaded model that serves adapters (its `model_name` label beside vLLM's three),
written afresh at every scrape, so no stale label set lingers."""

from __future__ import annotations

import time
from typing import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rostra.engines.base import Engine

LABELS = ["model_name", "max_lora", "running_lora_adapters", "waiting_lora_adapters"]


class LoraRequestsInfo(Collector):
    def __init__(self, engines: Callable[[], dict[str, Engine]]):
        self._engines = engines  # the loaded models' engines, by model name

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("vllm:lora_requests_info", "Running stats on LoRA requests.", labels=LABELS)
        for model, engine in list(self._engines().items()):
            if not engine.adapters and not engine.loads_adapters:
                continue
            requests = engine.adapter_requests()
            family.add_metric([model, str(requests.max_loras), ",".join(sorted(requests.running)),
                               ",".join(sorted(requests.waiting))], time.time())
        yield family
