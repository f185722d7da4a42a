"""What a server can serve: one ModelSpec per model, from the command line's MODELs, `--models-dir` and
`--models-config` (YAML).

A spec is the server's Settings with the model's own fields replaced (engine, names, template, parsers,
defaults, task...): the engine registry and the bundle factory read a model's settings exactly as they read
a single-model server's, so a model configured here behaves as the same `rostra serve MODEL --flags` would.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rostra.config import Settings
from rostra.lora import adapters_from_config
from rostra.models.checks import SettingError, check_ranges, check_types

# The settings a model may have of its own (the flags of `rostra serve` that describe the model).
PER_MODEL_SETTINGS = frozenset({
    "model", "engine", "served_model_name", "chat_template", "max_model_len", "parallel", "threads", "dtype",
    "device", "task", "pooling", "matryoshka", "tool_call_parser", "strict_tool_parsing", "reasoning_parser",
    "reasoning_field", "generation_config", "override_generation_config", "raw_special_tokens", "script",
    "tokenizer", "upstreams", "upstream_retries", "upstream_timeout", "health_check_interval",
    "speculative", "speculative_draft", "cache_ram_mib", "flash_attn", "mmproj", "mmap", "lora",
})
# Keys of a --models-config entry that are not settings: its name, idle time to unload, load at start-up.
ENTRY_KEYS = frozenset({"name", "ttl", "preload", "upstream"})
CHECKPOINT_WEIGHTS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)


class ModelConfigError(ValueError):
    """A bad --models-config, --models-dir or --memory-budget (reported at start-up)."""


@dataclass
class ModelSpec:
    name: str  # the canonical name: the first served name, /metrics' `model_name` label
    settings: Settings  # the server's settings with this model's own
    ttl: float | None = None  # seconds idle before it is unloaded; None: the server's --model-ttl
    preload: bool = False
    source: str = "command line"  # where it was declared: "command line", "models-dir", "models-config"

    @property
    def names(self) -> list[str]:
        """The names requests may use for it (a gateway's come from its upstreams once it is up), then its LoRA
        adapters' (each the model with that adapter)."""
        return [*(self.settings.served_model_name or [self.name]), *(adapter.name for adapter in self.settings.lora)]

    @property
    def resident(self) -> bool:
        """A gateway holds no weights: it is started once and never counted, evicted or unloaded for idleness."""
        return self.settings.engine == "remote"

    @cached_property
    def size_bytes(self) -> int:
        """The memory the model is estimated to take: a GGUF's file size, a checkpoint's weight files. An
        estimate (the KV cache and the runtime come on top), used only for --memory-budget."""
        return estimated_size(self.settings.model, self.settings.engine)


def estimated_size(model: str | None, engine: str) -> int:
    if engine in ("remote", "scripted"):
        return 0
    if model is None:  # the embedded model
        from rostra.embedded import embedded_model_path

        return embedded_model_path().stat().st_size
    path = Path(model)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(file.stat().st_size for pattern in CHECKPOINT_WEIGHTS for file in path.rglob(pattern))
    return 0  # a hub id: not known before it is downloaded


def parse_size(text: str) -> int:
    """`12GB`, `512MiB`, `1.5g` or plain bytes -> bytes (decimal units, binary with `i`)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ModelConfigError(f"--memory-budget: not a size: {text!r} (e.g. 12GB, 512MiB)")
    number, unit, binary = match.groups()
    power = " kmgt".index(unit.lower() or " ")
    return int(float(number) * (1024 if binary else 1000) ** power)


def model_spec(settings: Settings, source: str, *, name: str | None = None, ttl: float | None = None,
               preload: bool = False, **own: Any) -> ModelSpec:
    """A spec from the server's settings and the model's own ones."""
    unknown = sorted(set(own) - PER_MODEL_SETTINGS)
    if unknown:
        raise ModelConfigError(f"{source}: unknown model settings {', '.join(unknown)}; a model may set "
                               f"{', '.join(sorted(PER_MODEL_SETTINGS | ENTRY_KEYS))}")
    served = own.pop("served_model_name", None)
    if isinstance(served, str):
        served = [served]
    try:
        check_types({**own, **({"served_model_name": served} if served is not None else {})}, source)
    except SettingError as exc:
        raise ModelConfigError(str(exc)) from None
    model = own.get("model", settings.model)
    engine = own.get("engine") or engine_for(model, settings.engine)
    own["engine"] = engine
    if engine == "remote":
        if served:
            raise ModelConfigError(f"{source}: a gateway serves its upstreams' model names (no served_model_name)")
        names: list[str] = []
        canonical = name or "gateway"
    else:
        names = list(served or ([name] if name else [default_name(model)]))
        if name and name not in names:
            names.insert(0, name)
        canonical = names[0]
    own["served_model_name"] = names
    merged = dataclasses.replace(settings, **own)
    try:
        check_ranges(merged, f"{source} ({canonical})")
    except SettingError as exc:
        raise ModelConfigError(str(exc)) from None
    return ModelSpec(canonical, merged, ttl, preload, source)


def engine_for(model: str | None, default: str) -> str:
    """A checkpoint directory is transformers' (when no other engine is asked for); a file is llama.cpp's."""
    if default == "llamacpp" and model is not None and Path(model).is_dir():
        return "transformers"
    return default


def default_name(model: str | None) -> str:
    if model is None:
        from rostra.embedded import EMBEDDED_MODEL_NAME

        return EMBEDDED_MODEL_NAME
    path = Path(model)
    if path.suffix == ".gguf":
        return path.stem
    if path.exists():
        return path.name
    from rostra.hub.reference import hub_reference

    reference = hub_reference(model)  # a Hub GGUF repository: OWNER/NAME[:QUANT], whatever the spelling
    return reference.label if reference else model.rstrip("/")


def scan_models_dir(directory: Path, settings: Settings) -> list[ModelSpec]:
    """Every model in a directory: GGUF files, and checkpoint directories (a config.json in them). A GGUF
    split into parts (`-00001-of-00003.gguf`) is served from its first part."""
    if not directory.is_dir():
        raise ModelConfigError(f"--models-dir: not a directory: {directory}")
    specs = []
    paths = sorted(directory.iterdir())
    # A projector beside the models (as llama.cpp's router and LM Studio find it): theirs, not a model.
    projectors = [path for path in paths if path.is_file() and is_mmproj(path)]
    for path in paths:
        if path.is_file() and path.suffix == ".gguf" and not is_mmproj(path):
            part = re.search(r"-(\d+)-of-\d+$", path.stem)
            if part and int(part.group(1)) > 1:
                continue  # a later part of a split GGUF
            # One projector: the models' (several: which is whose cannot be told; set them in --models-config).
            own: dict[str, Any] = {"mmproj": str(projectors[0])} if len(projectors) == 1 else {}
            specs.append(model_spec(settings, "models-dir", model=str(path), engine="llamacpp", **own))
        elif path.is_dir() and (path / "config.json").is_file():
            engine = settings.engine if settings.engine != "llamacpp" else "transformers"
            specs.append(model_spec(settings, "models-dir", model=str(path), engine=engine))
    return specs


def is_mmproj(path: Path) -> bool:
    return path.suffix == ".gguf" and path.name.lower().startswith("mmproj")


def read_models_config(path: Path, settings: Settings) -> list[ModelSpec]:
    """`--models-config FILE`: `models:` a list of entries, each the settings of one model, e.g.

        models:
          - name: smol
            model: /models/SmolLM2-135M-Instruct.Q4_1.gguf
            mmproj: /models/mmproj-SmolLM2.gguf  # it sees images
            override_generation_config: {temperature: 0.2}
            ttl: 600
          - name: minilm
            model: /models/all-MiniLM-L6-v2
            task: embed
    """
    import yaml

    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ModelConfigError(f"--models-config {path}: {exc}") from None
    entries = document.get("models") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ModelConfigError(f"--models-config {path}: expected `models:` and a list of models")
    specs = []
    for index, entry in enumerate(entries):
        where = f"--models-config {path}: models[{index}]"
        if not isinstance(entry, dict):
            raise ModelConfigError(f"{where}: expected a mapping of settings")
        own = {str(key).replace("-", "_"): value for key, value in entry.items()}
        if "upstream" in own:
            upstream = own.pop("upstream")
            own["upstreams"] = upstream if isinstance(upstream, list) else [upstream]
        for key in ("model", "mmproj"):  # a relative path: beside the config file (else as given: a hub id)
            if own.get(key) is not None:
                given = Path(str(own[key])).expanduser()
                beside = path.parent / given
                if not given.is_absolute() and beside.exists():
                    own[key] = str(beside)
                elif given.exists() or "://" not in str(own[key]):
                    own[key] = str(given)
                # else a URL-spelled Hub id (https://huggingface.co/OWNER/NAME:QUANT): kept as given, not a Path
        if "lora" in own:  # its LoRA adapters, each served by its name (rostra/lora.py)
            try:
                own["lora"] = adapters_from_config(own["lora"], path.parent)
            except ValueError as exc:
                raise ModelConfigError(f"{where}: {exc}") from None
        ttl = own.pop("ttl", None)
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
            raise ModelConfigError(f"{where}: ttl must be a number of seconds above 0")
        preload = own.pop("preload", False)
        name = own.pop("name", None)
        specs.append(model_spec(settings, where, name=None if name is None else str(name),
                                ttl=None if ttl is None else float(ttl), preload=bool(preload), **own))
    return specs


def command_line_specs(settings: Settings) -> list[ModelSpec]:
    """The models of `rostra serve MODEL [MODEL ...] [--models-config FILE] [--models-dir DIR]`, checked for
    names served twice. One MODEL and nothing else is today's single-model server (app.py serves that itself)."""
    if settings.served_model_name:
        raise ModelConfigError("--served-model-name names the one MODEL of a single-model server; with several "
                               "models give each its names in --models-config (served_model_name)")
    specs = [model_spec(settings, "command line", model=model, served_model_name=[])
             for model in settings.models]
    if settings.models_config:
        specs += read_models_config(Path(settings.models_config), settings)
    if settings.models_dir:
        specs += scan_models_dir(Path(settings.models_dir), settings)
    check_unique(specs)
    for name in settings.preload:
        if not any(name in spec.names for spec in specs):
            raise ModelConfigError(f"--preload {name}: no such model (served: {', '.join(all_names(specs))})")
    return specs


def check_unique(specs: list[ModelSpec]) -> None:
    seen: dict[str, str] = {}
    for spec in specs:
        for name in spec.names or [spec.name]:
            if name in seen:
                raise ModelConfigError(f"the name {name!r} is served twice ({seen[name]} and {spec.source}); "
                                       "give one of them another name")
            seen[name] = spec.source


def all_names(specs: list[ModelSpec]) -> list[str]:
    return [name for spec in specs for name in (spec.names or [spec.name])]
