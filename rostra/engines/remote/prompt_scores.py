"""A raw-mode upstream's `prompt_logprobs` (vLLM's shape) as rostra's prompt steps.

vLLM answers `prompt_logprobs: N` with, per prompt token, None for the first and else
{token id: {logprob, rank, decoded_token}}: the prompt's own token and the N most likely. In raw mode
rostra sent the prompt's token ids, so it knows which entry is the prompt's token; the others, by rank,
are the alternatives. Their bytes come from the gateway's tokenizer.
"""

from __future__ import annotations

from typing import Any, Callable

from rostra.core import TokenStep, TopLogprob
from rostra.errors import BadGateway


def prompt_steps(token_ids: list[int], scores: Any, top_n: int,
                 token_bytes: Callable[[int], bytes]) -> tuple[TokenStep | None, ...]:
    """The upstream's scores of `token_ids` (a BadGateway for a malformed list)."""
    if not isinstance(scores, list) or len(scores) != len(token_ids):
        raise BadGateway("the upstream's prompt_logprobs do not match the prompt sent")
    steps: list[TokenStep | None] = [None]
    for token_id, entry in zip(token_ids[1:], scores[1:]):
        try:
            ranked = sorted(((value["rank"], int(key), float(value["logprob"])) for key, value in entry.items()))
            own = float(entry[str(token_id)]["logprob"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise BadGateway(f"the upstream sent malformed prompt_logprobs: {exc!r}") from exc
        tops = tuple(TopLogprob(other, token_bytes(other), logprob) for _, other, logprob in ranked[:top_n])
        steps.append(TokenStep(token_id, token_bytes(token_id), own, tops))
    return tuple(steps)
