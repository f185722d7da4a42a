"""The /v1/decisions request body, as the openai SDK (3.57, types/decision_create_params.py and the
decision_input_* params) defines it: the input (a string, or messages, function and custom tool calls and their
outputs), 1 to 400 questions, and the prompt-cache and safety fields. Field for field, so that what the SDK sends
validates and what it would not send is a 400 naming the field."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, StrictBool, StrictStr

from rostra.protocol.strict import RequestModel, StrictModel

MAX_QUESTIONS = 400
MAX_CHOICES = 255


class CacheBreakpoint(StrictModel):
    mode: Literal["explicit"]


class InputText(StrictModel):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputImage(StrictModel):
    """A data URL or an http(s) URL (file ids are not taken: OpenAI's Decisions API takes none either)."""

    type: Literal["input_image"]
    image_url: str
    detail: Literal["low", "high", "auto", "original"] | None = None
    prompt_cache_breakpoint: CacheBreakpoint | None = None


class InputJson(StrictModel):
    """A JSON object or a list of objects, which the model reads as its compact JSON text."""

    type: Literal["input_json"]
    data: dict[str, Any] | list[dict[str, Any]]


InputPart = Annotated[Union[InputText, InputImage, InputJson], Field(discriminator="type")]
TextOrImage = Annotated[Union[InputText, InputImage], Field(discriminator="type")]


class OutputText(StrictModel):
    type: Literal["output_text"]
    text: str


class Refusal(StrictModel):
    type: Literal["refusal"]
    refusal: str


AssistantPart = Annotated[Union[OutputText, Refusal], Field(discriminator="type")]


class UserMessage(StrictModel):
    role: Literal["user"]
    content: str | list[InputPart]
    type: Literal["message"] | None = None


class InstructionMessage(StrictModel):
    """A developer or system message: text only."""

    role: Literal["developer", "system"]
    content: str | list[InputText]
    type: Literal["message"] | None = None


class AssistantMessage(StrictModel):
    role: Literal["assistant"]
    content: str | list[AssistantPart]
    phase: Literal["commentary", "final_answer"] | None = None
    type: Literal["message"] | None = None


ItemStatus = Literal["in_progress", "completed", "incomplete"]


class FunctionCall(StrictModel):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    namespace: str | None = None
    status: ItemStatus | None = None


class CustomToolCall(StrictModel):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    id: str | None = None
    namespace: str | None = None
    status: ItemStatus | None = None


class ToolOutput(StrictModel):
    """A function_call_output or a custom_tool_call_output: its call's id and what the tool gave back."""

    type: Literal["function_call_output", "custom_tool_call_output"]
    call_id: str
    output: str | list[TextOrImage]
    id: str | None = None
    status: ItemStatus | None = None


InputItem = Union[UserMessage, InstructionMessage, AssistantMessage, FunctionCall, CustomToolCall, ToolOutput]

QuestionPart = Annotated[Union[InputText, InputImage, InputJson], Field(discriminator="type")]


class Predicate(StrictModel):
    """How likely a statement about the input is true."""

    type: Literal["predicate"]
    instructions: str | list[QuestionPart]
    name: str | None = None


class ChoiceOption(StrictModel):
    value: StrictStr | StrictBool  # typed: the string "true" and the boolean true are distinct choices
    description: str | None = None


class Choice(StrictModel):
    type: Literal["choice"]
    instructions: str | list[QuestionPart]
    choices: list[ChoiceOption]
    name: str | None = None


class ScoreLevel(StrictModel):
    label: str
    description: str | None = None


class Score(StrictModel):
    """A rating on the given levels, lowest first."""

    type: Literal["score"]
    instructions: str | list[QuestionPart]
    levels: list[ScoreLevel]
    name: str | None = None


Question = Annotated[Union[Predicate, Choice, Score], Field(discriminator="type")]


class PromptCacheOptions(StrictModel):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] | None = None


class DecisionRequest(RequestModel):
    model: str
    input: str | list[InputItem]
    questions: list[Question]
    # Accepted as OpenAI takes them; rostra's prefix caches work without them (a shared prefix is reused anyway).
    prompt_cache_key: str | None = None
    prompt_cache_options: PromptCacheOptions | None = None
    safety_identifier: Annotated[str, Field(max_length=64)] | None = None
