"""Generation defaults: what a request gets for the sampling parameters it leaves unset.

OpenAI's defaults (temperature 1, top_p 1, no top_k / min_p, all the room the context leaves)
suit OpenAI's models, not every model: a small model at temperature 1 rambles or loops until
its context is full. So, as `vllm serve` does, the defaults are resolved once at start-up:

1. `--generation-config auto` (the default): what the model's makers recommend, as the engine
   reads it: a checkpoint's `generation_config.json`, a GGUF's `general.sampling.*` metadata (and,
   for a GGUF served by name, the `generation_config.json` of its Hub repository), or, for the
   embedded model, its model card's recommendation (EMBEDDED_DEFAULTS below); on the llama.cpp
   engine, llama.cpp's own defaults for each field the model says nothing about (LLAMACPP_DEFAULTS);
   `openai`: none (OpenAI's defaults); FILE: a `generation_config.json`, or a directory holding one.
2. `--override-generation-config JSON` on top, e.g. `{"temperature": 0.5, "max_tokens": 512}`.

A request's own value always wins; what nobody sets keeps OpenAI's default.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)

# The request fields a default may be given for, and the range each accepts (as in requests).
FIELD_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0, 2), "top_p": (0, 1), "top_k": (-1, math.inf), "min_p": (0, 1),
    "repetition_penalty": (0, 10), "presence_penalty": (-2, 2), "frequency_penalty": (-2, 2),
    "max_tokens": (1, math.inf),
}
_INTEGER_FIELDS = {"top_k", "max_tokens"}
_ABOVE_LOW = {"top_p", "repetition_penalty"}  # their lower bound itself is not allowed

# transformers' generation_config.json keys -> request fields (max_new_tokens is a length cap).
# `do_sample` is not read, as vLLM does not: the sampling values a file gives are used as they are.
CHECKPOINT_KEYS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
                   "repetition_penalty": "repetition_penalty", "max_new_tokens": "max_tokens"}

# GGUF keys llama.cpp's converter writes from a checkpoint's generation_config.json (gguf-py's
# Keys.General.SAMPLING_*) -> request fields. The others (mirostat, xtc, penalty_last_n,
# sequence) have no OpenAI request field.
GGUF_KEYS = {"general.sampling.temp": "temperature", "general.sampling.top_p": "top_p",
             "general.sampling.top_k": "top_k", "general.sampling.min_p": "min_p",
             "general.sampling.penalty_repeat": "repetition_penalty"}

# The embedded SmolLM2-135M-Instruct: its GGUF carries no sampling metadata and its checkpoint's
# generation_config.json none either, so the sampling comes from its model card
# (https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct, "How to use":
# `model.generate(inputs, max_new_tokens=50, temperature=0.2, top_p=0.9, do_sample=True)`).
# The card's max_new_tokens=50 is a demo's length, too short for an answer; the default length
# below is measured instead (benchmarks/README.md, "Default length"): at the card's sampling, two of
# six everyday prompts still ran past 850 tokens without ending, while the answers that ended by
# themselves were 8 to 290 tokens long. 512 leaves room for those and stops a loop after 6 to 10 s
# on 2 idle CPU cores.
EMBEDDED_DEFAULTS: dict[str, float | int] = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 512}

# llama.cpp's own sampling defaults, what `llama-server` gives a request that sets nothing (common/common.h,
# `struct common_params_sampling`: temp 0.80, top_k 40, top_p 0.95, min_p 0.05; its penalties, typical_p, XTC
# and DRY are off there, as OpenAI's are, and its n_predict -1 is no length cap). The llama.cpp engine uses them
# for what the model recommends nothing about: OpenAI's temperature 1 with no truncation suits OpenAI's models,
# and on Qwen2.5-Coder-0.5B wrote visibly worse text than llama-server on the same file (issue 44).
LLAMACPP_DEFAULTS: dict[str, float | int] = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}
LLAMACPP_SOURCE = "llama.cpp's defaults"

class GenerationConfigError(ValueError):
    """A bad --generation-config or --override-generation-config (reported at start-up)."""


@dataclass(frozen=True)
class GenerationDefaults:
    """The defaults in force: request field -> value, and where they came from (for the log)."""

    values: dict[str, float | int] = field(default_factory=dict)
    source: str = "openai"

    def get(self, name: str, openai_default: Any = None) -> Any:
        return self.values.get(name, openai_default)

    def describe(self) -> str:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(self.values.items()))
        return f"{shown or 'none: OpenAI defaults'} (from {self.source})"


def checked(values: Mapping[str, Any], origin: str) -> dict[str, float | int]:
    """Known fields with numbers in range; ints for top_k and max_tokens."""
    result: dict[str, float | int] = {}
    for name, value in values.items():
        if name not in FIELD_RANGES:
            raise GenerationConfigError(f"{origin}: unknown field {name!r}; known: {', '.join(FIELD_RANGES)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise GenerationConfigError(f"{origin}: {name} must be a number, got {value!r}")
        low, high = FIELD_RANGES[name]
        if not low <= value <= high or (name in _ABOVE_LOW and value == low) or \
                (name in _INTEGER_FIELDS and value != int(value)):
            raise GenerationConfigError(f"{origin}: {name}={value} is out of range")
        result[name] = int(value) if name in _INTEGER_FIELDS else float(value)
    return result


def from_checkpoint_config(config: Mapping[str, Any]) -> dict[str, float | int]:
    """The sampling a generation_config.json (as a dict) recommends, as request fields."""
    picked = {field_name: config[key] for key, field_name in CHECKPOINT_KEYS.items() if config.get(key) is not None}
    return checked(picked, "generation_config.json")


def from_gguf_metadata(metadata: Mapping[str, Any]) -> dict[str, float | int]:
    """The sampling a GGUF's general.sampling.* keys recommend, as request fields."""
    picked = {field_name: metadata[key] for key, field_name in GGUF_KEYS.items() if metadata.get(key) is not None}
    return checked(picked, "GGUF general.sampling")


@dataclass(frozen=True)
class Recommendation:
    """What a model recommends, field by field, and from where (for the log and GET /v1/models)."""

    values: dict[str, float | int] = field(default_factory=dict)
    source: str = "the model"


def layered(*layers: tuple[Mapping[str, float | int], str]) -> Recommendation:
    """Recommendations, each (values, where from), later ones winning field by field (as llama.cpp lets a GGUF's
    general.sampling.* replace its own defaults one key at a time); the source names each one that is left."""
    values: dict[str, float | int] = {}
    origin: dict[str, str] = {}
    for layer, where in layers:
        for name, value in layer.items():
            values[name], origin[name] = value, where
    sources = [where for _, where in layers if where in origin.values()]
    if len(sources) == 1:
        return Recommendation(values, sources[0])
    parts = [f"{where} ({', '.join(sorted(name for name in values if origin[name] == where))})"
             for where in sources]
    return Recommendation(values, " + ".join(reversed(parts)))


def llamacpp_recommendation(gguf: Mapping[str, float | int], repository_config: Path | None,
                            repository: str) -> Recommendation:
    """A GGUF's recommendation on the llama.cpp engine: its general.sampling.* keys, then what its Hub repository's
    generation_config.json says of the others, then llama.cpp's defaults for the rest. A repository file that
    cannot be read is logged and passed over: it is advice, and the model serves without it."""
    from_repository: dict[str, float | int] = {}
    if repository_config is not None:
        try:
            config = json.loads(repository_config.read_text(encoding="utf-8"))
            from_repository = from_checkpoint_config(config) if isinstance(config, dict) else {}
        except (OSError, ValueError) as exc:  # (GenerationConfigError is a ValueError: a value out of range)
            log.warning("%s: its generation_config.json is not used: %s", repository, exc)
    return layered((LLAMACPP_DEFAULTS, LLAMACPP_SOURCE),
                   (from_repository, f"{repository}'s generation_config.json"),
                   (gguf, "the GGUF's general.sampling"))


def read_checkpoint_file(path: str | Path) -> dict[str, float | int]:
    """FILE of --generation-config: a generation_config.json, or a directory holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / "generation_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GenerationConfigError(f"--generation-config: cannot read {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise GenerationConfigError(f"--generation-config: {path} is not a JSON object")
    return from_checkpoint_config(config)


def parse_override(override: str | Mapping[str, Any] | None) -> dict[str, float | int]:
    """--override-generation-config: a JSON object (or a mapping, from a --config YAML file)."""
    if override is None:
        return {}
    if isinstance(override, str):
        try:
            override = json.loads(override)
        except ValueError as exc:
            raise GenerationConfigError(f"--override-generation-config: not JSON: {exc}") from exc
    if not isinstance(override, Mapping):
        raise GenerationConfigError("--override-generation-config: expected a JSON object")
    return checked(override, "--override-generation-config")


def resolve(mode: str, model_recommends: Mapping[str, float | int],
            override: str | Mapping[str, Any] | None = None, model_source: str = "the model") -> GenerationDefaults:
    """The defaults in force, from the mode (auto / openai / FILE) and the override on top; `model_source` says
    where the model's recommendation came from."""
    if mode == "auto":
        values, source = dict(model_recommends), model_source if model_recommends else "openai"
    elif mode == "openai":
        values, source = {}, "openai"
    else:
        values, source = read_checkpoint_file(mode), mode
    extra = parse_override(override)
    if extra:
        values.update(extra)
        source += " + --override-generation-config"
    return GenerationDefaults(values, source)
