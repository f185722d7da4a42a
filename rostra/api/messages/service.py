"""The Messages API over the shared pipeline.

A Messages request becomes a typed turn (rostra/turn.py; its messages and tools: history.py), each piece
naming its own field or block, and the ChatService prepares the turn, so the chat template, the engines, the
decoder, the reasoning and tool parsers and the constraints of tool_choice `any`/`tool` are the very ones Chat
Completions uses. Its semantic events are rendered by a
MessageStream (stream.py); the non-streamed Message is the fold of the same events.
"""

from __future__ import annotations

import copy
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, AsyncGenerator

from rostra.api.messages.documents import DocumentSources, with_documents_read
from rostra.api.messages.errors import error_body
from rostra.api.messages.history import turn_messages, turn_tools
from rostra.api.messages.models import MessagesRequest, MessagesRequestFields
from rostra.api.messages.stream import MessageOptions, MessageStream, new_id
from rostra.errors import APIError, InvalidRequest, ServerError
from rostra.file_text import FileReader
from rostra.guided.constraints import Constraint, schema_constraint
from rostra.sampling import INT32_MAX, Sampling
from rostra.serving.chat import ChatService
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.job import Job, OverChatJob
from rostra.serving.rendering import folded, rendered
from rostra.serving.reasoning_crypto import ReasoningSealer
from rostra.store.tenancy import EVERYONE, Tenant
from rostra.turn import Budget, TemplateOptions, ToolChoice, ToolChoiceKind, Turn


@dataclass
class MessagesJob(OverChatJob):
    """A prepared Messages request: the chat job that generates it and what shapes its Message."""

    chat: Job
    options: MessageOptions


class MessagesService:
    def __init__(self, chat: ChatService, sealer: ReasoningSealer, keep_attribution: bool = False):
        self.chat = chat
        self.sealer = sealer
        self.keep_attribution = keep_attribution
        self.files: FileReader | None = None  # documents by file_id, read as `tenant` (for_caller)
        self.tenant: Tenant = EVERYONE

    def for_caller(self, files: FileReader | None, tenant: Tenant) -> "MessagesService":
        """This service as one request's caller drives it: its documents' `file` sources are that key's files."""
        view = copy.copy(self)
        view.files, view.tenant = files, tenant
        return view

    def _documents(self) -> DocumentSources:
        return DocumentSources(self.chat.images.limits, self.files, self.tenant)

    async def prepare(self, request: MessagesRequest) -> MessagesJob:
        # A Claude Code-sized max_tokens (32000) is more than a local model's context has room for:
        # it is cut to the room left (as Anthropic's newer models do), and running out is then
        # reported as `model_context_window_exceeded`, not as a 400 before anything was generated.
        request = await with_documents_read(request, self._documents())
        job = await self.chat.prepare_turn(self.turn(request))
        job.id = new_id("msg")
        params = job.runs[0].params
        bound = params is not None and params.max_tokens < request.max_tokens
        show = not (request.thinking and request.thinking.display == "omitted")
        return MessagesJob(job, MessageOptions(self.sealer, show_thinking=show, context_bound=bound,
                                               stop_sequences=tuple(request.stop_sequences or ())))

    async def count_tokens(self, request: MessagesRequestFields) -> int:
        """The prompt's tokens exactly as /v1/messages would count them: template and tools included."""
        request = await with_documents_read(request, self._documents())
        return await self.chat.count_prompt_tokens(self.turn(request))

    def turn(self, request: MessagesRequestFields) -> Turn:
        """The request as the pipeline's turn; a count_tokens request has no budget nor sampling."""
        messages = tuple(turn_messages(request, self.sealer, self.keep_attribution))
        tools = turn_tools(request)
        thinking = request.thinking is not None and request.thinking.type != "disabled"
        choice = _tool_choice(request, bool(tools), thinking)
        variables = {} if request.thinking is None else {"enable_thinking": thinking, "thinking": thinking}
        continues = messages[-1].role == "assistant"  # a prefilled answer: the model continues it
        constraint = _output_constraint(request)
        generating = request if isinstance(request, MessagesRequest) else None  # (count_tokens: no budget)
        session = generating.metadata.user_id if generating and generating.metadata is not None else None
        return Turn(model=request.model, messages=messages, sampling=_sampling(request), tools=tools,
                    tool_choice=choice, parallel_tool_calls=False if _no_parallel(request) else None,
                    constraint=constraint,
                    budget=Budget(generating.max_tokens if generating else None, "max_tokens", fit=True),
                    template=TemplateOptions(variables, add_generation_prompt=not continues,
                                             continue_final_message=continues),
                    session_key=session or None)

    async def stream(self, job: MessagesJob, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's events; an error after message_start is Anthropic's `error` event, and ends it."""
        try:
            async with aclosing(rendered(deadline.bound(self.chat.events(job.chat)), self.renderer(job))) as events:
                async for event in events:
                    yield event
        except Exception as exc:
            yield error_body(exc if isinstance(exc, APIError) else ServerError(f"internal error: {type(exc).__name__}"))

    async def complete(self, job: MessagesJob, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
        return await folded(deadline.bound(self.chat.events(job.chat)), self.renderer(job))

    @staticmethod
    def renderer(job: MessagesJob) -> MessageStream:
        return MessageStream(job.id, job.model, job.stats, job.options)


def _tool_choice(request: MessagesRequestFields, have_tools: bool, thinking: bool) -> ToolChoice:
    choice = request.tool_choice
    if choice is None:
        return ToolChoice()
    if choice.type in ("any", "tool") and thinking:
        raise InvalidRequest("Thinking may not be enabled when tool_choice forces tool use.", param="tool_choice")
    if choice.type == "tool":
        if not choice.name:
            raise InvalidRequest("tool_choice.name: Field required for type 'tool'", param="tool_choice.name")
        return ToolChoice("named", choice.name, repr(choice.name), name_param="tool_choice.name")
    if choice.type != "none" and not have_tools:
        raise InvalidRequest(f"tool_choice {choice.type!r} needs tools", param="tool_choice")
    return ToolChoice(MODES[choice.type], shown=repr(choice.type))


def _no_parallel(request: MessagesRequestFields) -> bool:
    return request.tool_choice is not None and bool(request.tool_choice.disable_parallel_tool_use)


# The turn's sampling fields a Messages request spells otherwise (the rest it names as the turn does).
MESSAGES_NAMES = {"stop": "stop_sequences"}


def _sampling(request: MessagesRequestFields) -> Sampling:
    """Messages' sampling in the turn's type, checked under Messages' own names."""
    if not isinstance(request, MessagesRequest):
        return Sampling()
    if request.max_tokens is not None and request.max_tokens > INT32_MAX:  # engines read it as a 32-bit integer
        raise InvalidRequest(f"max_tokens: must be at most {INT32_MAX}", param="max_tokens")
    return Sampling(temperature=request.temperature, top_p=request.top_p, top_k=request.top_k,
                    stop=tuple(request.stop_sequences or ())).checked(MESSAGES_NAMES)


# Anthropic's tool_choice types as the turn's.
MODES: dict[str, ToolChoiceKind] = {"auto": "auto", "any": "required", "none": "none"}


def _output_constraint(request: MessagesRequestFields) -> Constraint | None:
    """Structured outputs (`output_config.format`, or the beta's older `output_format`): the JSON schema the answer
    must match, checked under the name the client used."""
    if request.output_config is not None and request.output_config.format is not None:
        return schema_constraint(request.output_config.format.schema_, "output_config.format.schema")
    if request.output_format is not None:
        return schema_constraint(request.output_format.schema_, "output_format.schema")
    return None
