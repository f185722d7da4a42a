"""Many texts tokenized by llama.cpp's server in few requests, over a bounded number of connections.

llama.cpp's /tokenize takes a list of pieces, strings and token ids, and tokenizes each string on its own
(as a request of its own would, special tokens added to the first piece only), ids passed through. So texts
joined by a separator id no text can produce (-1) come back as one list, cut at the separators. Special
tokens (a BOS, BERT's [CLS] ... [SEP]) are added per text by rostra: the ones llama.cpp adds around a text,
learnt once by tokenizing a probe text with and without them.

Requests go out at most CONNECTIONS at a time, each with at most CHUNK_TEXTS texts and CHUNK_CHARACTERS
characters: 2,048 texts are 8 requests, 2 connections, where they were once 2,048 connections opened at
once (and as many threads in llama.cpp's server: the process died of it under common limits).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

CHUNK_TEXTS = 256
CHUNK_CHARACTERS = 1 << 20
CONNECTIONS = 2
EMBED_CHUNK = 256  # inputs per /embeddings request
SEPARATOR = -1  # a token id no text tokenizes to
_PROBE = "a"

Post = Callable[[str, dict], Awaitable[dict[str, Any]]]


class BatchedTokenizer:
    def __init__(self, post: Post):
        self._post = post
        self._connections = asyncio.Semaphore(CONNECTIONS)
        self._specials: tuple[list[int], list[int]] | None = None  # (before, after) a text

    async def tokenize(self, texts: list[str], add_special: bool) -> list[list[int]]:
        before, after = await self._special_tokens() if add_special else ([], [])
        chunks = await asyncio.gather(*(self._chunk(chunk) for chunk in _chunks(texts)))
        return [before + tokens + after for chunk in chunks for tokens in chunk]

    async def _chunk(self, texts: list[str]) -> list[list[int]]:
        content: list[str | int] = []
        for text in texts:
            content += [text, SEPARATOR]
        async with self._connections:
            reply = await self._post("/tokenize", {"content": content, "add_special": False, "parse_special": True})
        pieces: list[list[int]] = [[]]
        for token in reply["tokens"]:
            if token == SEPARATOR:
                pieces.append([])
            else:
                pieces[-1].append(token)
        pieces.pop()  # after the last separator: nothing
        if len(pieces) != len(texts):
            raise RuntimeError(f"llama.cpp tokenized {len(texts)} texts into {len(pieces)}")
        return pieces

    async def _special_tokens(self) -> tuple[list[int], list[int]]:
        if self._specials is None:
            plain, special = await asyncio.gather(*(
                self._post("/tokenize", {"content": _PROBE, "add_special": add, "parse_special": True})
                for add in (False, True)))
            self._specials = _around(plain["tokens"], special["tokens"])
        return self._specials


def _around(plain: list[int], special: list[int]) -> tuple[list[int], list[int]]:
    """The tokens `special` has before and after `plain` (the same text with special tokens added)."""
    for start in range(len(special) - len(plain) + 1):
        if special[start:start + len(plain)] == plain:
            return special[:start], special[start + len(plain):]
    raise RuntimeError(f"llama.cpp's special tokens are not around the text: {plain} vs {special}")


def _chunks(texts: list[str]) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    characters = 0
    for text in texts:
        if chunks[-1] and (len(chunks[-1]) >= CHUNK_TEXTS or characters + len(text) > CHUNK_CHARACTERS):
            chunks.append([])
            characters = 0
        chunks[-1].append(text)
        characters += len(text)
    return chunks if chunks[-1] else []
