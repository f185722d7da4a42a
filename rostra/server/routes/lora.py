"""vLLM's admin routes for LoRA adapters, opened only by an --admin-key (rostra/http/middleware.py: ADMIN_PATHS):

- `POST /v1/load_lora_adapter {"lora_name", "lora_path"}`: the adapter is loaded over the model and served by its
  name; `/v1/models` lists it with its `parent`. rostra's extension: `base_model` names the model it goes over where
  several are served (default: the first). `load_inplace: true` (vLLM's) replaces an adapter of that name.
- `POST /v1/unload_lora_adapter {"lora_name"}`: unloaded (409 while requests use it).

Both answer as vLLM does: 200 and the text "Success: LoRA adapter 'NAME' added successfully." (or "removed"); a
name loaded already is a 400, an adapter file or name not found a 404, one the engine cannot read a 400.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict

from rostra.errors import InvalidRequest, NotFound
from rostra.http.context import server_context
from rostra.http.request_body import parse_body
from rostra.lora import LoraAdapter

router = APIRouter()
log = logging.getLogger("rostra.lora")


class LoadLoraAdapter(BaseModel):
    """vLLM's LoadLoRAAdapterRequest, and the model it goes over."""
    model_config = ConfigDict(extra="forbid")
    lora_name: str
    lora_path: str
    load_inplace: bool = False
    base_model: str | None = None


class UnloadLoraAdapter(BaseModel):
    """vLLM's UnloadLoRAAdapterRequest (its `lora_int_id` names vLLM's own numbering: rostra has none)."""
    model_config = ConfigDict(extra="forbid")
    lora_name: str


async def load_lora_adapter(request: Request):
    body = await parse_body(request, LoadLoraAdapter)
    if not body.lora_name.strip() or not body.lora_path.strip():
        raise InvalidRequest("Both 'lora_name' and 'lora_path' must be provided.", param="lora_name")
    models = server_context(request).models
    if body.load_inplace and body.lora_name in models.names():
        await models.unload_adapter(body.lora_name)
    adapter = LoraAdapter(body.lora_name.strip(), body.lora_path.strip())
    try:
        slot = await models.load_adapter(adapter, body.base_model)
    except FileNotFoundError as exc:
        raise NotFound(f"No adapter found for {adapter.name}: {exc}",
                       param="lora_path") from None
    except (ValueError, OSError) as exc:  # not an adapter, not one for this model
        raise InvalidRequest(f"LoRA adapter {adapter.name}: {exc}", param="lora_path") from None
    log.info("loaded LoRA adapter %s from %s over %s", adapter.name, adapter.path, slot.spec.name)
    return PlainTextResponse(f"Success: LoRA adapter '{adapter.name}' added successfully.")


async def unload_lora_adapter(request: Request):
    body = await parse_body(request, UnloadLoraAdapter)
    await server_context(request).models.unload_adapter(body.lora_name)
    log.info("unloaded LoRA adapter %s", body.lora_name)
    return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")


router.add_api_route("/v1/load_lora_adapter", load_lora_adapter, methods=["POST"])
router.add_api_route("/v1/unload_lora_adapter", unload_lora_adapter, methods=["POST"])
