"""Think, then constrain: a reasoning model thinks freely, and the constraint binds only its answer.

A JSON schema or grammar applied from the first token leaves a reasoning model no way to think: the
grammar forbids `<think>`, so the model either writes no thinking at all, or (with a template that
opens the block itself) the end-of-thinking marker is what the grammar forbids, and the JSON lands
in the reasoning with the answer left empty. Here a constrained request on a reasoning model runs as
two generations of one engine:

1. free: the prompt, no constraint, at most `ThinkFirst.budget` tokens (three quarters of the
   request's, less the end marker's), watched by the reasoning parser's own state machine until the
   thinking ends;
2. constrained: the prompt, the thinking tokens exactly as sampled, and (where the thinking did not
   end: the budget ran out, or the model stopped inside it) the end marker written for the model;
   with the constraint and what is left of the request's budget (the two parts and the marker count
   together, as one completion).

Why a continuation rather than a grammar that wakes up at the marker: it is the same on every engine
that enforces constraints (llama.cpp, transformers, vLLM), it can close a thinking that runs too long
(a lazy grammar cannot insert the marker), and it is cheap: the second prompt extends the first
token for token, so llama.cpp's slot (which holds the prompt and the thinking) and vLLM's prefix cache
evaluate only the marker; the transformers engine, which keeps no prefix cache, re-reads the prompt
once. An output that opens no thinking (Qwen3 with a template that does not open it) is decided on its
first characters: those few tokens are dropped and the whole answer is generated constrained.

gpt-oss follows the same path in harmony's channels (rostra/serving/harmony_answer.py): the thinking is its
analysis message (closed with `<|end|>` for the model where it runs too long), and the answer's header (the final
channel, or the forced call's commentary header) is written for the model, so the constraint binds only the
message's body, as the model writes it in harmony.
"""

from __future__ import annotations

import codecs
import dataclasses
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Sequence

from rostra.core import EngineOutput, HarmonyAnswer, Prompt, SamplingParams, ThinkFirst, TokenStep
from rostra.engines.base import Engine
from rostra.parsing.events import Text
from rostra.parsing.reasoning.base import ReasoningParser
from rostra.serving.continuation import continued_generation, written_steps
from rostra.serving.harmony_answer import OPENING, harmony_answer
from rostra.parsing.reasoning.gpt_oss import CHANNEL, END, MESSAGE, GptOssReasoningParser

THINKING_SHARE = 0.75  # of a request's token budget, the most its thinking may take before it is closed
ANALYSIS = f"{CHANNEL}analysis{MESSAGE}"  # harmony's thinking: the analysis channel's message


def think_first(parser: type[ReasoningParser] | None, prompt_text: str, thinking: bool, constrained: bool,
                max_tokens: int, calls: Sequence[tuple[str, dict[str, Any]]] = ()) -> ThinkFirst | None:
    """The plan for a constrained request on a reasoning model, or None: the constraint binds from the first
    token (no constraint, thinking off, no reasoning parser, or one without start and end markers). `calls`: the
    tools a forced tool choice may call, with their arguments' schemas (harmony writes the call's name in its
    header)."""
    if parser is not None and constrained and issubclass(parser, GptOssReasoningParser):
        # Harmony always has channels: gpt-oss writes its analysis whatever `thinking` says. A prompt that does
        # not end with a new assistant message (continue_final_message) continues a body: constrained throughout.
        if not prompt_text.endswith(OPENING):
            return None
        return ThinkFirst(start=ANALYSIS, end=END, unopened_is_reasoning=False, opened=False,
                          budget=int(max_tokens * THINKING_SHARE), harmony=HarmonyAnswer(tuple(calls)))
    if not (parser and thinking and constrained) or not isinstance(getattr(parser, "end", None), str):
        return None
    opened = parser(prompt_text).in_reasoning
    return ThinkFirst(start=parser.start, end=parser.end, unopened_is_reasoning=parser.unopened_is_reasoning,
                      opened=opened, budget=int(max_tokens * THINKING_SHARE))


class _Watcher(ReasoningParser):
    """The reasoning parser's state machine for one plan's markers (its events are not used)."""

    def __init__(self, plan: ThinkFirst):
        self.start, self.end, self.unopened_is_reasoning = plan.start, plan.end, plan.unopened_is_reasoning
        super().__init__(plan.start if plan.opened else "")


@dataclass
class _Thinking:
    """What the free generation wrote, as far as the thinking went."""

    plan: ThinkFirst
    closing: list[int]  # the end marker's tokens
    steps: list[TokenStep] = field(default_factory=list)
    held: list[EngineOutput] = field(default_factory=list)  # while undecided whether the output thinks
    thought: bool = False  # the output is (or was) inside a thinking block
    ended: bool = False  # the model wrote the end marker itself

    def __post_init__(self) -> None:
        self._watcher: ReasoningParser = GptOssReasoningParser() if self.plan.harmony else _Watcher(self.plan)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.thought = self._watcher.in_reasoning

    def take(self, output: EngineOutput) -> list[EngineOutput]:
        """What of `output` (and of the outputs held before it) goes out as the thinking: its tokens up to
        the one that ends the thinking (`ended`); nothing while undecided, nor once the output turned out to
        open no thinking (`unthinking`: it is generated again, constrained)."""
        kept: list[TokenStep] = []
        for step in output.tokens:
            kept.append(step)
            self._watcher.feed([Text(self._decoder.decode(step.token_bytes))])
            self.thought = self.thought or self._watcher.in_reasoning
            if self.decided:
                self.ended = self.thought
                break
        self.steps += kept
        cut = len(kept) < len(output.tokens)  # the engine's own token count covers what is dropped
        part = dataclasses.replace(output, tokens=tuple(kept), finish_reason=None,
                                   completion_tokens=None if cut else output.completion_tokens)
        self.held.append(part)
        if self._watcher.state == "deciding" or self.unthinking:
            return []
        held, self.held = self.held, []
        return held

    @property
    def decided(self) -> bool:
        """The free generation has given all the thinking it has: the output is answer from here on."""
        return self._watcher.state == "answering"

    @property
    def unthinking(self) -> bool:
        """The output opened no thinking (it was answer from the start), as far as it went."""
        return not self.thought


async def generate(engine: Engine, request_id: str, prompt: Prompt,
                   params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
    """`engine.generate`, with the thinking left free where the params plan it (`think_first`)."""
    plan = params.think_first
    if plan is None:
        async with aclosing(engine.generate(request_id, prompt, params)) as outputs:
            async for output in outputs:
                yield output
        return
    constrained = dataclasses.replace(params, think_first=None)
    # Written for the model if it thinks too long: the end marker (harmony's closes the analysis message).
    closing = await engine.tokenize(plan.end if plan.harmony else f"\n{plan.end}\n\n", False)
    # The thinking and the closing marker within the plan's share: the answer keeps the rest.
    free = dataclasses.replace(constrained, json_schema=None, grammar=None, structural_tag=None,
                               max_tokens=max(1, plan.budget - len(closing)))
    thinking = _Thinking(plan, closing)
    async with aclosing(engine.generate(request_id, prompt, free)) as outputs:
        async for output in outputs:
            for part in thinking.take(output):
                yield part
            if thinking.decided:
                break  # closing the free generation stops it
    if thinking.unthinking and plan.harmony is None:
        async with aclosing(engine.generate(request_id, prompt, constrained)) as outputs:
            async for output in outputs:
                yield output
        return
    async with aclosing(_answer(engine, request_id, prompt, constrained, thinking)) as outputs:
        async for output in outputs:
            yield output


async def _answer(engine: Engine, request_id: str, prompt: Prompt, params: SamplingParams,
                  thinking: _Thinking) -> AsyncGenerator[EngineOutput, None]:
    """The constrained answer after the thinking, its end marker written first where the model did not."""
    harmony = thinking.plan.harmony
    written = [] if thinking.unthinking else [step.token_id for step in thinking.steps]  # (harmony's: dropped)
    if not (thinking.ended or thinking.unthinking):
        closing = written_steps(engine, thinking.closing)
        yield EngineOutput(closing[: max(0, params.max_tokens - len(written))])
        written += thinking.closing
    answer = (harmony_answer(engine, request_id, prompt, params, written, harmony, thought=not thinking.unthinking)
              if harmony else continued_generation(engine, request_id, prompt, params, written))
    async with aclosing(answer) as outputs:
        async for output in outputs:
            yield output
