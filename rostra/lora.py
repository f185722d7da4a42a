"""`--lora NAME=PATH`: LoRA adapters over the served model, each served under its own model name.

A request naming NAME runs on the base model with that adapter applied (llama.cpp: a GGUF adapter, loaded with the
model and applied per request, so requests for different adapters and the base share one server); `/v1/models`
lists each adapter with its base as `parent`, as vLLM does. A --models-config entry lists its own (`lora:`), and
the admin routes vLLM has (/v1/load_lora_adapter, /v1/unload_lora_adapter) load and unload them while serving.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LoraAdapter:
    name: str
    path: str

    @classmethod
    def parse(cls, text: str) -> LoraAdapter:
        name, equals, path = text.partition("=")
        if not equals or not name.strip() or not path.strip():
            raise ValueError(f"--lora {text!r}: expected NAME=PATH, e.g. 'sql-expert=adapters/sql.gguf'")
        return cls(name.strip(), path.strip())


@dataclass(frozen=True)
class AdapterRequests:
    """The adapters of the requests an engine runs and of those waiting for it (vLLM's `vllm:lora_requests_info`
    labels: each adapter named once however many requests use it), and how many adapters one batch can mix."""
    running: frozenset[str] = frozenset()
    waiting: frozenset[str] = frozenset()
    max_loras: int = 0


def adapters_from_config(given: Any, beside: Path) -> list[LoraAdapter]:
    """A --models-config entry's `lora`: a mapping of NAME: PATH, or a list of NAME=PATH strings or of
    {name, path} mappings. A relative path that exists beside the config file is read from there."""
    if isinstance(given, dict):
        pairs = list(given.items())
    elif isinstance(given, list):
        pairs = [_pair(item) for item in given]
    else:
        raise ValueError("lora: expected a mapping of NAME: PATH or a list of NAME=PATH")
    adapters = []
    for name, path in pairs:
        if not isinstance(name, str) or not name.strip() or not isinstance(path, str) or not path.strip():
            raise ValueError(f"lora: {name!r}: expected a name and a path")
        local = Path(path).expanduser()
        if not local.is_absolute() and (beside / local).exists():
            local = beside / local
        adapters.append(LoraAdapter(name.strip(), str(local)))
    names = [adapter.name for adapter in adapters]
    if len(set(names)) < len(names):
        raise ValueError(f"lora: an adapter name given twice ({', '.join(names)})")
    return adapters


def _pair(item: Any) -> tuple[Any, Any]:
    if isinstance(item, str):
        adapter = LoraAdapter.parse(item)
        return adapter.name, adapter.path
    if isinstance(item, dict) and set(item) == {"name", "path"}:
        return item["name"], item["path"]
    raise ValueError(f"lora: {item!r}: expected NAME=PATH or {{name: NAME, path: PATH}}")
