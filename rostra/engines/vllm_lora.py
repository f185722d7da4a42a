"""LoRA adapters on the vLLM engine (`--lora NAME=PATH`, a PEFT adapter directory): served as vLLM's own server
serves `--enable-lora --lora-modules NAME=PATH`.

vLLM runs a request with an adapter when it is given a `LoRARequest(name, int id, path)`; requests for different
adapters and the base share a batch (up to `max_loras` adapters in one step). The engine's LoRA settings come from the
adapters: `enable_lora`, `max_loras` (one slot per adapter given at start) and `max_lora_rank` (the largest adapter's
rank `r` from its adapter_config.json, rounded up to a rank vLLM accepts); `--vllm-arg` may set each of them itself
(e.g. `max_lora_rank=64` to leave room for adapters loaded later). Adapters loaded at runtime
(`load_lora`, vLLM's `/v1/load_lora_adapter`) go through vLLM's `add_lora`, which reads and checks the weights at
once, so a bad adapter is refused when it is loaded, not at its first request.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any, Sequence

from rostra.errors import InvalidRequest
from rostra.lora import LoraAdapter

# The ranks vLLM 0.32-0.33's LoRAConfig accepts for max_lora_rank (its MaxLoRARanks).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class AdapterProblem(ValueError):
    """An adapter that cannot be served: its folder or its config is missing or unreadable."""


def adapter_rank(path: str) -> int:
    """The adapter's LoRA rank: `r` of its PEFT adapter_config.json, or the largest of its `rank_pattern`."""
    config_path = Path(path) / "adapter_config.json"
    try:
        config = json.loads(config_path.read_text())
    except FileNotFoundError:
        raise AdapterProblem(f"{path}: not a PEFT adapter (no adapter_config.json)") from None
    except (OSError, ValueError) as exc:
        raise AdapterProblem(f"{config_path}: unreadable: {exc}") from None
    ranks = [config.get("r"), *(config.get("rank_pattern") or {}).values()]
    ranks = [rank for rank in ranks if isinstance(rank, int) and rank > 0]
    if not ranks:
        raise AdapterProblem(f"{config_path}: no LoRA rank (`r`)")
    return max(ranks)


def vllm_rank_bound(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds `rank`."""
    for bound in VLLM_LORA_RANKS:
        if rank <= bound:
            return bound
    raise AdapterProblem(f"LoRA rank {rank}: vLLM serves ranks up to {VLLM_LORA_RANKS[-1]}")


def lora_engine_kwargs(adapters: Sequence[LoraAdapter], extra: dict[str, Any]) -> dict[str, bool | int]:
    """vLLM's LoRA engine arguments for the adapters given at start, less those `--vllm-arg` sets itself."""
    if not adapters:
        return {}
    ranks = {}
    for adapter in adapters:
        try:
            ranks[adapter.name] = adapter_rank(adapter.path)
        except AdapterProblem as exc:
            raise AdapterProblem(f"--lora {adapter.name}: {exc}") from None
    kwargs: dict[str, bool | int] = {"enable_lora": True, "max_loras": len(adapters),
                                     "max_lora_rank": vllm_rank_bound(max(ranks.values()))}
    return {name: value for name, value in kwargs.items() if name not in extra}


@dataclasses.dataclass
class VllmAdapters:
    """The adapters served, by name, each with the LoRARequest vLLM runs it by (vLLM tells adapters by int id)."""

    enabled: bool  # vLLM started with LoRA (--lora, or --vllm-arg enable_lora=true): adapters can be loaded
    at_start: tuple[LoraAdapter, ...] = ()
    requests: dict[str, Any] = dataclasses.field(default_factory=dict)
    _ids: Any = dataclasses.field(default_factory=lambda: itertools.count(1))

    def names(self) -> tuple[str, ...]:
        return tuple(self.requests)

    def path(self, name: str) -> str | None:
        request = self.requests.get(name)
        return None if request is None else str(request.lora_path)

    def new_request(self, name: str, path: str) -> Any:
        from vllm.lora.request import LoRARequest

        return LoRARequest(lora_name=name, lora_int_id=next(self._ids), lora_path=str(Path(path).resolve()))

    def checked_request(self, name: str, path: str, base_name: str, max_rank: int) -> Any:
        """A LoRARequest for a new adapter, or a 400 that says why vLLM could not serve it."""
        if not self.enabled:
            raise InvalidRequest("LoRA adapters are off on this vLLM engine: start it with --lora NAME=PATH or "
                                 "--vllm-arg enable_lora=true", param="lora_name")
        if not name or name == base_name or name in self.requests:
            raise InvalidRequest(f"LoRA adapter {name!r}: the name is already served", param="lora_name")
        try:
            rank = adapter_rank(path)
        except AdapterProblem as exc:
            raise InvalidRequest(f"LoRA adapter {name!r}: {exc}", param="lora_path") from None
        if rank > max_rank:
            raise InvalidRequest(f"LoRA adapter {name!r}: rank {rank} is over this engine's max_lora_rank {max_rank} "
                                 "(start with --vllm-arg max_lora_rank=N)", param="lora_path")
        return self.new_request(name, path)
