"""Compressed request bodies (`Content-Encoding: gzip`, `deflate`, `zstd`: Codex and pi send them), decoded as they
arrive with the decoded size bounded, so that a decompression bomb costs no more memory than the body limit."""

from __future__ import annotations

import zlib
from typing import Protocol

import zstandard

from rostra.errors import InvalidRequest


class BodyDecoder(Protocol):
    def decode(self, data: bytes, limit: int) -> bytes | None:
        """`data` decoded, or None once its output would pass `limit` bytes (nothing past that is decoded)."""

    def finish(self) -> None:
        """Raises InvalidRequest when the body ended before its encoding did, or carries bytes past its end."""


class ZlibDecoder:
    """gzip, and HTTP's `deflate` (the zlib format, RFC 9110)."""

    def __init__(self, encoding: str, wbits: int):
        self.encoding = encoding
        self.inflater = zlib.decompressobj(wbits)

    def decode(self, data: bytes, limit: int) -> bytes | None:
        try:
            # One byte past the limit: enough to know it was passed, and zlib stops there.
            out = self.inflater.decompress(data, limit + 1)
        except zlib.error as exc:
            raise _invalid(self.encoding, str(exc)) from exc
        return None if len(out) > limit or self.inflater.unconsumed_tail else out

    def finish(self) -> None:
        if not self.inflater.eof or self.inflater.unused_data:
            raise _invalid(self.encoding, "truncated, or followed by other bytes")


# zstandard's decompressobj has no output bound, and one byte of a zstd frame can expand to about 40 KB (a 128 KB
# block of one repeated byte takes four): fed this much at a time, one call yields at most ~10 MB past the limit.
ZSTD_SLICE = 256


class ZstdDecoder:
    encoding = "zstd"

    def __init__(self) -> None:
        self.inflater = zstandard.ZstdDecompressor().decompressobj()
        self.trailing = False  # bytes came after the frame's end

    def decode(self, data: bytes, limit: int) -> bytes | None:
        out: list[bytes] = []
        produced = 0
        try:
            for start in range(0, len(data), ZSTD_SLICE):
                if self.inflater.eof:  # a second frame, or bytes after the first: refused in finish()
                    self.trailing = True
                    break
                piece = self.inflater.decompress(data[start:start + ZSTD_SLICE])
                produced += len(piece)
                if produced > limit:
                    return None
                out.append(piece)
        except zstandard.ZstdError as exc:
            raise _invalid(self.encoding, str(exc)) from exc
        return b"".join(out)

    def finish(self) -> None:
        if not self.inflater.eof or self.trailing or self.inflater.unused_data:
            raise _invalid(self.encoding, "truncated, or followed by other bytes")


def body_decoder(encoding: str) -> BodyDecoder | None:
    """The decoder of a `Content-Encoding` value; None for an encoding rostra does not decode (a 415)."""
    if encoding == "gzip" or encoding == "x-gzip":
        return ZlibDecoder("gzip", 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return ZlibDecoder("deflate", zlib.MAX_WBITS)
    if encoding == "zstd":
        return ZstdDecoder()
    return None


def _invalid(encoding: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"the request body is not valid {encoding} (Content-Encoding): {why}")
