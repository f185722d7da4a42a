"""Every model turn's tokens, per API key and model: a row in the usage store (limits and the usage API read it)
and Prometheus counters labelled by the key's name (never the key: an unnamed key is its usage id)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from rostra.http.caller import current_caller
from rostra.serving.job import Job
from rostra.store.usage_store import UsageRecord, UsageStore, api_key_id

log = logging.getLogger("rostra.server")


class UsageRecorder:
    def __init__(self, store: UsageStore, registry: CollectorRegistry, names: dict[str, str] | None = None):
        self.store = store
        self.names = names or {}  # key fingerprints' names: a batch line knows only its key's fingerprint
        self._writes: set[asyncio.Task[None]] = set()  # held until written (a task nobody holds may be collected)
        labels = ["key", "model_name"]
        self.requests = Counter("rostra_key_requests", "Model turns finished, per API key.", labels,
                                registry=registry)
        self.tokens = Counter("rostra_key_tokens", "Tokens per API key (kind: input, cached, output, reasoning).",
                              [*labels, "kind"], registry=registry)

    def observer(self, model: str) -> Callable[[Job, list[str]], None]:
        return lambda job, reasons: self.observe(model, job)

    def observe(self, model: str, job: Job) -> None:
        caller = current_caller.get()
        name = caller.name or (self.names.get(caller.tenant) if caller.tenant else None)
        stats = job.stats
        record = UsageRecord(caller.tenant, name, model, time.time(), stats.prompt_tokens,
                             stats.cached_tokens, stats.completion_tokens, stats.reasoning_tokens or 0, caller.batch)
        key = api_key_id(caller.tenant, name) or "none"
        self.requests.labels(key, model).inc()
        for kind, count in (("input", record.input_tokens), ("cached", record.cached_tokens),
                            ("output", record.output_tokens), ("reasoning", record.reasoning_tokens)):
            self.tokens.labels(key, model, kind).inc(count)
        task = asyncio.get_running_loop().create_task(self._write(record))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, record: UsageRecord) -> None:
        try:
            await self.store.record(record)
        except Exception:  # usage is bookkeeping: a failed write is logged, the answer is not lost for it
            log.exception("could not record usage for model %s", record.model)

    async def flush(self) -> None:
        """Wait for the writes under way (shutdown, tests)."""
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
