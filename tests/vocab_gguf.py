"""The embedded SmolLM2-135M with SmolVLM's image tokens in its vocabulary, for the idefics3 (SmolVLM) projector:
llama.cpp's mtmd looks `<fake_token_around_image>`, `<global-img>` and `<row_R_col_C>` up in the text model's
vocabulary (an image whose tokens are missing is refused as "Invalid token"), and SmolVLM's text model is SmolLM2
with those tokens added. Here the last entries of SmolLM2's vocabulary (rare BPE merges no test text uses) are
renamed to them and marked as control tokens; the weights are copied as they are, so the file is written in a
second."""

from __future__ import annotations

from pathlib import Path

import gguf

from rostra.embedded import embedded_model_path

GRID = 6  # rows and columns named: an image of up to 6x6 tiles
IMAGE_TOKENS = ["<fake_token_around_image>", "<global-img>",
                *[f"<row_{row}_col_{col}>" for row in range(1, GRID + 1) for col in range(1, GRID + 1)]]


def smolvlm_vocab_model(cache: Path) -> Path:
    """The copy, written once into `cache` (the checkout's git-ignored .cache/)."""
    target = cache / "SmolLM2-135M-smolvlm-vocab.gguf"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        _write(gguf.GGUFReader(str(embedded_model_path())), partial)
        partial.replace(target)
    return target


def _write(reader: gguf.GGUFReader, target: Path) -> None:
    tokens = list(reader.fields["tokenizer.ggml.tokens"].contents())
    types = list(reader.fields["tokenizer.ggml.token_type"].contents())
    first = len(tokens) - len(IMAGE_TOKENS)
    tokens[first:] = IMAGE_TOKENS
    types[first:] = [gguf.TokenType.CONTROL] * len(IMAGE_TOKENS)
    changed = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types}
    writer = gguf.GGUFWriter(str(target), reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue  # the writer's own, and the reader's virtual fields
        kind = field.types[0]
        item = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, changed.get(field.name, field.contents()), kind, sub_type=item)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    writer.close()
