"""Prompt scoring on llama.cpp (`prompt_logprobs`, Completions `echo` with `logprobs`).

llama.cpp's server computes logits only for a prompt's last position and refuses `echo`, so a prompt is
scored by generating it: from its first token, llama.cpp is made to "sample" each following prompt token,
and reports for every such step the probabilities of the raw logits (`n_probs` with `post_sampling_probs`
off: a softmax over the whole vocabulary before any sampler, so forcing the choice does not bend them).
The choice is forced by a grammar of token ids (`<[id]>`, one request for a run of tokens); an
end-of-generation token, which llama.cpp's grammars never let through mid-grammar, is forced alone by a
logit bias (its request stops right after it). A run whose grammar llama.cpp still refuses (a token it
counts as end-of-generation that the GGUF does not name) is scored token by token the same way.

A continuation (the Decisions API's answer labels) is scored the same way after a prompt the slot then caches:
each label costs its own tokens' steps, the shared prompt is evaluated once.

Cost: one decoding step per prompt token (no batched prefill: llama.cpp gives no logits for the positions
inside a prompt), so scoring a prompt takes about as long as generating that many tokens. The runs go to
the slot the generation then uses, whose cache then holds the prompt: the generation reads none of it again.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Collection

from rostra.core import TokenStep, TopLogprob
from rostra.engines.base import EngineError

FORCING_BIAS = 1e4  # far above any logit: greedy sampling takes the token (the reported logprobs are raw)
Post = Callable[[dict[str, Any]], Awaitable[Any]]


def forced_runs(token_ids: list[int], end_ids: Collection[int]) -> list[tuple[int, int]]:
    """[start, end) ranges of positions 1.. that one request each forces: runs of ordinary tokens, and each
    end-of-generation token alone."""
    runs: list[tuple[int, int]] = []
    start = 1
    for position in range(1, len(token_ids)):
        if token_ids[position] in end_ids:
            if start < position:
                runs.append((start, position))
            runs.append((position, position + 1))
            start = position + 1
    if start < len(token_ids):
        runs.append((start, len(token_ids)))
    return runs


class PromptScorer:
    """Scores one prompt in one llama.cpp slot: `post` sends a /completion body (pinned to that slot)."""

    def __init__(self, post: Post, top_n: int, end_ids: Collection[int], token_bytes: Callable[[int], bytes]):
        self.post = post
        self.top_n = top_n
        self.end_ids = end_ids
        self.token_bytes = token_bytes

    async def score(self, token_ids: list[int]) -> tuple[TokenStep | None, ...]:
        """None for the first token (nothing precedes it), then each token's logprob and the top alternatives."""
        steps: list[TokenStep | None] = [None]
        for start, end in forced_runs(token_ids, self.end_ids):
            steps += await self._run(token_ids, start, end)
        return tuple(steps)

    async def warm(self, prefix: list[int]) -> None:
        """`prefix` evaluated into the slot's cache (the one token sampled after it is dropped). Continuations then
        scored after `prefix` plus one more token each start the same way: the cached prefix, that token decoded
        alone. Their first tokens' logprobs come from one computation, not from a batched prefill for the first
        and a single-token decode for the others (llama.cpp's logits differ between the two in the last digits,
        enough to move probabilities by a few hundredths on a small quantized model)."""
        await self.post({"prompt": prefix, "n_predict": 1, "temperature": 0.0, "stream": False, "cache_prompt": True})

    async def _run(self, token_ids: list[int], start: int, end: int) -> list[TokenStep]:
        return await self.continuation(token_ids[:start], token_ids[start:end])

    async def continuation(self, prompt: list[int] | dict[str, Any], forced: list[int]) -> list[TokenStep]:
        """The steps of `forced` (ordinary tokens, or one end-of-generation token) made to follow `prompt`: token
        ids, or llama.cpp's multimodal prompt (text and images), whose tokens cannot be extended one by one."""
        if len(forced) == 1:
            return await self._request(prompt, forced, {"logit_bias": [[forced[0], FORCING_BIAS]]})
        try:
            return await self._request(prompt, forced,
                                       {"grammar": "root ::= " + " ".join(f"<[{token}]>" for token in forced)})
        except EngineError:
            if isinstance(prompt, dict):
                raise
            steps: list[TokenStep] = []
            for position in range(len(forced)):
                steps += await self.continuation(prompt + forced[:position], forced[position:position + 1])
            return steps

    async def _request(self, prefix: list[int] | dict[str, Any], forced: list[int], forcing: dict[str, Any]) -> list[TokenStep]:
        body = {"prompt": prefix, "n_predict": len(forced), "n_probs": max(1, self.top_n),
                "post_sampling_probs": False, "temperature": 0.0, "return_tokens": True, "stream": False,
                "cache_prompt": True, "ignore_eos": False, **forcing}
        reply = await self.post(body)
        probabilities = reply.get("completion_probabilities") if isinstance(reply, dict) else None
        if not isinstance(probabilities, list) or [item.get("id") for item in probabilities] != forced:
            detail = reply.get("error") if isinstance(reply, dict) else reply
            raise EngineError(f"llama.cpp did not score the prompt's tokens: {detail or 'other tokens came back'}")
        return [TokenStep(item["id"], self.token_bytes(item["id"]), item["logprob"],
                          tuple(TopLogprob(top["id"], self.token_bytes(top["id"]), top["logprob"])
                                for top in item.get("top_logprobs", [])[:self.top_n]))
                for item in probabilities]
