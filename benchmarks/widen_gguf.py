"""A quantized GGUF written again with unquantized weights (F16 or F32): the same model, several times the bytes.

Why: speculative decoding pays where decoding is memory-bound (every step reads all the weights, whatever
the batch), and the only GGUF this machine can get, the embedded SmolLM2-135M in Q4_1 (~93 MB), is
compute-bound on 2 cores. Its F32 copy (~540 MB) reads six times the bytes per token for the same
arithmetic, so it stands in for the larger models issue 27 names (Qwen2.5-Coder-0.5B/1.5B), which cannot be
downloaded here. The weights are the Q4_1 ones dequantized: the model answers as the embedded one does
(up to the rounding of a different matrix kernel).

    python benchmarks/widen_gguf.py                      # embedded model -> .cache/SmolLM2-135M-Instruct.F32.gguf
    python benchmarks/widen_gguf.py --type f16 --output /tmp/smollm2-f16.gguf
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np

CACHE = Path(__file__).resolve().parent.parent / ".cache"
_COUNTS = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")  # the reader's own fields, not metadata
_TYPES = {"f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32, np.float32),
          "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16, np.float16)}


def widen(source: Path, target: Path, kind: str = "f32") -> Path:
    """Write `source` to `target` with every quantized tensor dequantized to `kind` (f32 or f16); one-dimensional
    tensors (norms) stay F32, as llama.cpp's own F16 files keep them."""
    reader = gguf.GGUFReader(source)
    architecture = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(target, architecture)
    _, file_type, dtype = _TYPES[kind]
    for name, field in reader.fields.items():
        if name in _COUNTS or name == "general.architecture":
            continue
        value = file_type if name == "general.file_type" else field.contents()
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, value_type, sub_type=sub_type)
    for tensor in reader.tensors:
        # The reader's shape is llama.cpp's (fastest dimension first); numpy's is the reverse.
        weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        shape = tuple(int(n) for n in reversed(tensor.shape))
        weights = weights.reshape(shape).astype(dtype if len(shape) > 1 else np.float32)
        writer.add_tensor(tensor.name, weights)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="quantized GGUF (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--type", choices=sorted(_TYPES), default="f32")
    parser.add_argument("--output", type=Path, help="default: .cache/<name>.<TYPE>.gguf in the checkout")
    args = parser.parse_args()
    if args.model is None:
        sys.path.insert(0, str(CACHE.parent))
        from rostra.embedded import embedded_model_path

        args.model = embedded_model_path()
    stem = args.model.name.removesuffix(".gguf").rsplit(".", 1)[0]
    output = args.output or CACHE / f"{stem}.{args.type.upper()}.gguf"
    output.parent.mkdir(parents=True, exist_ok=True)
    widen(args.model, output, args.type)
    print(f"{output} ({output.stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
