"""The exact bytes each token of a Hugging Face (fast) tokenizer stands for.

rostra's decoder joins token bytes and decodes UTF-8 itself, so these must be exact, including
tokens that hold only part of a multi-byte character. A tokenizer.json spells its pieces in
one of two alphabets, told apart by its decoder:

- byte-level BPE (GPT-2 and most recent models): every byte is one printable character;
- SentencePiece style: "▁" stands for a space and byte-fallback tokens are written "<0xAB>".

Added tokens (chat markup like "<|im_start|>") are stored as plain text in either case.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from rostra.tokenizer import _byte_level_alphabet


def _mentions(node: Any, kind: str) -> bool:
    """Whether a tokenizer.json component (possibly a Sequence of them) includes `kind`."""
    if isinstance(node, dict):
        return node.get("type") == kind or any(_mentions(value, kind) for value in node.values())
    if isinstance(node, list):
        return any(_mentions(item, kind) for item in node)
    return False


def _sentencepiece_bytes(piece: str) -> bytes:
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return bytes([int(piece[3:5], 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


def token_bytes_table(hf_tokenizer: Any, silent_ids: Iterable[int] = ()) -> list[bytes]:
    """Bytes per token id (index = id). `silent_ids` (end-of-generation tokens) map to b"",
    as the llama.cpp engine leaves them: they end the output rather than appear in it."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError("the transformers engine needs a fast tokenizer (a tokenizer.json)")
    spec = json.loads(backend.to_str())
    byte_level = _mentions(spec.get("decoder"), "ByteLevel") or _mentions(spec.get("pre_tokenizer"), "ByteLevel")
    alphabet = _byte_level_alphabet()
    added = {token_id for token_id in hf_tokenizer.added_tokens_decoder}
    vocab: dict[str, int] = backend.get_vocab(with_added_tokens=True)
    table = [b""] * (max(vocab.values(), default=-1) + 1)
    for piece, token_id in vocab.items():
        if token_id in added:
            table[token_id] = piece.encode("utf-8")
        elif byte_level:
            # A piece outside the alphabet cannot come from the byte-level pre-tokenizer: plain text.
            table[token_id] = (bytes(alphabet[ch] for ch in piece) if all(ch in alphabet for ch in piece)
                               else piece.encode("utf-8"))
        else:
            table[token_id] = _sentencepiece_bytes(piece)
    for token_id in silent_ids:
        if 0 <= token_id < len(table):
            table[token_id] = b""
    return table
