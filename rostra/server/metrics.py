"""Prometheus metrics, named as vLLM names them where the meaning is the same (so existing
dashboards work), plus rostra's HTTP and engine-slot metrics.

Each app has its own registry: several servers in one process (tests) never collide.
"""

from __future__ import annotations

import functools
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rostra.serving.generation import Job

_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0, 160.0, 640.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


def _nth_count(counts, index: int) -> float:
    return (counts() or (0, 0))[index]


class Metrics:
    def __init__(self, model_name: str, running_in_engine, slots: int, admission, speculative_tokens=lambda: None):
        self.registry = CollectorRegistry()
        self.model = model_name
        labels = ["model_name"]
        reg = self.registry
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens processed.", labels, registry=reg)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generation tokens processed.", labels,
                                         registry=reg)
        self.request_success = Counter("vllm:request_success", "Finished requests by finish reason.",
                                       labels + ["finished_reason"], registry=reg)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", labels,
                              buckets=_LATENCY_BUCKETS, registry=reg)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Mean time between output chunks of a request.",
                             labels, buckets=_LATENCY_BUCKETS, registry=reg)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.", labels,
                             buckets=_LATENCY_BUCKETS, registry=reg)
        running = Gauge("vllm:num_requests_running", "Requests being served.", labels, registry=reg)
        running.labels(model_name).set_function(lambda: admission.running)
        waiting = Gauge("vllm:num_requests_waiting", "Requests waiting for a slot.", labels, registry=reg)
        waiting.labels(model_name).set_function(lambda: admission.waiting)
        engine_running = Gauge("rostra_engine_running_generations", "Generations holding engine capacity.",
                               labels, registry=reg)
        engine_running.labels(model_name).set_function(running_in_engine)
        Gauge("rostra_engine_slots", "Sequences the engine runs at once.", labels,
              registry=reg).labels(model_name).set(slots)
        # Speculative decoding (engines that draft: llama.cpp with --speculative; 0 while it does not draft).
        for index, (name, about) in enumerate((("rostra_speculative_draft_tokens", "Draft tokens proposed."),
                                               ("rostra_speculative_accepted_tokens", "Draft tokens accepted."))):
            Gauge(name, about, labels, registry=reg).labels(model_name).set_function(
                functools.partial(_nth_count, speculative_tokens, index))
        self.http_requests = Counter("rostra_http_requests", "HTTP requests by route and status.",
                                     ["route", "method", "status"], registry=reg)

    def observe_job(self, job: Job, reasons: list[str]) -> None:
        stats, model = job.stats, self.model
        self.prompt_tokens.labels(model).inc(stats.prompt_tokens)
        self.generation_tokens.labels(model).inc(stats.completion_tokens)
        for reason in reasons:
            self.request_success.labels(model, reason).inc()
        end = stats.finished or time.monotonic()
        self.e2e.labels(model).observe(end - stats.started)
        if stats.first_token is not None:
            self.ttft.labels(model).observe(stats.first_token - stats.started)
            if stats.completion_tokens > 1:
                self.itl.labels(model).observe((end - stats.first_token) / (stats.completion_tokens - 1))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
