"""Prometheus metrics, named as vLLM names them where the meaning is the same (so existing
dashboards work), plus rostra's HTTP, engine-slot and model-loading metrics. Every model's series carry
its canonical name in the `model_name` label.

Each app has its own registry: several servers in one process (tests) never collide.

The gauges llm-d's and KServe's schedulers read to pick a replica (vLLM's names, the same meaning on every
engine): `vllm:num_requests_waiting` counts requests waiting in rostra's admission queue (--max-concurrency;
shared by the models of one server, so counted under each), for the model's load, and in the engine beyond
what it runs at once; `vllm:num_requests_running` the generations the engine runs; `vllm:kv_cache_usage_perc`
(0 to 1, as vLLM's) the engine's own measure (Engine.cache_usage: vLLM's KV blocks, else the share of
sequence slots in use).
"""

from __future__ import annotations

import functools
import time
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from rostra.engines.base import Engine
from rostra.engines.thread_budget import process_budget
from rostra.http.admission import Admission
from rostra.http.lora_metrics import LoraRequestsInfo
from rostra.serving.job import Job

_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0, 160.0, 640.0)
_LOAD_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class _EngineCores(Collector):
    """Each loaded model's share of the process's cores now, labelled with why (engines/thread_budget.py)."""

    def __init__(self, models: Callable[[], set[str]]):
        self._models = models

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("rostra_engine_cores", "CPU cores the engine's threads may run on now, and why: "
                                   "alone, split (with other engines generating), yields to online (batch work), "
                                   "idle, pinned (--threads).", labels=["model_name", "why"])
        loaded = self._models()
        for name, share in process_budget().shares():
            if name in loaded:
                family.add_metric([name, share.why], len(share.cores))
        yield family


def _nth_count(counts: Callable[[], tuple[int, int] | None], index: int) -> float:
    return (counts() or (0, 0))[index]


class Metrics:
    def __init__(self, admission: Admission) -> None:
        self.registry = CollectorRegistry()
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
        self._admission = admission
        self._engines: dict[str, Engine] = {}  # the loaded models'
        self._load_waits: dict[str, Callable[[], float]] = {}
        self._running = Gauge("vllm:num_requests_running", "Requests the engine runs.", labels, registry=reg)
        self._waiting = Gauge("vllm:num_requests_waiting", "Requests waiting: for admission, for the model's load, "
                              "in the engine's queue.", labels, registry=reg)
        self._cache = Gauge("vllm:kv_cache_usage_perc", "KV cache usage (0 to 1; engines without block "
                            "accounting: the share of sequence slots in use).", labels, registry=reg)
        Gauge("rostra_requests_waiting_for_slot", "Requests waiting for a --max-concurrency slot.",
              registry=reg).set_function(lambda: admission.waiting)
        # The leak gauges (a soak reads them back to 0 once idle): admission slots held, model leases held.
        Gauge("rostra_requests_admitted", "Requests holding an admission slot (engine work under way).",
              registry=reg).set_function(lambda: admission.running)
        self._leases = Gauge("rostra_model_leases", "Requests holding a lease on the model.", labels, registry=reg)
        ProcessCollector(registry=reg)  # process_open_fds, process_resident_memory_bytes, ...
        reg.register(_EngineCores(lambda: set(self._engines)))
        self._engine_running = Gauge("rostra_engine_running_generations", "Generations holding engine capacity.",
                                     labels, registry=reg)
        self._engine_queued = Gauge("rostra_engine_queued_requests", "Requests the engine holds but does not run "
                                    "yet (its slot queue, the embeddings batcher's queue).", labels, registry=reg)
        self._slots = Gauge("rostra_engine_slots", "Sequences the engine runs at once.", labels, registry=reg)
        self._threads = Gauge("rostra_engine_threads", "CPU threads the engine computes with (chosen at load: "
                              "usable cores less those other work kept busy; see the log).", labels, registry=reg)
        self._loaded = Gauge("rostra_model_loaded", "1 while the model is loaded.", labels, registry=reg)
        self._load_seconds = Histogram("rostra_model_load_seconds", "Time to load a model.", labels,
                                       buckets=_LOAD_BUCKETS, registry=reg)
        # Speculative decoding (engines that draft: llama.cpp with --speculative; 0 while it does not draft).
        self._speculative = (Gauge("rostra_speculative_draft_tokens", "Draft tokens proposed.", labels, registry=reg),
                             Gauge("rostra_speculative_accepted_tokens", "Draft tokens accepted.", labels,
                                   registry=reg))
        reg.register(LoraRequestsInfo(lambda: self._engines))  # vllm:lora_requests_info
        self.http_requests = Counter("rostra_http_requests", "HTTP requests by route and status.",
                                     ["route", "method", "status"], registry=reg)

    def add_model(self, model: str, waiting_for_load: Callable[[], float], leases: Callable[[], float]) -> None:
        self._load_waits[model] = waiting_for_load
        self._leases.labels(model).set_function(leases)
        self._track(model)
        self._loaded.labels(model).set(0)

    def _track(self, model: str) -> None:
        self._running.labels(model).set_function(lambda: self._engine_value(model, Engine.scheduled_requests))
        self._cache.labels(model).set_function(lambda: self._engine_value(model, Engine.cache_usage))
        self._waiting.labels(model).set_function(lambda: self._waiting_for(model))

    def _engine_value(self, model: str, read: Callable[[Engine], float]) -> float:
        engine = self._engines.get(model)
        return read(engine) if engine is not None else 0

    def _waiting_for(self, model: str) -> float:
        load = self._load_waits.get(model)
        return (self._admission.waiting + (load() if load is not None else 0)
                + self._engine_value(model, Engine.queued_requests))

    def model_loaded(self, model: str, engine: Engine, load_seconds: float | None) -> None:
        self._engines[model] = engine
        self._track(model)
        self._engine_running.labels(model).set_function(engine.running_requests)
        self._engine_queued.labels(model).set_function(engine.queued_requests)
        self._slots.labels(model).set(engine.parallel)
        if engine.compute_threads is not None:
            self._threads.labels(model).set(engine.compute_threads)
        speculative_tokens = engine.speculative_tokens
        for index, gauge in enumerate(self._speculative):  # (drafted, accepted)
            gauge.labels(model).set_function(functools.partial(_nth_count, speculative_tokens, index))
        self._loaded.labels(model).set(1)
        if load_seconds is not None:
            self._load_seconds.labels(model).observe(load_seconds)

    def model_unloaded(self, model: str) -> None:
        self._engines.pop(model, None)
        self._loaded.labels(model).set(0)
        for gauge in (self._engine_running, self._engine_queued, self._slots, *self._speculative):
            try:
                gauge.remove(model)
            except KeyError:
                pass

    def observer(self, model: str) -> Callable[[Job, list[str]], None]:
        """What a model's services call when a job has finished."""
        return lambda job, reasons: self.observe_job(model, job, reasons)

    def observe_job(self, model: str, job: Job, reasons: list[str]) -> None:
        stats = job.stats
        # What was sampled, finished or not: a generation the client abandoned counts the tokens it generated
        # (the finished choices' count, a relayed upstream's, where nothing was sampled here).
        generated = max(stats.generated, stats.completion_tokens)
        self.prompt_tokens.labels(model).inc(stats.prompt_tokens)
        self.generation_tokens.labels(model).inc(generated)
        for reason in reasons:
            self.request_success.labels(model, reason).inc()
        end = stats.finished or time.monotonic()
        self.e2e.labels(model).observe(end - stats.started)
        if stats.first_token is not None:
            self.ttft.labels(model).observe(stats.first_token - stats.started)
            if generated > 1:
                self.itl.labels(model).observe((end - stats.first_token) / (generated - 1))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
