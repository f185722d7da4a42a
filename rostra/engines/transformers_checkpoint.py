"""A plain transformers checkpoint (safetensors + tokenizer) made from a GGUF file.

transformers can read a GGUF file itself, dequantizing it to full-precision weights, but it
then keeps a `quantization_config` that marks the model as "GGUF-loaded"; saving that as is
gives a checkpoint other tools refuse. So the config is rebuilt without it and the weights
are copied into a fresh model before `save_pretrained`. The tests and the transformers
benchmark use this on the embedded SmolLM2-135M (no Hugging Face Hub here). Reading the GGUF
needs the `gguf` and `accelerate` packages (in the `test` extra); it takes ~30 s on 2 cores,
most of it in the GGUF reader, hence the cache.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

# Written last: its presence means the checkpoint directory is complete.
_DONE_MARKER = "rostra-converted-from"


def checkpoint_from_gguf(gguf_path: str | Path, out_dir: str | Path) -> Path:
    """Convert once: an existing complete checkpoint in `out_dir` is reused."""
    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    marker = out_dir / _DONE_MARKER
    if marker.is_file() and marker.read_text() == str(gguf_path.resolve()):
        return out_dir
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):  # no random initialization: every weight is assigned just below
        model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    # Build next to the target and move into place, so a crash never leaves half a checkpoint.
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / _DONE_MARKER).write_text(str(gguf_path.resolve()))
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return out_dir
