"""Parser registries: name -> "module:Class" in a package, imported on first use, so a format's
module (and whatever it needs) loads only when a server selects it."""

from __future__ import annotations

import importlib


def load_class(registry: dict[str, str], package: str, kind: str, name: str) -> type:
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; choose from {', '.join(sorted(registry))}")
    module, cls = registry[name].split(":")
    return getattr(importlib.import_module(f"{package}.{module}"), cls)
