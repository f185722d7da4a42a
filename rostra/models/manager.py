"""The model manager: every servable model, its state, and the loads and unloads between them.

Requests resolve `model` -> a lease -> the model's bundle. A lease keeps its model loaded until the request
(its stream, its background run) has ended; a model with leases is never unloaded. Loads happen when a
request names an unloaded model: concurrent requests share one load task (each waits at most its request
timeout; the load goes on for the others), a failed load is a 503 for the requests waiting on it, and the
next request tries again. Before a load, the least recently used idle models are unloaded while the new one
would exceed --max-loaded-models or --memory-budget; idle models are unloaded after their TTL.

Engine construction (reading a GGUF's metadata, a tokenizer) and loading run in threads (engine.start()),
never on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from rostra.config import Settings
from rostra.engines.base import Engine
from rostra.errors import APIError, Conflict, InvalidRequest, NotFound, RequestTimeout, ServiceUnavailable
from rostra.lora import LoraAdapter
from rostra.models.bundle import ModelBundle
from rostra.models.specs import ModelSpec, scan_models_dir

log = logging.getLogger("rostra.models")
State = Literal["unloaded", "loading", "loaded", "unloading"]
EngineFactory = Callable[[Settings], Engine]
BundleFactory = Callable[[ModelSpec, Engine], ModelBundle]


class LoadFailed(Exception):
    """An engine could not be built or started; the message says why."""


@dataclass(eq=False)
class ModelSlot:
    spec: ModelSpec
    state: State = "unloaded"
    bundle: ModelBundle | None = None
    leases: int = 0  # requests in flight on it
    waiting: int = 0  # requests waiting for it to load
    last_used: float = 0.0  # monotonic time its last lease was taken or given back
    transition: asyncio.Task[None] | None = None  # the load or unload under way
    error: str | None = None  # why its last load failed
    built: Engine | None = None  # an engine built already (a single-model server's): its next load starts it
    load_seconds: float | None = None

    @property
    def ttl(self) -> float | None:
        return self.spec.ttl

    @property
    def idle(self) -> bool:
        # (`waiting`: requests whose load just finished take their lease when they next run; until then the
        # model is theirs, not a victim for another model's load woken in the same turn)
        return (self.state == "loaded" and self.leases == 0 and self.waiting == 0 and self.transition is None
                and not self.spec.resident)


class Lease:
    """A model held for one request; `release()` (idempotent) gives it back."""

    __slots__ = ("bundle", "_slot", "_on_release")

    def __init__(self, slot: ModelSlot, on_release: Callable[[], None]):
        assert slot.bundle is not None
        self.bundle: ModelBundle = slot.bundle
        self._slot: ModelSlot | None = slot
        self._on_release = on_release

    def release(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.leases -= 1
            slot.last_used = time.monotonic()
            self._on_release()  # a load waiting for room may evict it now

    async def __aenter__(self) -> ModelBundle:
        return self.bundle

    async def __aexit__(self, *exc: Any) -> None:
        self.release()


class ModelManager:
    def __init__(self, specs: list[ModelSpec], settings: Settings, make_engine: EngineFactory,
                 make_bundle: BundleFactory, on_change: Callable[[ModelSlot], None] = lambda slot: None):
        self.settings = settings
        self.slots: list[ModelSlot] = []
        self._by_name: dict[str, ModelSlot] = {}
        self._make_engine = make_engine
        self._make_bundle = make_bundle
        self._on_change = on_change  # metrics: a model was added, loaded or unloaded
        self._reaper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._change = asyncio.Event()  # set (and replaced) when room may have been freed: see _reserve
        self.default_ttl = settings.model_ttl
        self.max_loaded = settings.max_loaded_models
        self.memory_budget = settings.memory_budget
        for spec in specs:
            self.add(spec)

    # -- the catalogue ---------------------------------------------------------------------------------
    def add(self, spec: ModelSpec, built: Engine | None = None) -> ModelSlot:
        slot = ModelSlot(spec, built=built)
        if spec.ttl is None:
            spec.ttl = self.default_ttl
        self.slots.append(slot)
        for name in spec.names:
            self._by_name[name] = slot
        self._on_change(slot)
        return slot

    async def rescan(self) -> None:
        """--models-dir again: models added since are servable, unloaded ones whose files are gone are not."""
        if not self.settings.models_dir:
            return
        found = await asyncio.to_thread(scan_models_dir, Path(self.settings.models_dir), self.settings)
        present = {spec.name for spec in found}
        for slot in [slot for slot in self.slots if slot.spec.source == "models-dir"]:
            if slot.spec.name not in present and slot.state == "unloaded" and slot.transition is None:
                self.slots.remove(slot)
                for name in slot.spec.names:
                    self._by_name.pop(name, None)
                log.info("model %s: its file is gone from --models-dir", slot.spec.name)
        for spec in found:
            if not any(name in self._by_name for name in spec.names):
                log.info("model %s: new in --models-dir", spec.name)
                self.add(spec)

    def resolve(self, name: str | None) -> ModelSlot:
        """The model a request names. With one model every request goes to it, and its own services check
        the name (as a single-model server always has: a gateway's names change with its upstreams)."""
        if name is not None:
            slot = self._by_name.get(name)
            if slot is not None:
                return slot
            for slot in self.slots:  # a gateway's models are its upstreams'
                if slot.spec.resident and slot.bundle is not None and name in slot.bundle.served_names():
                    return slot
        if len(self.slots) == 1 or (name is None and self.slots):
            return self.slots[0]
        raise NotFound(f"The model '{name}' does not exist. Served: {', '.join(self.names())}.",
                       param="model", code="model_not_found")

    def names(self) -> list[str]:
        names = []
        for slot in self.slots:
            names += slot.bundle.served_names() if slot.bundle is not None else slot.spec.names
        return names

    def loaded(self) -> list[ModelSlot]:
        return [slot for slot in self.slots if slot.state == "loaded"]

    def chat_for(self, name: str) -> Any:
        """The ChatService of a model a request holds a lease on (the Responses API's turns)."""
        bundle = self.resolve(name).bundle
        if bundle is None:
            raise ServiceUnavailable(f"the model '{name}' is not loaded", param="model", code="model_not_loaded")
        return bundle.chat

    # -- leases ----------------------------------------------------------------------------------------
    async def acquire(self, name: str | None) -> Lease:
        """A lease on the model `name` names, loading it first if need be (waiting at most the request timeout)."""
        timeout = self.settings.request_timeout
        try:
            slot = self.resolve(name)
        except NotFound:
            if not self.settings.models_dir:
                raise
            await self.rescan()  # a file dropped into --models-dir since
            slot = self.resolve(name)
        while slot.state != "loaded":  # (no await between this check and the lease below)
            slot.waiting += 1
            try:
                async with asyncio.timeout(timeout):
                    await self._loaded(slot)
            except TimeoutError:
                raise RequestTimeout(f"the model '{slot.spec.name}' is still loading after {timeout} s "
                                     "(--request-timeout); retry shortly", param="model",
                                     code="model_loading") from None
            finally:
                slot.waiting -= 1
        slot.leases += 1
        slot.last_used = time.monotonic()
        return Lease(slot, self._changed)

    async def _loaded(self, slot: ModelSlot) -> None:
        while slot.state != "loaded":
            if slot.transition is None:
                await self._reserve(slot)
                if slot.transition is None and slot.state == "unloaded":
                    # Reserved: counted as loading from this very moment (no await since _reserve's check),
                    # so a load of another model decided in the same loop turn sees it.
                    slot.state = "loading"
                    slot.transition = self._spawn(self._load(slot))
                continue
            # Shielded: a waiter that gives up (its timeout, a client gone) leaves the load to the others.
            await asyncio.shield(slot.transition)

    async def _reserve(self, loading: ModelSlot) -> None:
        """Until `loading` fits the limits (--max-loaded-models, --memory-budget), counting the models being
        loaded: least recently used idle models are unloaded for it; when every model held is in use, it
        waits for one to become idle (within the request's timeout). Returns without an await when it fits,
        so the caller's reservation follows the check in the same turn."""
        if self._alone_too_large(loading):
            raise ServiceUnavailable(f"the model '{loading.spec.name}' (about {loading.spec.size_bytes / 1e6:.0f} "
                                     f"MB) is larger than --memory-budget", param="model", code="model_too_large")
        while self._over_limits(loading) and loading.transition is None and loading.state == "unloaded":
            idle = [slot for slot in self.slots if slot.idle and slot is not loading]
            if idle:
                victim = min(idle, key=lambda slot: slot.last_used)
                task = self._begin_unload(victim, f"least recently used, making room for {loading.spec.name}")
                if task is not None:
                    await asyncio.shield(task)
            else:
                await self._change.wait()

    def _changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    def _alone_too_large(self, loading: ModelSlot) -> bool:
        return (not loading.spec.resident and self.memory_budget is not None
                and loading.spec.size_bytes > self.memory_budget)

    # -- load ------------------------------------------------------------------------------------------
    async def load(self, name: str) -> ModelSlot:
        """Load a model now (admin route, --preload); a model loaded already stays as it is."""
        slot = self.resolve(name)
        await self._loaded(slot)
        slot.last_used = time.monotonic()
        return slot

    async def load_adapter(self, adapter: LoraAdapter, base: str | None) -> ModelSlot:
        """A LoRA adapter loaded over model `base` (the first model if None, loaded now if it is not), served by its
        name from now on; kept in the model's settings, so that a reload of the model loads it again."""
        if adapter.name in self.names() or adapter.name in self._by_name:
            raise InvalidRequest(f"The lora adapter '{adapter.name}' has already been loaded.", param="lora_name")
        slot = await self.load(base if base is not None else self.slots[0].spec.name)
        if slot.bundle is None:  # unloaded again meanwhile (its TTL, an admin)
            raise Conflict(f"model {slot.spec.name} was unloaded while the adapter was being loaded: try again")
        await slot.bundle.engine.load_adapter(adapter)
        slot.spec.settings = dataclasses.replace(slot.spec.settings, lora=[*slot.spec.settings.lora, adapter])
        self._by_name[adapter.name] = slot
        return slot

    async def unload_adapter(self, name: str) -> None:
        """Unload a LoRA adapter (Conflict while requests use it); its model stays as it is."""
        slot = next((slot for slot in self.slots if any(a.name == name for a in slot.spec.settings.lora)), None)
        if slot is None:
            raise NotFound(f"The lora adapter '{name}' cannot be found.", param="lora_name")
        if slot.bundle is not None:
            await slot.bundle.engine.unload_adapter(name)
        lora = [adapter for adapter in slot.spec.settings.lora if adapter.name != name]
        slot.spec.settings = dataclasses.replace(slot.spec.settings, lora=lora)
        self._by_name.pop(name, None)

    async def _load(self, slot: ModelSlot) -> None:
        spec = slot.spec
        slot.state, started = "loading", time.monotonic()
        try:
            log.info("loading model %s (%s%s)...", spec.name, spec.settings.model or spec.settings.engine,
                     f", about {spec.size_bytes / 1e6:.0f} MB" if spec.size_bytes else "")
            engine, slot.built = slot.built, None
            if engine is None:
                engine = await asyncio.to_thread(self._built, spec)
            try:
                await engine.start()
                # (off the event loop: it compiles the chat template and renders its tool-call probe)
                bundle = await asyncio.to_thread(self._make_bundle, spec, engine)
            except BaseException:
                await _closed(engine)
                raise
        except (Exception, asyncio.CancelledError) as exc:
            slot.state = "unloaded"
            if isinstance(exc, asyncio.CancelledError):
                raise
            slot.error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, LoadFailed) else str(exc)
            log.error("model %s failed to load: %s", spec.name, slot.error)
            raise ServiceUnavailable(f"the model '{spec.name}' could not be loaded: {slot.error}", param="model",
                                     code="model_load_failed") from exc
        finally:
            slot.transition = None
            self._changed()
        slot.bundle, slot.state, slot.error = bundle, "loaded", None
        slot.load_seconds = time.monotonic() - started
        slot.last_used = time.monotonic()
        log.info("model %s loaded in %.1f s", spec.name, slot.load_seconds)
        self._on_change(slot)

    def _built(self, spec: ModelSpec) -> Engine:
        """The engine of a spec, built in a thread. The registry reports bad settings with SystemExit (right
        at start-up); here it is one model's load failure, and must not reach the event loop as SystemExit."""
        try:
            return self._make_engine(spec.settings)
        except SystemExit as exc:
            raise LoadFailed(str(exc.code).removeprefix("rostra: ")) from None

    def _over_limits(self, loading: ModelSlot) -> bool:
        if loading.spec.resident:
            return False
        held = [slot for slot in self.slots
                if slot is not loading and not slot.spec.resident and slot.state != "unloaded"]
        if self.max_loaded is not None and len(held) + 1 > self.max_loaded:
            return True
        if self.memory_budget is not None:
            return sum(slot.spec.size_bytes for slot in held) + loading.spec.size_bytes > self.memory_budget
        return False

    # -- unload ----------------------------------------------------------------------------------------
    async def unload(self, name: str) -> ModelSlot:
        """Unload a model now (admin route); one with requests in flight is refused (409)."""
        slot = self.resolve(name)
        if slot.transition is not None:
            await asyncio.shield(slot.transition)
        if slot.state == "unloaded":
            return slot
        if slot.leases:
            raise Conflict(f"the model '{slot.spec.name}' has {slot.leases} request(s) in flight; unload it when "
                           "they have finished", param="model", code="model_busy")
        task = self._begin_unload(slot, "asked by an admin")
        if task is not None:
            await asyncio.shield(task)
        return slot

    def _begin_unload(self, slot: ModelSlot, why: str) -> asyncio.Task[None] | None:
        """loaded -> unloading, at once: from this moment no lease is granted on it (`acquire` grants only on
        a loaded model, in the same turn it checks), so the engine closed below is held by no request."""
        if not (slot.state == "loaded" and slot.leases == 0 and slot.transition is None):
            return None
        bundle, slot.bundle, slot.state = slot.bundle, None, "unloading"
        slot.transition = self._spawn(self._unload(slot, bundle, why))
        return slot.transition

    async def _unload(self, slot: ModelSlot, bundle: ModelBundle | None, why: str) -> None:
        assert slot.leases == 0, "a model with leases is never unloaded"
        self._on_change(slot)
        log.info("unloading model %s (%s)", slot.spec.name, why)
        try:
            if bundle is not None:
                await _closed(bundle.engine)
        finally:
            slot.state, slot.transition = "unloaded", None
            self._changed()
        log.info("model %s unloaded", slot.spec.name)

    # -- the server's life -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the preloaded models (a failure stops the start-up), then keep the TTLs."""
        for slot in list(self.slots):
            if slot.spec.preload or slot.spec.resident:
                try:
                    await self._loaded(slot)
                except ServiceUnavailable as exc:
                    raise RuntimeError(exc.message) from None
        ttls = [slot.ttl for slot in self.slots if slot.ttl] + ([self.default_ttl] if self.default_ttl else [])
        if ttls:
            self._reaper = self._spawn(self._reap(min(1.0, max(0.05, min(ttls) / 4))))

    async def _reap(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for slot in self.slots:
                if slot.idle and slot.ttl and now - slot.last_used >= slot.ttl:
                    self._begin_unload(slot, f"idle for {slot.ttl:g} s")

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for slot in self.slots:
            if slot.transition is not None:
                try:
                    await asyncio.shield(slot.transition)
                except (APIError, asyncio.CancelledError):
                    pass
            if slot.bundle is not None:
                await _closed(slot.bundle.engine)
                slot.bundle, slot.state = None, "unloaded"
            elif slot.built is not None:
                await _closed(slot.built)

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failed load is reported to its waiters and logged, not again


async def _closed(engine: Engine) -> None:
    try:
        await engine.close()
    except Exception:
        log.exception("closing an engine failed")
