"""A tokenizer directory that says it is gpt-oss (config.json's model_type, as a Hugging Face checkpoint does),
for the scripted engine: the embedded model's vocabulary with harmony's markup added as special tokens. Made
once in the git-ignored .cache/."""

from __future__ import annotations

import json
from pathlib import Path

from rostra.embedded import embedded_model_path
from rostra.tokenizer import tokenizer_from_gguf

HARMONY_TOKENS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
DIRECTORY = Path(__file__).resolve().parents[1] / ".cache" / "gpt-oss-tokenizer"


def gpt_oss_tokenizer() -> Path:
    target = DIRECTORY / "tokenizer.json"
    if not target.is_file():
        DIRECTORY.mkdir(parents=True, exist_ok=True)
        tokenizer = tokenizer_from_gguf(embedded_model_path())._tokenizer
        tokenizer.add_special_tokens(HARMONY_TOKENS)
        (DIRECTORY / "config.json").write_text(json.dumps({"model_type": "gpt_oss"}))
        partial = DIRECTORY / "tokenizer.json.part"
        tokenizer.save(str(partial))
        partial.replace(target)
    return target
