"""`--lora NAME=PATH`: LoRA adapters over the served model, each served under its own model name.

A request naming NAME runs on the base model with that adapter applied (llama.cpp: a GGUF adapter, loaded with the
model and applied per request, so requests for different adapters and the base share one server); `/v1/models`
lists each adapter with its base as `parent`, as vLLM does.
"""

from __future__ import annotations

from dataclasses import dataclass


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
