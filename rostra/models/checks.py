"""Operator input checked at start-up: a value of the wrong type or out of range in `--models-config` (or on
the command line) is refused before the server starts, naming the model and the key, instead of surfacing as a
500 (or a process abort: `parallel: 100000` once did) at the first request that loads the model.

`parallel` is bounded by MAX_PARALLEL: llama.cpp's server gives each slot its own state and an HTTP thread,
and rostra gives each the whole context window, so the KV cache grows with parallel x context. Beyond a few
hundred slots no machine rostra targets holds it; the llama.cpp engine also checks the KV cache its GGUF
needs against the machine's memory when it is built (llamacpp.py, kv_cache_bytes).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from rostra.config import Settings

MAX_PARALLEL = 512
# The numeric settings and their ranges: (least, most), None for no bound.
RANGES: dict[str, tuple[float | None, float | None]] = {
    "parallel": (1, MAX_PARALLEL), "threads": (1, 1024), "max_model_len": (16, None),
    "cache_ram_mib": (-1, None), "speculative_draft": (1, 256), "upstream_retries": (0, 100),
    "upstream_timeout": (0.001, None), "health_check_interval": (0.001, None), "max_loaded_models": (1, None),
    "tensor_parallel_size": (1, 1024), "pipeline_parallel_size": (1, 1024), "gpu_memory_utilization": (0.01, 1.0),
}
_HINTS = typing.get_type_hints(Settings)


class SettingError(ValueError):
    """A setting of the wrong type or out of its range; the message names where and which."""


def check_types(own: dict[str, Any], where: str) -> None:
    """Each per-model setting has the type the server's own setting has (an int is a float; a bool is no
    number)."""
    for key, value in own.items():
        hint = _HINTS.get(key)
        if hint is not None and not _is(value, hint):
            raise SettingError(f"{where}: {key}: expected {_describe(hint)}, not {type(value).__name__} {value!r}")


def check_ranges(settings: Settings, where: str) -> None:
    for key, (least, most) in RANGES.items():
        value = getattr(settings, key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if (least is not None and value < least) or (most is not None and value > most):
            bounds = f"from {least:g}" + (f" to {most:g}" if most is not None else " up")
            raise SettingError(f"{where}: {key}: {value:g} is out of range ({bounds})")


def _is(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_is(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_is(element, item) for element in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint)).replace("list", "a list")


assert all(field.name in _HINTS for field in dataclasses.fields(Settings))
