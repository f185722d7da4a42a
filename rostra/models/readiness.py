"""Readiness: can the server take work now? (`GET /health/ready`; `/health` stays a cheap liveness check.)

A model counts against readiness when it must be up and is not: a model the server loads at start-up
(`preload`, resident, a single-model server's) that is not loaded yet (loading, failed, unloaded), or any
loaded model whose engine says it cannot take work (llama.cpp's server gone, slots held by no request). A
model loaded on demand is not waited for: a load balancer that pulled every replica out while one loads a
rarely used model would turn that load into an outage.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rostra.models.manager import ModelManager, ModelSlot


@dataclass(frozen=True)
class ModelReadiness:
    name: str
    state: str
    ready: bool
    reason: str | None
    running: int
    slots_free: int | None


@dataclass(frozen=True)
class Readiness:
    models: list[ModelReadiness]

    @property
    def ready(self) -> bool:
        return all(model.ready for model in self.models)

    @property
    def reasons(self) -> list[str]:
        return [f"{model.name}: {model.reason}" for model in self.models if model.reason]


async def readiness(models: ModelManager) -> Readiness:
    return Readiness(list(await asyncio.gather(*(_model_readiness(slot, len(models.slots) == 1)
                                                 for slot in models.slots))))


async def _model_readiness(slot: ModelSlot, only: bool) -> ModelReadiness:
    required = only or slot.spec.preload or slot.spec.resident
    engine = slot.bundle.engine if slot.bundle is not None and slot.state == "loaded" else None
    if engine is not None:
        reason = await engine.readiness()
    elif required:
        reason = f"the model is {slot.state}" + (f" (its last load failed: {slot.error})" if slot.error else "")
    else:
        reason = None
    return ModelReadiness(slot.spec.name, slot.state, reason is None, reason,
                          engine.running_requests() if engine else 0, engine.slots_free() if engine else None)
