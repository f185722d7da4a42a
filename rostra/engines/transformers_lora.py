"""PEFT LoRA adapters over the transformers engine's model: several at once, each request its own.

The adapters are loaded into one PeftModel over the base weights (PEFT's multi-adapter support: the first by
`PeftModel.from_pretrained`, the others by `load_adapter`); a forward pass names each row's adapter with
`adapter_names` (PEFT's mixed-batch inference, "__base__" for a row without one), so requests for different
adapters and the base share the decode batch. The base weights are never merged: the base stays exact.

Only the decode worker thread touches the model (BatchDecoder runs the loads and unloads between two steps), so a
load at run time never meets a forward pass half way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from rostra.lora import LoraAdapter

BASE = "__base__"  # PEFT's name for "no adapter" in adapter_names


class PeftForward(TypedDict, total=False):
    adapter_names: list[str]  # each row's adapter, for PeftModel's forward


def check_adapter_dir(adapter: LoraAdapter) -> None:
    """A PEFT adapter directory (adapter_config.json beside its weights), of LoRA type."""
    config = Path(adapter.path) / "adapter_config.json"
    if not config.is_file():
        raise FileNotFoundError(f"LoRA adapter {adapter.name}: no PEFT adapter at {adapter.path} "
                                "(a directory with adapter_config.json and adapter_model.safetensors)")
    kind = json.loads(config.read_text()).get("peft_type")
    if kind not in ("LORA", None):
        raise ValueError(f"LoRA adapter {adapter.name}: {adapter.path} is a {kind} adapter, not LoRA")


class PeftAdapters:
    """The adapters loaded over `base`; `model` is what forward passes run (the base itself while none is)."""

    def __init__(self, base: Any):
        self.base = base
        self.peft: Any = None

    @property
    def model(self) -> Any:
        return self.peft if self.peft is not None else self.base

    def load(self, adapter: LoraAdapter) -> None:
        """Worker thread only."""
        from peft import PeftModel  # noqa: PLC0415  (only servers with adapters need peft)

        check_adapter_dir(adapter)
        if self.peft is None:
            self.peft = PeftModel.from_pretrained(self.base, adapter.path, adapter_name=adapter.name,
                                                  is_trainable=False).eval()
        else:
            self.peft.load_adapter(adapter.path, adapter_name=adapter.name, is_trainable=False)

    def unload(self, name: str) -> None:
        """Worker thread only. The last adapter gone, the LoRA layers go too: the base runs as it was."""
        if self.peft is None:
            return
        if set(self.peft.peft_config) == {name}:
            self.base = self.peft.unload()  # the LoRA layers replaced by their base layers, nothing merged
            self.peft = None
        else:
            self.peft.delete_adapter(name)

    def forward_options(self, adapters: list[str | None]) -> PeftForward:
        """The keywords naming each row's adapter (none while no adapter is loaded)."""
        if self.peft is None:
            return {}
        return {"adapter_names": [BASE if name is None else name for name in adapters]}
