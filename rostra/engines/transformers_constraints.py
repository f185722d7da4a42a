"""Decoding constraints for the transformers engine, enforced with llguidance.

rostra hands an engine either a JSON schema or grammar text: GBNF (llama.cpp's format, used
for guided_grammar and guided_choice) or llguidance's own lark format, which starts with
"%llguidance" (used for guided_regex). llguidance compiles all three, so every constraint
kind rostra passes is enforced and the engine can say `enforces_constraints = True`.

Per step, a matcher yields the set of tokens that keep the output inside the grammar (applied
to the logits as -inf for the rest, before sampling) and then consumes the sampled token.
llguidance's own torch helper compiles its mask kernel with torch.compile (a C compiler and
seconds of warm-up on CPU); unpacking the bitmask with numpy is enough at this scale.
"""

from __future__ import annotations

from typing import Any

import llguidance
import llguidance.hf
import numpy as np
import torch
from llguidance.gbnf_to_lark import any_to_lark

from rostra.core import SamplingParams


class ConstraintError(ValueError):
    """The schema or grammar cannot be compiled."""


class TokenConstraint:
    """One request's grammar state: which tokens may come next; advanced by each sampled token."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab_size: int):
        self._matcher = matcher
        self._vocab_size = vocab_size

    def allowed(self, device: torch.device) -> torch.Tensor:
        """A boolean mask over the vocabulary (True: the token may be sampled)."""
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little")[: self._vocab_size].astype(bool)
        return torch.from_numpy(mask).to(device)

    def advance(self, token_id: int) -> None:
        if not self._matcher.consume_token(token_id):
            raise ConstraintError(f"token {token_id} rejected by the grammar: {self._matcher.get_error()}")

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing more (the next token could only be EOS)."""
        return self._matcher.is_stopped()


class ConstraintCompiler:
    def __init__(self, hf_tokenizer: Any, vocab_size: int, eos_ids: list[int]):
        # Building llguidance's tokenizer walks the whole vocabulary (~1 s): once per engine.
        self._tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=vocab_size, eos_token=eos_ids)
        self._vocab_size = vocab_size

    def for_params(self, params: SamplingParams) -> TokenConstraint | None:
        """The constraint of a request, or None; raises ConstraintError for a bad schema/grammar."""
        if params.json_schema is not None:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(params.json_schema)
        elif params.grammar is not None:
            try:
                lark = any_to_lark(params.grammar)  # "%llguidance" text passes through as is
            except Exception as exc:  # the converter raises plain exceptions on bad GBNF
                raise ConstraintError(f"invalid grammar: {exc}") from exc
            grammar = llguidance.LLMatcher.grammar_from_lark(lark)
        else:
            return None
        matcher = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ConstraintError(matcher.get_error())
        return TokenConstraint(matcher, self._vocab_size)
