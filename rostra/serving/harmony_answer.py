"""gpt-oss's constrained answer after its analysis: the message's header written for the model, its body constrained.

Harmony writes an answer as a message `<|start|>assistant<|channel|>final<|message|>BODY<|return|>` and a function
call as `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGUMENTS<|call|>`
(OpenAI's harmony format guide, "Receiving tool calls": the recipient after the channel, as the model writes it).
A constraint (response_format, text.format, guided_*) binds the final message's body; a forced tool choice binds
the call's arguments with that tool's schema. The header is written for the model: a grammar from the first token
forbids the channels (the model writes its JSON where it was trained to write `<|channel|>`), and a model left to
write the header itself may pick a channel the constraint does not allow.

Under tool_choice "required" with several tools the model chooses the name: after `to=functions.` a short
generation constrained to the tools' names (guided_choice's grammar, which every engine enforces), then the rest of
the header, then the arguments under that tool's schema. Each part continues the prompt with the completion so far
(continuation.py), so llama.cpp's slot and vLLM's prefix cache evaluate only what was written.
"""

from __future__ import annotations

import codecs
import dataclasses
from contextlib import aclosing
from typing import Any, AsyncGenerator

from rostra.core import EngineOutput, FinishReason, HarmonyAnswer, Prompt, SamplingParams, TokenStep
from rostra.engines.base import Engine
from rostra.guided.constraints import choice_grammar
from rostra.serving.continuation import continued_generation, written_steps

OPENING = "<|start|>assistant"  # a message after the analysis opens so; without analysis the prompt ends with it
FINAL = "<|channel|>final<|message|>"
CALL_HEADER = "<|channel|>commentary to=functions."
CALL_BODY = " <|constrain|>json<|message|>"


async def harmony_answer(engine: Engine, request_id: str, prompt: Prompt, params: SamplingParams, written: list[int],
                         answer: HarmonyAnswer, thought: bool) -> AsyncGenerator[EngineOutput, None]:
    """After `written` (the analysis, closed; none where the model wrote no analysis), the answer's message."""
    opening = OPENING if thought else ""
    body = params
    if not answer.calls:
        header = opening + FINAL
    elif len(answer.calls) == 1:
        name, schema = answer.calls[0]
        header, body = opening + CALL_HEADER + name + CALL_BODY, _arguments(params, schema)
    else:
        header_ids = await engine.tokenize(opening + CALL_HEADER, False)
        yield _written(engine, header_ids, params, written)
        written = written + header_ids
        chosen = _ChosenName([name for name, _ in answer.calls])
        async with aclosing(continued_generation(engine, request_id, prompt, _names(params, chosen.names),
                                                 written)) as outputs:
            async for output in outputs:
                chosen.take(output)
        yield EngineOutput(chosen.steps)
        if chosen.name is None:  # an engine that does not enforce the choice wrote another name: the header stays open
            yield EngineOutput(finish_reason=chosen.finish_reason or "stop")
            return
        written = written + [step.token_id for step in chosen.steps]
        header, body = CALL_BODY, _arguments(params, dict(answer.calls)[chosen.name])
    header_ids = await engine.tokenize(header, False)
    yield _written(engine, header_ids, params, written)
    async with aclosing(continued_generation(engine, request_id, prompt, body, written + header_ids)) as outputs:
        async for output in outputs:
            yield output


def _written(engine: Engine, token_ids: list[int], params: SamplingParams, written: list[int]) -> EngineOutput:
    """Header tokens written for the model, within what is left of the budget."""
    return EngineOutput(written_steps(engine, token_ids)[: max(0, params.max_tokens - len(written))])


def _arguments(params: SamplingParams, schema: dict[str, Any]) -> SamplingParams:
    """The call's arguments: the tool's schema, in place of the forced choice's (which shapes rostra's own format)."""
    return dataclasses.replace(params, json_schema=schema, grammar=None, structural_tag=None)


def _names(params: SamplingParams, names: list[str]) -> SamplingParams:
    return dataclasses.replace(params, json_schema=None, grammar=choice_grammar(names), structural_tag=None)


class _ChosenName:
    """The name the model chose: the longest offered name its output starts with, and the tokens that wrote it (an
    end-of-generation token after it is not part of it)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.finish_reason: FinishReason | None = None
        self._steps: list[tuple[TokenStep, int]] = []  # each step, with the length of the text up to its end
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, output: EngineOutput) -> None:
        self.finish_reason = output.finish_reason or self.finish_reason
        for step in output.tokens:
            self._text += self._decoder.decode(step.token_bytes)
            self._steps.append((step, len(self._text)))

    @property
    def name(self) -> str | None:
        return max((name for name in self.names if self._text.startswith(name)), key=len, default=None)

    @property
    def steps(self) -> tuple[TokenStep, ...]:
        """The name's tokens; where no name was written, every token (what the engine wrote stays visible)."""
        if self.name is None:
            return tuple(step for step, _ in self._steps)
        size, kept = len(self.name), []
        for step, end in self._steps:
            kept.append(step)
            if end >= size:
                break
        return tuple(kept)
