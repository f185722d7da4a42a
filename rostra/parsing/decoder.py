"""Incremental detokenization and stop conditions, per choice.

Tokens arrive as bytes; an incremental UTF-8 decoder turns them into text without ever
splitting a character. Stop strings are matched on the text: any suffix that could still
become a stop string is held back, so a stop string never leaks into the output, and the
work per token is bounded by the longest stop string, not by the text generated so far.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Callable, Collection, Sequence

from rostra.core import TokenStep


@dataclass(frozen=True)
class StopToken:
    """A stop_token_ids token that ended the text, and its text (None: not known, as from an upstream)."""

    token_id: int
    text: str | None


class Decoder:
    """`include_stop`: a matched stop string stays in the text (vLLM's include_stop_str_in_output).
    `min_tokens`: stop strings and stop tokens count only from that many tokens on (vLLM's min_tokens).
    `hidden_ids`: tokens whose text is left out (special tokens, with skip_special_tokens).
    `token_text`: a token's text, to name the stop token that ended the text (tabby's stop_str); an engine
    may report that token's bytes empty (it made the end silent), so they are not read from the step."""

    def __init__(self, stop: Sequence[str] = (), stop_token_ids: Collection[int] = (), include_stop: bool = False,
                 min_tokens: int = 0, hidden_ids: Collection[int] = frozenset(),
                 token_text: Callable[[int], str] | None = None):
        self._stops = [s for s in stop if s]
        self._stop_token_ids = frozenset(stop_token_ids)
        self._include_stop = include_stop
        self._unstoppable = min_tokens  # tokens still to come before a stop may end the text
        self._hidden_ids = hidden_ids
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self.stopped = False  # a stop string or stop token ended the text
        self.stop_string: str | None = None  # which stop string, when one did
        self.stop_token: StopToken | None = None  # which stop token, when one did
        self._token_text = token_text

    def feed(self, token: TokenStep) -> str:
        """Text released by one more token ('' while held back or after a stop)."""
        if self.stopped:
            return ""
        if self._unstoppable:
            self._unstoppable -= 1
            return self._utf8.decode(b"" if token.token_id in self._hidden_ids else token.token_bytes)
        if token.token_id in self._stop_token_ids:
            self.stopped = True
            text = self._token_text(token.token_id) if self._token_text else token.token_bytes.decode(errors="replace")
            self.stop_token = StopToken(token.token_id, text)
            return self._release_held()
        data = b"" if self._hidden_ids and token.token_id in self._hidden_ids else token.token_bytes
        text = self._held + self._utf8.decode(data)
        self._held = ""
        if not self._stops:
            return text
        cut, stop = min(((i, s) for s in self._stops if (i := text.find(s)) >= 0), default=(-1, ""))
        if cut >= 0:
            self.stopped, self.stop_string = True, stop
            return text[:cut + len(stop)] if self._include_stop else text[:cut]
        keep = self._partial_stop_length(text)
        if keep:
            self._held = text[-keep:]
            return text[:-keep]
        return text

    def note_engine_stop(self, stop: int | str | None) -> None:
        """A stop the engine matched itself (a stop token an upstream stopped on): named as if matched here."""
        if self.stop_string is not None or self.stop_token is not None or stop is None:
            return
        if isinstance(stop, str):
            self.stop_string = stop
        else:
            self.stop_token = StopToken(stop, self._token_text(stop) if self._token_text else None)

    def finish(self, cut: bool = False) -> str:
        """Whatever is still held back, once the engine is done. `cut`: the budget ended the output, and the
        bytes of a character it cut in half are dropped (else they show as U+FFFD)."""
        if self.stopped:
            return ""
        if cut:
            self._utf8.reset()
            return self._release_held()
        return self._release_held() + self._utf8.decode(b"", final=True)

    def _release_held(self) -> str:
        held, self._held = self._held, ""
        return held

    def _partial_stop_length(self, text: str) -> int:
        """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
        longest = min(len(text), max(len(s) for s in self._stops) - 1)
        for size in range(longest, 0, -1):
            tail = text[-size:]
            if any(s.startswith(tail) for s in self._stops):
                return size
        return 0
