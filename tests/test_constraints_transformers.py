"""Think-then-constrain and structural tags on the transformers engine (the embedded model as a checkpoint),
driven directly: the same continuation and the same llguidance grammar as on llama.cpp."""

import asyncio
import json
import re

import pytest

from rostra.core import Prompt, SamplingParams, ThinkFirst
from rostra.engines.transformers import TransformersEngine
from rostra.serving import think_first
from rostra.guided.constraints import choice_grammar
from rostra.guided.structural_tag import structural_tag, structural_tag_grammar


@pytest.fixture(scope="module")
def engine(transformers_checkpoint):
    engine = TransformersEngine(str(transformers_checkpoint), parallel=2)
    asyncio.run(engine.start())
    yield engine
    asyncio.run(engine.close())


def prompt(engine, question: str) -> Prompt:
    text = engine.tokenizer.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                                tokenize=False)
    return Prompt(engine.tokenizer.encode(text, add_special_tokens=False))


async def text_of(engine, prompt: Prompt, params: SamplingParams) -> tuple[str, list]:
    outputs = [output async for output in think_first.generate(engine, "t", prompt, params)]
    ids = [step.token_id for output in outputs for step in output.tokens]
    return engine.tokenizer.decode(ids), outputs


def test_thinking_closed_at_its_share_then_the_answer_in_the_grammar(engine):
    """DeepSeek-R1's way (the output is thinking until </think>); the embedded model never closes it."""
    plan = ThinkFirst(start="<think>", end="</think>", unopened_is_reasoning=True, opened=False, budget=24)
    params = SamplingParams(max_tokens=32, temperature=0, grammar=choice_grammar(["yes", "no"]), think_first=plan)
    text, outputs = asyncio.run(text_of(engine, prompt(engine, "Tell me a long story, then say yes or no."), params))
    thinking, marker, answer = text.rpartition("\n</think>\n\n")
    assert marker and thinking.strip() and "</think>" not in thinking and answer in ("yes", "no"), text
    assert outputs[-1].finish_reason == "stop"
    assert sum(len(output.tokens) for output in outputs) <= 32


def test_structural_tag_after_each_trigger(engine):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    tag = structural_tag({"triggers": [" the"], "structures": [{"begin": " the", "schema": schema, "end": "."}]},
                         "structural_tag")
    params = SamplingParams(max_tokens=48, temperature=0, grammar=structural_tag_grammar(tag, "structural_tag"))
    text, outputs = asyncio.run(text_of(engine, prompt(engine, "Describe the sun and the moon."), params))
    parts = text.split(" the")
    assert len(parts) > 1, text
    for part in parts[1:-1] + ([parts[-1]] if outputs[-1].finish_reason == "stop" else []):
        match = re.match(r"(\{.*?\})\.", part, re.DOTALL)
        assert match and isinstance(json.loads(match.group(1))["n"], int), text
