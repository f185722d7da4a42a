"""Which GGUF files of a repository make the model: the quantization asked for (or the preferred one), every part
of a split GGUF, the multimodal projector, and the repository's generation_config.json. IO-free: it reads file names and sizes only.

Repositories name each quantization in its files, as llama.cpp's quantize tool labels them
(`Qwen2.5-0.5B-Instruct-Q4_K_M.gguf`, `gemma-3-4b-it-Q4_K_M.gguf`, `mmproj-model-f16.gguf`; large ones split as
`...-Q8_0-00001-of-00003.gguf`, sometimes in a folder per quantization).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rostra.hub.errors import HubError

# Without a QUANT: the first of these the repository has (4-bit K-quant medium first, the usual balance of size
# and quality, as llama.cpp's `-hf` and Ollama default to), else the first quantization by name.
PREFERRED_QUANTS = ("Q4_K_M", "Q4_K_S", "Q4_0", "IQ4_XS", "IQ4_NL", "Q5_K_M", "Q5_K_S", "Q5_0", "Q6_K", "Q8_0",
                    "Q3_K_M", "Q3_K_L", "Q3_K_S", "Q2_K", "BF16", "F16", "F32")
# A projector's precision, best first: it is small next to the model, and quantized projectors see worse.
PREFERRED_PROJECTORS = ("F16", "BF16", "F32", "Q8_0")

# At the repository's root, as transformers writes it beside a checkpoint; some GGUF repositories carry it over.
GENERATION_CONFIG = "generation_config.json"

_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_QUANT = re.compile(r"(?<![A-Za-z0-9])((?:UD-)?(?:I?Q\d(?:_[A-Za-z0-9]+)*|TQ\d_\d|MXFP4(?:_MOE)?|BF16|FP16|F16|F32))"
                    r"(?![A-Za-z0-9])", re.IGNORECASE)


class ChoiceError(HubError):
    """The repository has no GGUF, or none that matches: the message says what it has."""


@dataclass(frozen=True, order=True)
class RemoteFile:
    path: str  # in the repository
    size: int
    sha256: str | None = None  # an LFS file's (every GGUF on the Hub); None: a small file kept in git
    blob_id: str | None = None  # a git file's blob id, its name in the cache when it has no SHA-256

    @property
    def cache_key(self) -> str:
        """Its blob's name in huggingface_hub's cache: the SHA-256 of an LFS file, else the git blob id."""
        return self.sha256 or self.blob_id or self.path.replace("/", "_")


@dataclass(frozen=True)
class ModelFiles:
    quant: str
    parts: tuple[RemoteFile, ...]  # one, or every part of a split GGUF in order (llama.cpp opens the first)
    projector: RemoteFile | None = None
    # The repository's generation_config.json, the sampling its makers recommend (a few hundred bytes), if any
    generation_config: RemoteFile | None = None

    @property
    def files(self) -> tuple[RemoteFile, ...]:
        extra = (self.projector, self.generation_config)
        return self.parts + tuple(file for file in extra if file is not None)

    @property
    def size(self) -> int:
        return sum(file.size for file in self.files)


def quant_of(path: str) -> str:
    """The quantization a file's name states (`Q4_K_M`), upper-case; else its name without `.gguf`."""
    name = path.rsplit("/", 1)[-1]
    stem = _SPLIT.sub("", name)
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else stem


def is_projector(path: str) -> bool:
    return "mmproj" in path.rsplit("/", 1)[-1].lower()


def choose(repo: str, files: list[RemoteFile], quant: str | None) -> ModelFiles:
    """The model files for `quant` (a file's path must contain it, any case), or the preferred quantization."""
    ggufs = [file for file in files if file.path.lower().endswith(".gguf")]
    models = [file for file in ggufs if not is_projector(file.path)]
    if not models:
        has = ", ".join(sorted(file.path for file in files)[:12]) or "no files"
        raise ChoiceError(f"{repo} has no GGUF model file (it has: {has}); a checkpoint like that is served with "
                          "--engine transformers or --engine vllm")
    available = sorted({quant_of(file.path) for file in models})
    candidates = [file for file in models if quant.lower() in file.path.lower()] if quant else models
    if not candidates:
        raise ChoiceError(f"{repo} has no GGUF matching {quant!r}; its quantizations: {', '.join(available)}")
    label = _preferred_label(sorted({quant_of(file.path) for file in candidates}), quant)
    chosen = sorted(file for file in candidates if quant_of(file.path) == label)
    config = next((file for file in files if file.path == GENERATION_CONFIG), None)
    return ModelFiles(label, _parts(repo, chosen), _projector(ggufs), config)


def _preferred_label(labels: list[str], quant: str | None) -> str:
    if quant and quant.upper() in labels:  # `Q4_K` matches Q4_K_M and Q4_K_S; `Q4_K_M` is itself
        return quant.upper()
    for preferred in PREFERRED_QUANTS:
        if preferred in labels:
            return preferred
    return labels[0]


def _parts(repo: str, chosen: list[RemoteFile]) -> tuple[RemoteFile, ...]:
    """One file, or every part of the first split model among `chosen` (missing parts refused)."""
    first = chosen[0]
    split = _SPLIT.search(first.path)
    if split is None:
        return (first,)
    stem = first.path[:split.start()]
    parts = sorted(file for file in chosen if file.path.startswith(stem) and _SPLIT.search(file.path))
    total = int(split[2])
    if len(parts) != total:
        raise ChoiceError(f"{repo}: {first.path} is split in {total} parts but the repository has {len(parts)}")
    return tuple(parts)


def _projector(ggufs: list[RemoteFile]) -> RemoteFile | None:
    projectors = sorted((file for file in ggufs if is_projector(file.path)), key=lambda file: file.path)
    for preferred in PREFERRED_PROJECTORS:
        for file in projectors:
            if quant_of(file.path) == preferred:
                return file
    return projectors[0] if projectors else None
