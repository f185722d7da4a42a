"""LoRA adapters on the llama.cpp engine: GGUF adapter files (llama.cpp's convert_lora_to_gguf.py writes them),
loaded with the model at scale 0 and applied per request (`lora` in a request's body). llama.cpp's server loads
adapters only when it is made, so loading or unloading one while serving makes it again (LlamaCppEngine)."""

from __future__ import annotations

from pathlib import Path

from rostra.gguf_metadata import GGUFError, read_gguf_metadata
from rostra.lora import AdapterRequests, LoraAdapter


def check_gguf_adapter(adapter: LoraAdapter, architecture: str) -> None:
    """A GGUF LoRA adapter for this model's architecture, checked before llama.cpp reads it (a bad file there would
    take the model's server down while it is made again)."""
    if not Path(adapter.path).is_file():
        raise FileNotFoundError(f"adapter file not found: {adapter.path}")
    try:
        metadata = read_gguf_metadata(adapter.path)
    except (GGUFError, OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{adapter.path}: not a GGUF file ({exc})") from None
    if metadata.get("general.type") != "adapter" or metadata.get("adapter.type") != "lora":
        raise ValueError(f"{adapter.path}: not a GGUF LoRA adapter (general.type adapter, adapter.type lora)")
    if architecture and metadata.get("general.architecture") != architecture:
        raise ValueError(f"{adapter.path}: an adapter for {metadata.get('general.architecture')}, "
                         f"not for this {architecture} model")


class AdapterUse:
    """Which adapter each request runs with, and whether it holds a slot yet (vllm:lora_requests_info)."""

    def __init__(self) -> None:
        self._adapters: dict[str, str] = {}  # request id -> adapter
        self._slotted: set[str] = set()

    def waiting(self, request_id: str, adapter: str | None) -> None:
        if adapter is not None:
            self._adapters[request_id] = adapter

    def running(self, request_id: str) -> None:
        self._slotted.add(request_id)

    def done(self, request_id: str) -> None:
        self._adapters.pop(request_id, None)
        self._slotted.discard(request_id)

    def report(self, loaded: int) -> AdapterRequests:
        uses = list(self._adapters.items())
        return AdapterRequests(frozenset(adapter for request, adapter in uses if request in self._slotted),
                               frozenset(adapter for request, adapter in uses if request not in self._slotted),
                               max_loras=loaded)
