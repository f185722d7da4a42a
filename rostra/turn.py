"""The typed turn: what every API's request becomes before the shared pipeline prepares it.

Chat Completions (serving/chat_turn.py), the Messages API (api/messages/history.py and service.py) and the
Responses API (api/responses/to_chat.py) each convert their own wire request into a `Turn`; `ChatService.prepare_turn` takes the
turn and never sees a wire model of another API. Each piece that can still fail in the pipeline (a content
part, a tool's schema, the tool choice, the output budget) carries the parameter path its client wrote, so a
400 names `messages[0].content[1]` on Chat, a block's path on Messages and `input[1].content[0]` on
Responses without being translated afterwards.

Sampling is a type of its own (rostra/sampling.py), in no API's wire vocabulary: each API builds it from its own
parameters and checks it under their names (Messages' `stop_sequences` is the turn's `stop`), leaving what it
lacks (vLLM's extensions, mostly) at the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Union

from rostra.guided.constraints import Constraint
from rostra.sampling import Sampling


@dataclass(frozen=True)
class OutputOptions:
    """What a job's output carries, resolved once when the request is prepared: the streams below never
    read the request again."""

    logprobs: bool = False  # chat: logprobs.content; completions: legacy logprobs
    return_token_ids: bool = False  # vLLM: token_ids per choice, prompt_token_ids
    prompt_logprobs: bool = False  # vLLM: the prompt's scores
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    tokens_as_ids: bool = False  # vLLM's return_tokens_as_token_ids: logprobs name tokens "token_id:N"
    continuous_usage: bool = False  # vLLM: every chunk carries the usage so far
    role: str = "assistant"  # Chat Completions: the generated message's role (vLLM's --response-role)

    @classmethod
    def of(cls, request: Any) -> "OutputOptions":
        if isinstance(request, Turn):  # resolved when the turn was made
            return request.output
        stream = getattr(request, "stream_options", None)
        logprobs = getattr(request, "logprobs", None)
        return cls(logprobs=logprobs is not None and logprobs is not False,  # completions: 0 asks for them
                   return_token_ids=bool(getattr(request, "return_token_ids", False)),
                   prompt_logprobs=getattr(request, "prompt_logprobs", None) is not None,
                   tokens_as_ids=bool(getattr(request, "return_tokens_as_token_ids", False)),
                   include_usage=bool(stream and stream.include_usage),
                   continuous_usage=bool(stream and stream.include_usage and stream.continuous_usage_stats))


# How a message's content reaches the chat template (rostra/prompt/content_format.py).
ContentFormat = Literal["auto", "string", "openai"]
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


@dataclass(frozen=True)
class TextPart:
    text: str
    param: str


@dataclass(frozen=True)
class ImagePart:
    """An image, as a data URL or an http(s) URL (rostra fetches it: rostra/images/)."""

    url: str
    param: str


@dataclass(frozen=True)
class UnreadablePart:
    """A part no model here reads (Chat's input_audio, a file, an `image_url` part without its url): a 400
    naming it once rendered."""

    type: str
    param: str


ContentPart = Union[TextPart, ImagePart, UnreadablePart]


@dataclass(frozen=True)
class ToolCall:
    """A call an earlier assistant turn made: its fields as the template reads them (id, type, function with
    name and arguments), and its own path (a malformed function is a 400 naming it)."""

    fields: Mapping[str, Any]
    param: str


@dataclass(frozen=True)
class TurnMessage:
    role: Role
    content: str | tuple[ContentPart, ...] | None
    param: str  # the message's path in the client's request
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # a tool result's call
    reasoning: str | None = None  # an assistant turn's thinking
    # An assistant turn's, when its client said (Responses' `phase`): "commentary" or "final_answer".
    phase: str | None = None


@dataclass(frozen=True)
class FunctionTool:
    """A function the model is offered. `template`: the tool as chat templates read it
    ({"type": "function", "function": {...}}), in the order its client gave its fields."""

    name: str
    parameters: Any  # the JSON schema (checked by the pipeline: a bad one is a 400 naming `parameters_param`)
    strict: bool
    template: Mapping[str, Any]
    parameters_param: str


ToolChoiceKind = Literal["default", "none", "auto", "required", "named", "invalid"]


@dataclass(frozen=True)
class ToolChoice:
    """`default`: auto with tools, none without; `named`: the tool `name` (a 400 naming `name_param` if it is
    not among the tools); `invalid`: a choice of no known form (a 400 naming `param`)."""

    kind: ToolChoiceKind = "default"
    name: Any = None
    shown: str = "'auto'"  # the choice as its client wrote it (an error quotes it)
    param: str = "tool_choice"
    name_param: str = "tool_choice.function.name"


@dataclass(frozen=True)
class Budget:
    """The output budget the client asked for, named as it spelled it; `fit`: cut to the room the prompt leaves
    rather than refused (None: as the server is configured). `prompt_param` names a prompt too long for the
    context."""

    requested: int | None = None
    param: str = "max_tokens"
    fit: bool | None = None
    prompt_param: str = "messages"


@dataclass(frozen=True)
class TemplateOptions:
    """How the conversation is rendered: the template's variables (Qwen3's enable_thinking, ...), whether the
    answer starts a new assistant turn or continues the last one, a request's own template (vLLM's), documents
    for retrieval templates, text the answer starts with (tabbyAPI's response_prefix), and whether the
    tokenizer adds its own special tokens to the rendered text (vLLM's add_special_tokens)."""

    variables: Mapping[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: str | None = None
    documents: list[dict[str, Any]] | None = None
    response_prefix: str | None = None
    add_special_tokens: bool = False  # vLLM's: the tokenizer's BOS etc. on top of what the template writes
    content_format: ContentFormat | None = None  # vLLM's chat_template_content_format; None: the server's

    def thinking(self) -> bool:
        """Templates take enable_thinking (Qwen3) or thinking (others); both default to on."""
        return self.variables.get("enable_thinking", self.variables.get("thinking", True)) is not False


@dataclass(frozen=True)
class Turn:
    """One model turn, whichever API asked for it."""

    model: str
    messages: tuple[TurnMessage, ...]
    sampling: Sampling  # sampling, stop, n, echo and vLLM's extensions
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: ToolChoice = ToolChoice()
    parallel_tool_calls: bool | None = None
    constraint: Constraint | None = None  # what the answer's text must match (response format, guided_*)
    budget: Budget = Budget()
    template: TemplateOptions = TemplateOptions()
    session_key: str | None = None  # prompt_cache_key, a Messages metadata.user_id, a conversation's id
    reasoning_effort: str | None = None
    include_reasoning: bool = True  # False: the thinking is generated but left out of the answer
    logprobs: bool = False
    top_logprobs: int | None = None
    output: OutputOptions = OutputOptions()
    request_id: str | None = None  # the client's name for the request (vLLM's request_id, X-Request-Id)
    user: str | None = None  # the end user the client names (OpenAI's `user`): passed on to an upstream
