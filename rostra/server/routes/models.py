"""The Models API: GET /v1/models and GET /v1/models/{id}: every servable model, loaded or not.

Extensions to OpenAI's model object: `state` (loaded, loading, unloading or unloaded; `downloading` while its first
load downloads it from the Hub, with `download: {bytes_done, bytes_total}`), `max_model_len`
(once loaded), `input_modalities` (["text"], or ["text", "image"] for a model that sees images, as OpenRouter's
model objects say it; before its first load only a llama.cpp model's is known: it sees with a projector), and
`generation_defaults`: what a request that leaves those fields out gets (before the model's first load, only what
its settings give: the model's own recommendation is read when it loads) and `generation_defaults_from`: where they
come from (the model's GGUF or generation_config.json, llama.cpp's defaults, openai, flags), and once loaded `parsers`: the tool-call
and reasoning parsers reading its output and why (a flag, or what its chat template renders: parsing/dialect.py).

Codex asks `GET /v1/models?client_version=...` and reads a `models` array of its own shape: with that query
the answer carries it beside OpenAI's `data` (rostra/server/codex_catalog.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from fastapi import APIRouter, Request

from rostra import generation_defaults
from rostra.errors import NotFound
from rostra.http.context import ServerContext, server_context
from rostra.hub.progress import DownloadState
from rostra.hub.progress import downloading as hub_download
from rostra.hub.reference import HubReference
from rostra.models.manager import ModelSlot
from rostra.parsing.dialect import Dialect
from rostra.server.codex_catalog import CodexModel, codex_model

router = APIRouter()


def parsers_card(parsers: Dialect) -> dict[str, Any]:
    card: dict[str, Any] = {"tool_calls": parsers.tool_parser, "reasoning": parsers.reasoning_parser,
                            "why": parsers.reason}
    if parsers.derived is not None:  # a parser built from the template's own call markup
        card["markup"] = parsers.derived.describe()
    return card


def model_cards(context: ServerContext, slot: ModelSlot) -> list[dict]:
    bundle = slot.bundle
    if bundle is not None:
        cards = []
        for name in bundle.served_names():
            info = bundle.engine.model_info(name)
            cards.append({"id": name, "object": "model", "created": context.started, "owned_by": info.owned_by,
                          "state": slot.state, "max_model_len": info.context_length,
                          "input_modalities": ["text", "image"] if sees_images(slot, name) else ["text"],
                          "generation_defaults": dict(bundle.generation_defaults.values),
                          "generation_defaults_from": bundle.generation_defaults.source,
                          "parsers": parsers_card(bundle.parsers)})
            if name in bundle.engine.adapters:  # a LoRA adapter: its base, as vLLM lists one
                cards[-1].update(parent=bundle.served_names()[0], root=bundle.engine.adapter_path(name))
        return cards
    settings = slot.spec.settings
    shown = unloaded_defaults(settings.generation_config, settings.override_generation_config)
    card = {"object": "model", "created": context.started, "owned_by": "rostra", "state": slot.state,
            "generation_defaults": dict(shown.values), "generation_defaults_from": shown.source}
    sees = sees_images(slot, slot.spec.name)
    if sees is not None:
        card["input_modalities"] = ["text", "image"] if sees else ["text"]
    if slot.error:
        card["load_error"] = slot.error
    download = downloading(settings.model) if slot.state == "loading" and settings.engine == "llamacpp" else None
    if download is not None:  # its first load is downloading it from the Hub
        card["state"] = "downloading"
        card["download"] = {"bytes_done": download.done, "bytes_total": download.total}
    adapters = {adapter.name: adapter.path for adapter in settings.lora}  # a LoRA adapter: its base, as vLLM lists
    return [{"id": name, **card, **({"parent": slot.spec.name, "root": adapters[name]} if name in adapters else {})}
            for name in slot.spec.names]


@dataclass(frozen=True)
class ShownDefaults:
    """A model's generation defaults as its card shows them, and where they come from."""

    values: Mapping[str, Any]
    source: str


def unloaded_defaults(mode: str, override: str | dict | None) -> ShownDefaults:
    """A model not loaded yet: the defaults its settings give; the model's own recommendation is read when it loads."""
    try:
        defaults = generation_defaults.resolve(mode, {}, override)
    except ValueError:
        return ShownDefaults({}, "its settings, which its load will refuse")
    source = defaults.source.replace("openai", "the model (read when it loads)", 1) if mode == "auto" \
        else defaults.source
    return ShownDefaults(dict(defaults.values), source)


def downloading(model: str | None) -> DownloadState | None:
    reference = HubReference.parse(model) if model else None  # (no file check: a path is never downloading)
    return hub_download(reference.label) if reference else None


def sees_images(slot: ModelSlot, name: str) -> bool | None:
    """Whether `name` takes images: its engine says once loaded; before, a llama.cpp model sees exactly when it has
    a projector (--mmproj, one found beside it, or its models-config entry's), another engine's is not known yet."""
    if slot.bundle is not None:
        return slot.bundle.engine.takes_images(name)
    settings = slot.spec.settings
    if settings.engine != "llamacpp":
        return None
    if not settings.mmproj and settings.model and HubReference.parse(settings.model):
        return None  # a Hub repository's projector is known once it is listed, at its first load
    return bool(settings.mmproj)


def codex_models(slots: list[ModelSlot]) -> list[CodexModel]:
    """Codex's catalog entries, in the order /v1/models lists the models (Codex's priority)."""
    entries: list[CodexModel] = []
    for slot in slots:
        task = slot.bundle.engine.task if slot.bundle is not None else slot.spec.settings.task
        if task in ("embed", "rerank"):  # not a model Codex can talk to
            continue
        reasoning = (slot.bundle.parsers.reasoning_parser if slot.bundle is not None
                     else slot.spec.settings.reasoning_parser) is not None
        names = slot.bundle.served_names() if slot.bundle is not None else slot.spec.names
        for name in names:
            length = slot.bundle.engine.model_info(name).context_length if slot.bundle is not None else None
            entries.append(codex_model(name, len(entries), length, reasoning, images=bool(sees_images(slot, name))))
    return entries


@router.get("/v1/models")
async def list_models(request: Request, client_version: str | None = None):
    context = server_context(request)
    await context.models.rescan()
    listing: dict = {"object": "list",
                     "data": [card for slot in context.models.slots for card in model_cards(context, slot)]}
    if client_version is not None:  # Codex's catalog request
        listing["models"] = [entry.model_dump() for entry in codex_models(context.models.slots)]
    return listing


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str):
    context = server_context(request)
    for slot in context.models.slots:
        for card in model_cards(context, slot):
            if card["id"] == model_id:
                return card
    raise NotFound(f"The model '{model_id}' does not exist", param="model", code="model_not_found")
