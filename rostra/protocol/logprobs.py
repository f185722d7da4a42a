"""OpenAI's logprobs objects read back into token steps (what a gateway gets from upstream)."""

from __future__ import annotations

from typing import Any

from rostra.core import TokenStep, TopLogprob

UNKNOWN_TOKEN = -1  # an upstream names tokens by their text, not their ids
# vLLM's spelling of an impossible token's logprob (-inf, which JSON cannot say): clients parse a number.
LOGPROB_FLOOR = -9999.0


def wire_logprob(logprob: float) -> float:
    """A logprob as the wire carries it: -inf (a banned or masked token) as vLLM sends it, -9999.0."""
    return max(logprob, LOGPROB_FLOOR)


def completion_steps(text: str, logprobs: dict[str, Any] | float | None) -> tuple[TokenStep, ...]:
    """A Completions text piece as token steps: one per token when its legacy logprobs name the
    tokens (and spell the text), else the whole piece as one step. Some upstreams (Together) send a
    streamed piece's logprob as a bare number: the piece is then one scored step."""
    if isinstance(logprobs, (int, float)) and not isinstance(logprobs, bool):
        return (TokenStep(UNKNOWN_TOKEN, text.encode(), float(logprobs)),) if text else ()
    if not isinstance(logprobs, dict):
        logprobs = {}
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


def chat_steps(text: str, logprobs: Any) -> tuple[TokenStep, ...]:
    """A chat choice's `logprobs`: OpenAI's `{"content": [...]}`, or a bare number for the piece (Together)."""
    if isinstance(logprobs, (int, float)) and not isinstance(logprobs, bool):
        return (TokenStep(UNKNOWN_TOKEN, text.encode(), float(logprobs)),) if text else ()
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    return tuple(chat_step(entry) for entry in entries or () if isinstance(entry, dict))


def chat_step(entry: dict[str, Any]) -> TokenStep:
    """One entry of a chat choice's `logprobs.content`."""
    tops = tuple(TopLogprob(UNKNOWN_TOKEN, _spelled(top), _logprob(top.get("logprob")))
                 for top in entry.get("top_logprobs") or () if isinstance(top, dict))
    return TokenStep(UNKNOWN_TOKEN, _spelled(entry), _logprob(entry.get("logprob")), tops)


def _logprob(value: Any) -> float:
    """A logprob as an upstream spells it: a number, or null / a string for an impossible token (-inf)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float("-inf")


def _spelled(item: dict[str, Any]) -> bytes:
    raw = item.get("bytes")
    return bytes(raw) if raw else str(item.get("token", "")).encode()
