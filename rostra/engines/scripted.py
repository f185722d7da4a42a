"""The scripted engine: a deterministic model for people who build OpenAI clients, and the
backbone of rostra's API tests.

A script is a JSONL file; each line is {"match": REGEX, "output": TEXT} with optional
"role" (the line applies only when the last message has that role), "delay_ms" (a pause
before each token, to make streams slow enough to watch or to cancel) and "first_token_delay_ms" (a
pause before the first token only: a long prompt being read, or a wait for a free slot in the engine). The first line whose
regex is found (re.search) in the text of the last message wins; with no match the output is
that text echoed back. TEXT is raw model output: tool-call or reasoning markup in it goes
through the same parsers as a real model's output. It is cut into real tokens by a real
tokenizer (default: the embedded model's) and emitted one token per step; sampling
parameters are ignored (the output is the same every time) and constraints are not enforced (a
script that stands for a constrained model writes output that obeys the constraint); but under a
JSON-schema constraint (structured outputs, forced tool calls), or a guided_choice grammar, a matching line whose
output obeys it is preferred, so one prompt can be scripted for several constraints; a line obeys where its whole
output does or its answer after its thinking does (a reasoning model's `<think>…</think>{…}`, gpt-oss's analysis
then final message), and an engine made to enforce constraints (`enforces_constraints`, as tests of
think-then-constrain set it) writes only that answer in the constrained part. `max_tokens`
cuts the output short.

Images are accepted: the script sees each as the text `[image WxH]` where it stands in the message, so a
client's image paths (uploads, tool results holding screenshots) are testable without a vision model.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncGenerator

import jsonschema

from rostra.engines.base import NATIVE_SAMPLERS, Engine
from rostra.core import EngineOutput, ModelInfo, Prompt, PromptImage, SamplingParams, TokenStep, TopLogprob
from rostra.parsing.reasoning import reasoning_parser_class, reasoning_parser_names
from rostra.tokenizer import TextTokenizer, load_local_tokenizer


class ScriptError(ValueError):
    pass


@dataclass(frozen=True)
class ScriptLine:
    match: re.Pattern
    output: str
    role: str | None = None
    delay_ms: float = 0.0
    first_token_delay_ms: float = 0.0


def load_script(path: str | Path) -> list[ScriptLine]:
    lines = []
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
            if not isinstance(entry, dict) or not isinstance(entry.get("match"), str) or not isinstance(entry.get("output"), str):
                raise ScriptError('each line must be an object with string "match" and "output"')
            lines.append(ScriptLine(re.compile(entry["match"]), entry["output"], entry.get("role"),
                                    float(entry.get("delay_ms", 0)), float(entry.get("first_token_delay_ms", 0))))
        except (json.JSONDecodeError, re.error, ScriptError, TypeError, ValueError) as exc:
            raise ScriptError(f"{path}:{number}: {exc}") from exc
    return lines


def obeys(output: str, schema: dict) -> bool:
    """Whether a constrained model could have written `output`: JSON valid against `schema`."""
    try:
        jsonschema.validate(json.loads(output), schema)
    except (ValueError, jsonschema.ValidationError, jsonschema.SchemaError):
        return False
    return True


# Harmony (gpt-oss): the answer is the body of the output's last message, its closing marker left out.
_HARMONY_BODY = re.compile(r"<\|message\|>((?:(?!<\|message\|>).)*?)(?:<\|(?:end|return|call)\|>)?\s*\Z", re.DOTALL)


@functools.cache
def _thinking_ends() -> tuple[str, ...]:
    """The end-of-thinking markers of every reasoning format rostra reads (its registry: new formats count too)."""
    ends = {getattr(reasoning_parser_class(name), "end", None) for name in reasoning_parser_names()}
    return tuple(sorted(end for end in ends if isinstance(end, str) and end))


def answer_of(output: str) -> str:
    """What a scripted output answers after its thinking: a harmony output's last message body; else the text after
    the first end-of-thinking marker (leading whitespace left out); else the whole output."""
    if "<|channel|>" in output:
        body = _HARMONY_BODY.search(output)
        return body.group(1) if body else output
    found = [(at, end) for end in _thinking_ends() if (at := output.find(end)) >= 0]
    if not found:
        return output
    at, end = min(found)
    return output[at + len(end):].lstrip()


def obeying_answer(output: str, json_schema: dict | None, choices: list[str] | None) -> str | None:
    """The part of `output` a model constrained so could have written: all of it, or its answer after its thinking
    (a reasoning model's line, standing for both of its parts); None: neither obeys."""
    for text in dict.fromkeys((output, answer_of(output))):
        if (json_schema is None or obeys(text, json_schema)) and (choices is None or text in choices):
            return text
    return None


# guided_choice's grammar (rostra/guided/constraints.py choice_grammar): `root ::= "a" | "b"`, JSON-escaped literals.
_LITERAL = r'"(?:[^"\\]|\\.)*"'
_CHOICE_GRAMMAR = re.compile(rf"root ::= ({_LITERAL}(?: \| {_LITERAL})*)")


def grammar_choices(grammar: str | None) -> list[str] | None:
    """The strings a choice grammar allows, or None (no grammar, or one of another shape)."""
    found = _CHOICE_GRAMMAR.fullmatch(grammar or "")
    return [json.loads(literal) for literal in re.findall(_LITERAL, found.group(1))] if found else None


def pick_line(script: list[ScriptLine], text: str, role: str | None,
              json_schema: dict | None = None, grammar: str | None = None) -> ScriptLine | None:
    """The first line that matches; under a JSON-schema constraint (or a choice grammar), the first matching line
    that obeys it, whole or in its answer after its thinking (as a constrained model's would), else still the first
    match. None: no line matches."""
    return _pick(script, text, role, json_schema, grammar)[0]


def _pick(script: list[ScriptLine], text: str, role: str | None, json_schema: dict | None,
          grammar: str | None) -> tuple[ScriptLine | None, str | None]:
    """The line, and the part of its output that obeys the constraint (None: no constraint, or none obeys)."""
    matching = [line for line in script if (line.role is None or line.role == role) and line.match.search(text)]
    choices = grammar_choices(grammar)
    if json_schema is None and choices is None:
        return (matching[0] if matching else None), None
    for line in matching:
        if (part := obeying_answer(line.output, json_schema, choices)) is not None:
            return line, part
    return (matching[0] if matching else None), None


def pick_output(script: list[ScriptLine], text: str, role: str | None,
                json_schema: dict | None = None) -> tuple[str, float]:
    """The output the script gives (the text echoed when no line matches) and its pause before each token."""
    line = pick_line(script, text, role, json_schema)
    return (line.output, line.delay_ms) if line else (text, 0.0)


UNSCRIPTED_LOGPROB = -20.0  # a token off the script's answer: e^-20, as good as never


class ScriptedEngine(Engine):
    # A script is certain of every token, the prompt's too: prompt logprobs are 0 (the shapes are real).
    scores_prompts = True
    native_samplers = NATIVE_SAMPLERS  # accepted and, as all sampling, ignored: the script is the output
    serves_structural_tags = True  # accepted and, as every constraint, not enforced: a script obeys it
    engine_name = "scripted"
    tail_samplers = frozenset({"tfs", "top_a"})  # accepted and ignored, as all sampling

    def __init__(self, script_path: str | Path | None, tokenizer_path: str | Path, model_name: str = "scripted",
                 max_model_len: int | None = None):
        self.script = load_script(script_path) if script_path else []
        local = load_local_tokenizer(tokenizer_path)
        self.tokenizer: TextTokenizer = local.tokenizer
        self.chat_template, self.bos_token, self.eos_token = local.chat_template, local.bos_token, local.eos_token
        self.named_tokens = local.named_tokens
        self.architecture = local.architecture
        trained = 8192
        self.model = ModelInfo(id=model_name, context_length=max_model_len or trained)
        self.vocab_size = self.tokenizer.vocab_size
        self.special_token_ids = frozenset(self.tokenizer.special_ids)
        self.special_texts = self.tokenizer.special_texts
        self._running: dict[str, asyncio.Event] = {}

    def takes_images(self, model: str) -> bool:
        return True

    def image_marker(self, image: PromptImage) -> str:
        return image.placeholder()

    async def tokenize(self, text: str, add_special: bool) -> list[int]:
        return await asyncio.to_thread(self.tokenizer.encode, text)

    async def tokenize_plain(self, text: str) -> list[int]:
        return await asyncio.to_thread(self.tokenizer.encode_plain, text)

    async def detokenize(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self.tokenizer.token_bytes(token_id)

    def running_requests(self) -> int:
        return len(self._running)

    async def abort(self, request_id: str) -> None:
        if request_id in self._running:
            self._running[request_id].set()

    async def generate(self, request_id: str, prompt: Prompt, params: SamplingParams) -> AsyncGenerator[EngineOutput, None]:
        cancelled = self._running[request_id] = asyncio.Event()
        try:
            line, obeying = _pick(self.script, prompt.last_message_text, prompt.last_message_role, params.json_schema,
                                  params.grammar)
            text, delay_ms = (line.output, line.delay_ms) if line else (prompt.last_message_text, 0.0)
            if obeying is not None and self.enforces_constraints:
                text = obeying  # an engine that constrains writes only what obeys (after thinking left free)
            if line and line.first_token_delay_ms:
                await self._pause(line.first_token_delay_ms, cancelled)
            ids = await asyncio.to_thread(self.tokenizer.encode, text)
            emitted = ids[: params.max_tokens]
            scores = self._prompt_scores(prompt.token_ids, params.prompt_logprobs)
            if not emitted:
                yield EngineOutput(finish_reason="stop", prompt_logprobs=scores)
                return
            for position, token_id in enumerate(emitted):
                await asyncio.sleep(delay_ms / 1000)  # also yields to the loop between tokens
                if cancelled.is_set():
                    return
                last = position == len(emitted) - 1
                yield EngineOutput(
                    tokens=(self._step(token_id, params.top_logprobs),),
                    finish_reason=("length" if len(ids) > len(emitted) else "stop") if last else None,
                    prompt_logprobs=scores if position == 0 else None,
                    cached_tokens=0 if last else None,  # no prefix cache
                )
        finally:
            self._running.pop(request_id, None)

    async def score_continuations(self, request_id: str, prompt: Prompt,
                                  continuations: list[list[int]]) -> list[list[float]]:
        """The script's answer to the prompt is certain: a token that follows it scores 0, any other
        UNSCRIPTED_LOGPROB (deterministic decisions: the scripted answer's label gets all but a trace)."""
        line = pick_line(self.script, prompt.last_message_text, prompt.last_message_role)
        answer = await asyncio.to_thread(self.tokenizer.encode, line.output if line else prompt.last_message_text)
        return [[0.0 if position < len(answer) and answer[position] == token else UNSCRIPTED_LOGPROB
                 for position, token in enumerate(continuation)] for continuation in continuations]

    @staticmethod
    async def _pause(delay_ms: float, cancelled: asyncio.Event) -> None:
        """Waits `delay_ms`, or less if the request is aborted meanwhile (an abort during a long prompt's read)."""
        try:
            await asyncio.wait_for(cancelled.wait(), delay_ms / 1000)
        except TimeoutError:
            pass

    def _prompt_scores(self, token_ids: list[int], top: int | None) -> tuple[TokenStep | None, ...] | None:
        if top is None:
            return None
        return (None, *(self._step(token_id, top) for token_id in token_ids[1:]))

    def _step(self, token_id: int, top_logprobs: int | None) -> TokenStep:
        data = self.tokenizer.token_bytes(token_id)
        if top_logprobs is None:
            return TokenStep(token_id, data)
        # A script is certain of every token: probability 1, the only candidate.
        tops = (TopLogprob(token_id, data, 0.0),) if top_logprobs > 0 else ()
        return TokenStep(token_id, data, 0.0, tops)

