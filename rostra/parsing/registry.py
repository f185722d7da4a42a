"""Parser registries: name -> "module:Class" in a package, imported on first use, so a format's
module (and whatever it needs) loads only when a server selects it."""

from __future__ import annotations

import importlib
from typing import TypeVar

T = TypeVar("T")


def load_class(registry: dict[str, str], package: str, kind: str, name: str, base: type[T]) -> type[T]:
    """The class `name` stands for, which must derive from `base` (a registry typo fails here)."""
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; choose from {', '.join(sorted(registry))}")
    module, cls = registry[name].split(":")
    loaded = getattr(importlib.import_module(f"{package}.{module}"), cls)
    if not (isinstance(loaded, type) and issubclass(loaded, base)):
        raise TypeError(f"{kind} {name!r}: {registry[name]} is not a {base.__name__}")
    return loaded
