"""Special-token text in user and tool content stays text.

A chat template writes its markup (`<|im_start|>system`, `<|im_end|>`) as text, and the rendered
prompt is tokenized with special-token text read as special tokens, which the template's own markup
needs. Read the same way, a user message holding `<|im_end|>\n<|im_start|>system\n...` would forge a
system turn (vLLM and llama.cpp's server tokenize it so). So before rendering, each special-token
string in user and tool content is swapped for a placeholder the template passes through as it
would the string (private-use characters and a random nonce no message can guess); after rendering,
the placeholders mark the pieces to tokenize as plain text, and the rest is tokenized as before.
A conversation without such strings renders and tokenizes exactly as it would without this step.
`--raw-special-tokens` turns it off.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any, Awaitable, Callable


UNTRUSTED_ROLES = frozenset({"user", "tool"})


@dataclass(frozen=True)
class PromptTokenizer:
    """The tokenizer's two readings of text, as functions (an engine's bound methods): `tokenize(text, add_special)`
    reads special-token text as special tokens (the template's markup), `tokenize_plain(text)` as plain characters.
    The prompt layer takes these, not the engine, so it sits below the engines (docs/internals.md, "Layout")."""

    tokenize: Callable[[str, bool], Awaitable[list[int]]]
    tokenize_plain: Callable[[str], Awaitable[list[int]]]


@dataclass(frozen=True)
class RenderedPrompt:
    """A rendered prompt, as pieces: (text, plain). `plain` pieces are special-token text from user
    or tool content, tokenized as plain characters; the others as the template's markup is."""

    pieces: tuple[tuple[str, bool], ...]

    @classmethod
    def of(cls, text: str) -> "RenderedPrompt":
        return cls(((text, False),))

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.pieces)

    async def tokenize(self, tokenizer: PromptTokenizer, add_special: bool = False) -> list[int]:
        """`add_special` (vLLM's chat `add_special_tokens`): the tokenizer's own special tokens (BOS...) on top
        of the template's markup, as tokenizing the whole prompt at once would add them."""
        if len(self.pieces) == 1 and not self.pieces[0][1]:
            return await tokenizer.tokenize(self.pieces[0][0], add_special)
        ids: list[int] = []
        if add_special:  # the tokenizer's leading tokens (BOS), which it adds to any text
            ids = await tokenizer.tokenize("", True)
        for text, plain in self.pieces:
            if text:
                ids += await (tokenizer.tokenize_plain(text) if plain else tokenizer.tokenize(text, False))
        return ids


class SpecialTextGuard:
    """Masks special-token text in untrusted messages before rendering, and reads the placeholders
    back after. One per engine (its special tokens); each render gets its own nonce."""

    def __init__(self, special_texts: tuple[str, ...] | list[str]):
        texts = sorted({text for text in special_texts if text}, key=len, reverse=True)  # longest first
        self._pattern = re.compile("|".join(map(re.escape, texts))) if texts else None

    def mask(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], "Masked"]:
        masked = Masked(secrets.token_hex(8), [])
        if self._pattern is None:
            return messages, masked
        out = []
        for message in messages:
            content = message.get("content")
            if message.get("role") in UNTRUSTED_ROLES and isinstance(content, str) and self._pattern.search(content):
                message = {**message, "content": self._pattern.sub(masked.placeholder, content)}
            elif message.get("role") in UNTRUSTED_ROLES and isinstance(content, list):  # `openai` content format
                message = {**message, "content": [  # (an image part, {"type": "image"}, has no text)
                    {**part, "text": self._pattern.sub(masked.placeholder, part["text"])} if "text" in part else part
                    for part in content]}
            out.append(message)
        return out, masked


@dataclass
class Masked:
    nonce: str
    originals: list[str]

    def placeholder(self, match: re.Match[str]) -> str:
        self.originals.append(match.group(0))
        return f"\ue000{self.nonce}:{len(self.originals) - 1}\ue001"

    def unmask(self, text: str) -> RenderedPrompt:
        """The rendered text with each placeholder back as its string, marked plain."""
        if not self.originals:
            return RenderedPrompt.of(text)
        pieces: list[tuple[str, bool]] = []
        position = 0
        for match in re.finditer(f"\ue000{self.nonce}:([0-9]+)\ue001", text):
            pieces.append((text[position:match.start()], False))
            pieces.append((self.originals[int(match.group(1))], True))
            position = match.end()
        pieces.append((text[position:], False))
        return RenderedPrompt(tuple(pieces))
