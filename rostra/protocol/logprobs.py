"""OpenAI's logprobs objects read back into token steps (what a gateway gets from upstream)."""

from __future__ import annotations

from typing import Any

from rostra.core import TokenStep, TopLogprob

UNKNOWN_TOKEN = -1  # an upstream names tokens by their text, not their ids


def completion_steps(text: str, logprobs: dict[str, Any] | None) -> tuple[TokenStep, ...]:
    """A Completions text piece as token steps: one per token when its legacy logprobs name the
    tokens (and spell the text), else the whole piece as one step."""
    logprobs = logprobs or {}
    tokens = logprobs.get("tokens") or []
    if tokens and "".join(tokens) == text:
        logps = logprobs.get("token_logprobs") or [None] * len(tokens)
        tops = logprobs.get("top_logprobs") or [None] * len(tokens)
        return tuple(
            TokenStep(UNKNOWN_TOKEN, token.encode(), logp,
                      tuple(TopLogprob(UNKNOWN_TOKEN, t.encode(), lp) for t, lp in (top or {}).items()))
            for token, logp, top in zip(tokens, logps, tops))
    return (TokenStep(UNKNOWN_TOKEN, text.encode()),) if text else ()


def chat_step(entry: dict[str, Any]) -> TokenStep:
    """One entry of a chat choice's `logprobs.content`."""
    tops = tuple(TopLogprob(UNKNOWN_TOKEN, _spelled(top), float(top.get("logprob", 0.0)))
                 for top in entry.get("top_logprobs") or ())
    return TokenStep(UNKNOWN_TOKEN, _spelled(entry), float(entry.get("logprob", 0.0)), tops)


def _spelled(item: dict[str, Any]) -> bytes:
    raw = item.get("bytes")
    return bytes(raw) if raw else str(item.get("token", "")).encode()
