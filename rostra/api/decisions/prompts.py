"""A question about the input as a conversation for the model's chat template, and the labels its answer is one of.

The input becomes the conversation as a chat would hold it (a string is one user message; tool calls and their
outputs the template's own tool turns), and the question a last user message (joined to the input's last message
when that is the user's, for templates that want the roles to alternate). The question asks for the answer label
alone, so that the first tokens of the assistant's turn are the answer: predicate questions answer `Yes` or `No`,
choice questions a choice's value as written (a boolean as `true` / `false`), score questions a level's label.
Thinking templates are rendered with thinking off (`enable_thinking: false`), so the answer opens the turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from rostra.api.decisions.request import (
    AssistantMessage,
    Choice,
    CustomToolCall,
    DecisionRequest,
    FunctionCall,
    InputImage,
    InputItem,
    InputJson,
    InputText,
    InstructionMessage,
    OutputText,
    Predicate,
    Question,
    Score,
    ToolOutput,
    UserMessage,
)
from rostra.errors import InvalidRequest
from rostra.sampling import Sampling
from rostra.turn import ContentPart, ImagePart, TemplateOptions, TextPart, ToolCall, Turn, TurnMessage

PREDICATE_LABELS = ("Yes", "No")


@dataclass(frozen=True)
class QuestionPrompt:
    """One question's turn (input and question) and its answer labels, in the order the answer lists them."""

    turn: Turn
    labels: tuple[str, ...]


def input_messages(body: DecisionRequest) -> list[TurnMessage]:
    if isinstance(body.input, str):
        return [TurnMessage("user", body.input, "input")]
    if not body.input:
        raise InvalidRequest("input must hold at least one item", param="input")
    calls = {item.call_id for item in body.input if isinstance(item, (FunctionCall, CustomToolCall))}
    return [_message(item, f"input[{index}]", calls) for index, item in enumerate(body.input)]


def _message(item: InputItem, param: str, calls: set[str]) -> TurnMessage:
    if isinstance(item, UserMessage):
        return TurnMessage("user", _parts(item.content, f"{param}.content"), param)
    if isinstance(item, InstructionMessage):
        return TurnMessage(item.role, _parts(item.content, f"{param}.content"), param)
    if isinstance(item, AssistantMessage):
        text = item.content if isinstance(item.content, str) else "".join(
            part.text if isinstance(part, OutputText) else part.refusal for part in item.content)
        return TurnMessage("assistant", text, param, phase=item.phase)
    if isinstance(item, (FunctionCall, CustomToolCall)):
        arguments = item.arguments if isinstance(item, FunctionCall) else item.input
        call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": arguments}}
        return TurnMessage("assistant", None, param, tool_calls=(ToolCall(call, param),))
    if item.call_id not in calls:  # as OpenAI answers: each output names a call of the input
        raise InvalidRequest(f"{param}.call_id: no function or custom tool call in the input has the call_id "
                             f"{item.call_id!r}", param=f"{param}.call_id")
    return TurnMessage("tool", _parts(item.output, f"{param}.output"), param, tool_call_id=item.call_id)


def _parts(content: str | Sequence[InputText | InputImage | InputJson], param: str) -> str | tuple[ContentPart, ...]:
    if isinstance(content, str):
        return content
    parts: list[ContentPart] = []
    for index, part in enumerate(content):
        where = f"{param}[{index}]"
        if isinstance(part, InputText):
            parts.append(TextPart(part.text, where))
        elif isinstance(part, InputImage):
            parts.append(ImagePart(part.image_url, where))
        else:
            parts.append(TextPart(json.dumps(part.data, ensure_ascii=False, separators=(",", ":")), where))
    return tuple(parts)


def question_prompt(body: DecisionRequest, messages: list[TurnMessage], index: int) -> QuestionPrompt:
    question = body.questions[index]
    param = f"questions[{index}]"
    labels = answer_labels(question, param)
    asked = (*_instruction_parts(question, param), TextPart(_answer_format(question), param))
    last = messages[-1]
    if last.role == "user":  # the question joins the user's last message: the roles still alternate
        conversation = [*messages[:-1], TurnMessage("user", _merged((*_as_parts(last), *asked)), last.param)]
    else:
        conversation = [*messages, TurnMessage("user", _merged(asked), param)]
    turn = Turn(body.model, tuple(conversation), Sampling(),
                template=TemplateOptions(variables={"enable_thinking": False}),
                session_key=body.prompt_cache_key)
    return QuestionPrompt(turn, labels)


def answer_labels(question: Question, param: str) -> tuple[str, ...]:
    """The text of each answer, as the model is asked to write it; two answers of one text are a 400."""
    if isinstance(question, Predicate):
        return PREDICATE_LABELS
    if isinstance(question, Choice):
        if not 2 <= len(question.choices) <= 255:
            raise InvalidRequest(f"{param}.choices must hold 2 to 255 choices, not {len(question.choices)}",
                                 param=f"{param}.choices")
        labels = tuple(choice_label(choice.value) for choice in question.choices)
        what = "choices"
    else:
        if len(question.levels) < 2:
            raise InvalidRequest(f"{param}.levels must hold at least 2 levels", param=f"{param}.levels")
        labels = tuple(level.label for level in question.levels)
        what = "levels"
    for position, label in enumerate(labels):
        if not label.strip():
            raise InvalidRequest(f"{param}.{what}[{position}] is empty", param=f"{param}.{what}[{position}]")
        if label in labels[:position]:
            raise InvalidRequest(f"{param}.{what}[{position}] repeats {label!r}: each must be unique",
                                 param=f"{param}.{what}[{position}]")
    return labels


def choice_label(value: str | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _instruction_parts(question: Question, param: str) -> tuple[ContentPart, ...]:
    instructions = question.instructions
    if isinstance(instructions, str):
        if not instructions.strip():
            raise InvalidRequest(f"{param}.instructions is empty", param=f"{param}.instructions")
        instructions = [InputText(type="input_text", text=instructions)]
    parts = _parts(instructions, f"{param}.instructions")
    assert not isinstance(parts, str)
    head = "Statement about the conversation above:" if isinstance(question, Predicate) else ""
    return (TextPart(head, param), *parts) if head else parts


def _answer_format(question: Question) -> str:
    if isinstance(question, Predicate):
        return "Is the statement true? Answer with Yes or No only."
    if isinstance(question, Choice):
        options = "\n".join(f"- {choice_label(choice.value)}" + (f": {choice.description}" if choice.description else "")
                            for choice in question.choices)
        return f"Options:\n{options}\n\nAnswer with one option exactly as written, and nothing else."
    assert isinstance(question, Score)
    levels = "\n".join(f"- {level.label}" + (f": {level.description}" if level.description else "")
                       for level in question.levels)
    return f"Levels, from lowest to highest:\n{levels}\n\nAnswer with one level exactly as written, and nothing else."


def _merged(parts: Sequence[ContentPart]) -> str | tuple[ContentPart, ...]:
    """Neighbouring text parts as one, paragraphs apart; a text-only message as its string."""
    merged: list[ContentPart] = []
    for part in parts:
        previous = merged[-1] if merged else None
        if isinstance(part, TextPart) and isinstance(previous, TextPart):
            merged[-1] = TextPart(f"{previous.text}\n\n{part.text}", previous.param)
        else:
            merged.append(part)
    if len(merged) == 1 and isinstance(merged[0], TextPart):
        return merged[0].text
    return tuple(merged)


def _as_parts(message: TurnMessage) -> tuple[ContentPart, ...]:
    if isinstance(message.content, str):
        return (TextPart(message.content, message.param),)
    return message.content or ()
