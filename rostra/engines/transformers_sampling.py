"""Per-request sampling for the transformers engine: logits of one sequence in, one token out.

Every request carries its own parameters, its own random generator (so a seed reproduces the
same output whatever else shares the batch) and its own grammar state. The order follows
llama.cpp's sampler chain: penalties, logit bias, masks (ignore_eos, the grammar), then
temperature and the truncations (top-k, min-p, tabby's top-a and tail-free, top-p) before the draw.

Logprobs are the log-softmax of the logits after penalties, bias and masks but before
temperature and truncation: the model's distribution as the request shaped it, the same
numbers whatever the temperature, and with greedy decoding the sampled token is their top-1.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from rostra.core import SamplingParams
from rostra.engines.transformers_constraints import TokenConstraint
from rostra.engines.transformers_truncation import tail_free, top_a


@dataclass(frozen=True)
class Sampled:
    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, logprob), best first; empty unless asked


class RequestSampler:
    def __init__(self, params: SamplingParams, prompt_ids: list[int], vocab_size: int, usable_vocab: int,
                 eos_ids: list[int], constraint: TokenConstraint | None, device: torch.device):
        self.params = params
        self.constraint = constraint
        self.device = device
        self._vocab_size = vocab_size
        self._generator = torch.Generator(device=device)
        seed = params.seed if params.seed is not None else random.SystemRandom().getrandbits(63)
        self._generator.manual_seed(seed)
        # Tokens seen so far: the repetition penalty counts the prompt too (as in transformers),
        # presence and frequency penalties only what was generated (as OpenAI defines them).
        self._seen = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        self._seen[torch.tensor(prompt_ids, dtype=torch.long, device=device)] = True
        self._counts = torch.zeros(vocab_size, dtype=torch.float32, device=device)
        # Fixed additive mask: logit_bias, banned EOS, and ids past the tokenizer (padded vocabularies).
        bias = torch.zeros(vocab_size, dtype=torch.float32, device=device)
        for token_id, value in params.logit_bias.items():
            if 0 <= token_id < vocab_size:
                bias[token_id] += value
        if params.ignore_eos:
            bias[[t for t in eos_ids if 0 <= t < vocab_size]] = float("-inf")
        if params.allowed_token_ids is not None:
            allowed = torch.full((vocab_size,), float("-inf"), device=device)
            allowed[[t for t in params.allowed_token_ids if 0 <= t < vocab_size]] = 0.0
            bias += allowed
        bias[usable_vocab:] = float("-inf")
        self._bias = bias
        # min_tokens: end tokens (and stop_token_ids) are banned until that many were generated.
        self._end_ids = [t for t in {*eos_ids, *params.stop_token_ids} if 0 <= t < vocab_size]
        self._generated: list[int] = []
        # bad_words: one-token words are always banned; a longer word's last token once the others precede it.
        self._bad_single = [seq[0] for seq in params.bad_words_ids if len(seq) == 1 and seq[0] < vocab_size]
        self._bad_longer = [seq for seq in params.bad_words_ids if len(seq) > 1]

    def sample(self, logits: torch.Tensor) -> Sampled:
        """`logits`: this sequence's next-token logits, shape [vocab]."""
        p = self.params
        logits = logits.float().clone()
        if p.repetition_penalty != 1.0:
            seen = logits[self._seen]
            logits[self._seen] = torch.where(seen > 0, seen / p.repetition_penalty, seen * p.repetition_penalty)
        if p.presence_penalty or p.frequency_penalty:
            logits -= self._counts * p.frequency_penalty + (self._counts > 0).float() * p.presence_penalty
        logits += self._bias
        if len(self._generated) < p.min_tokens:
            logits[self._end_ids] = float("-inf")
        if self._bad_single or self._bad_longer:
            logits[self._banned_words()] = float("-inf")
        if self.constraint is not None:
            logits.masked_fill_(~self.constraint.allowed(logits.device), float("-inf"))
        logprobs = torch.log_softmax(logits, dim=-1)
        token_id = self._choose(logits)
        top: tuple[tuple[int, float], ...] = ()
        if p.top_logprobs:
            values, ids = torch.topk(logprobs, min(p.top_logprobs, logprobs.numel()))
            top = tuple((i, v) for i, v in zip(ids.tolist(), values.tolist()) if v != float("-inf"))
        return Sampled(token_id, float(logprobs[token_id]), top)

    def _banned_words(self) -> list[int]:
        banned = list(self._bad_single)
        for sequence in self._bad_longer:
            prefix = list(sequence[:-1])
            if self._generated[-len(prefix):] == prefix:
                banned.append(sequence[-1])
        return banned

    def accept(self, token_id: int) -> None:
        """Record the token the sequence continues with (penalties, grammar, min_tokens, bad_words)."""
        self._generated.append(token_id)
        self._seen[token_id] = True
        self._counts[token_id] += 1
        if self.constraint is not None:
            self.constraint.advance(token_id)

    def _choose(self, logits: torch.Tensor) -> int:
        p = self.params
        if p.temperature <= 0 or p.top_k == 1:
            return int(torch.argmax(logits))
        logits = logits / p.temperature
        if p.top_k > 0 and p.top_k < logits.numel():
            kth = torch.topk(logits, p.top_k).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if p.min_p > 0:
            probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
        probs = tail_free(top_a(probs, p.top_a), p.tfs)  # tabby's: off by default
        if p.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
            before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
            sorted_probs = sorted_probs.masked_fill(before >= p.top_p * sorted_probs.sum(), 0.0)
            probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
        return int(torch.multinomial(probs, 1, generator=self._generator))
