"""Tokenizers that run in-process, built from a GGUF file's vocabulary or a tokenizer.json.

The scripted engine uses these to cut its scripted text into real tokens; any engine can use
`token_bytes` to map an id to the exact bytes it stands for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Collection, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from rostra.gguf_metadata import read_gguf_metadata

# GGUF token types (llama.cpp's llama_token_type)
_CONTROL, _USER_DEFINED = 3, 4


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2 byte-level BPE spells every byte as a printable character; map it back."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars: dict[str, int] = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class TextTokenizer:
    """A byte-level BPE tokenizer with its special tokens and per-token bytes."""

    def __init__(self, tokenizer: Tokenizer, special_ids: set[int]):
        self._tokenizer = tokenizer
        self._plain: Tokenizer | None = None
        self.special_ids = special_ids
        alphabet = _byte_level_alphabet()
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self._bytes: dict[int, bytes] = {}
        for piece, token_id in vocab.items():
            if token_id in special_ids or any(ch not in alphabet for ch in piece):
                self._bytes[token_id] = piece.encode("utf-8")
            else:
                self._bytes[token_id] = bytes(alphabet[ch] for ch in piece)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode_plain(self, text: str) -> list[int]:
        """Special-token markup in `text` as plain characters (a second tokenizer that does not match
        special tokens: switching the flag on the shared one would race other threads)."""
        if self._plain is None:
            plain = Tokenizer.from_str(self._tokenizer.to_str())
            plain.encode_special_tokens = True
            self._plain = plain
        return self._plain.encode(text, add_special_tokens=False).ids

    @property
    def special_texts(self) -> tuple[str, ...]:
        return tuple(text for token_id in sorted(self.special_ids)
                     if (text := self._tokenizer.id_to_token(token_id)))

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes.get(token_id, b"")

    @property
    def vocab_size(self) -> int:
        return len(self._bytes)


def tokenizer_from_gguf(path: str | Path, metadata: dict[str, Any] | None = None) -> TextTokenizer:
    metadata = metadata or read_gguf_metadata(path)
    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"{path}: in-process tokenizer supports byte-level BPE ('gpt2') GGUF vocabularies, not {kind!r}; "
            "pass a tokenizer.json instead"
        )
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", [])]
    vocab = {piece: i for i, piece in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    special = [tokens[i] for i, t in enumerate(types) if t in (_CONTROL, _USER_DEFINED)]
    tokenizer.add_special_tokens(special)
    return TextTokenizer(tokenizer, {vocab[s] for s in special})


def tokenizer_from_json(path: str | Path) -> TextTokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    special = {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    return TextTokenizer(tokenizer, set(special.values()))


def gguf_token_bytes(metadata: dict[str, Any]) -> list[bytes]:
    """The bytes each token of a GGUF vocabulary stands for (byte-level BPE or SentencePiece)."""
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
    literal = {i for i, kind in enumerate(types) if kind in (_CONTROL, _USER_DEFINED)}
    return vocab_token_bytes(tokens, metadata.get("tokenizer.ggml.model") == "gpt2", literal)


def vocab_token_bytes(pieces: Sequence[str], byte_level: bool, literal_ids: Collection[int] = ()) -> list[bytes]:
    """The bytes each vocabulary piece stands for, index by index.

    Byte-level BPE spells each byte as a printable character (map it back); pieces in
    `literal_ids` (control and added tokens, stored as plain text) are their own UTF-8.
    SentencePiece: "▁" is a space and "<0xAB>" is one raw byte.
    """
    if byte_level:
        alphabet = _byte_level_alphabet()
        return [
            piece.encode() if i in literal_ids or any(c not in alphabet for c in piece)
            else bytes(alphabet[c] for c in piece)
            for i, piece in enumerate(pieces)
        ]
    out = []
    for piece in pieces:
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            out.append(bytes([int(piece[3:5], 16)]))
        else:
            out.append(piece.replace("\u2581", " ").encode())
    return out


# Control tokens that llama.cpp also treats as end of generation (beyond the eos/eot/eom ids).
END_MARKERS = {"<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>",
               "<|end_of_text|>", "</s>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<|return|>"}


def end_of_generation_ids(metadata: dict[str, Any]) -> set[int]:
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    types: list[int] = metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
    ids = {metadata.get(f"tokenizer.ggml.{key}_token_id") for key in ("eos", "eot", "eom")}
    ids |= {i for i, piece in enumerate(tokens) if piece in END_MARKERS and types[i] == _CONTROL}
    return {i for i in ids if i is not None and 0 <= i < len(tokens)}


# GGUF's names for a vocabulary's special tokens -> the names Hugging Face templates read them by
# (llama.cpp's writer spells separator "seperator"; both are read).
GGUF_TOKEN_NAMES = {"bos": "bos_token", "eos": "eos_token", "unknown": "unk_token", "padding": "pad_token",
                    "seperator": "sep_token", "separator": "sep_token", "cls": "cls_token", "mask": "mask_token"}
CONFIG_TOKEN_NAMES = frozenset(GGUF_TOKEN_NAMES.values())


def gguf_named_tokens(metadata: dict[str, Any]) -> dict[str, str]:
    """The special tokens a GGUF names (bos_token, unk_token, pad_token, ...), as text, for chat templates."""
    tokens = metadata.get("tokenizer.ggml.tokens") or []
    named = {}
    for key, name in GGUF_TOKEN_NAMES.items():
        index = metadata.get(f"tokenizer.ggml.{key}_token_id")
        if isinstance(index, int) and 0 <= index < len(tokens):
            named[name] = tokens[index]
    return named


def hf_named_tokens(special_tokens_map: dict[str, Any]) -> dict[str, str]:
    """A Hugging Face tokenizer's special_tokens_map, its single tokens (not additional_special_tokens' list)."""
    return {name: str(token) for name, token in special_tokens_map.items() if isinstance(token, str) and token}


def config_named_tokens(settings: dict[str, Any]) -> dict[str, str]:
    """The special tokens a tokenizer_config.json names, as text."""
    return {name: _token_content(settings[name]) for name in CONFIG_TOKEN_NAMES if settings.get(name)}


@dataclass(frozen=True)
class LocalTokenizer:
    """A tokenizer with what the chat template needs: for engines with no model of their own."""

    tokenizer: TextTokenizer
    chat_template: str | None
    bos_token: str
    eos_token: str
    architecture: str = ""  # GGUF general.architecture, or config.json's model_type beside a tokenizer.json
    named_tokens: dict[str, str] = field(default_factory=dict)  # bos_token, unk_token, pad_token, ...


def load_local_tokenizer(path: str | Path) -> LocalTokenizer:
    """From a GGUF file (its vocabulary and template), a tokenizer.json (with the
    tokenizer_config.json beside it, if any) or a checkpoint directory holding both."""
    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.suffix == ".json":
        config = path.with_name("tokenizer_config.json")
        settings = json.loads(config.read_text()) if config.is_file() else {}
        template = settings.get("chat_template")
        jinja = path.with_name("chat_template.jinja")  # where newer checkpoints keep it
        if template is None and jinja.is_file():
            template = jinja.read_text(encoding="utf-8")
        model = path.with_name("config.json")
        architecture = json.loads(model.read_text()).get("model_type", "") if model.is_file() else ""
        return LocalTokenizer(tokenizer_from_json(path), template, _token_content(settings.get("bos_token")),
                              _token_content(settings.get("eos_token")), str(architecture or ""),
                              config_named_tokens(settings))
    metadata = read_gguf_metadata(path)
    tokens = metadata["tokenizer.ggml.tokens"]
    return LocalTokenizer(tokenizer_from_gguf(path, metadata), metadata.get("tokenizer.chat_template"),
                          tokens[metadata.get("tokenizer.ggml.bos_token_id", 0)],
                          tokens[metadata.get("tokenizer.ggml.eos_token_id", 0)],
                          str(metadata.get("general.architecture", "")), gguf_named_tokens(metadata))


def _token_content(token: object) -> str:
    """tokenizer_config.json writes a special token as a string or as {"content": ...}."""
    if isinstance(token, dict):
        return str(token.get("content", ""))
    return str(token) if token else ""
