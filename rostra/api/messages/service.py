"""The Messages API over the Chat Completions pipeline.

A Messages request becomes the equivalent chat request (history.py) and is prepared by the ChatService,
so the chat template, the engines, the decoder, the reasoning and tool parsers and the constraints of
tool_choice `any`/`tool` are the very ones Chat Completions uses. Its semantic events are rendered by a
MessageStream (stream.py); the non-streamed Message is the fold of the same events.
"""

from __future__ import annotations

import re
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, AsyncGenerator

from pydantic import ValidationError

from rostra.api.messages.errors import error_body
from rostra.api.messages.history import chat_messages, chat_tools
from rostra.api.messages.models import MessagesRequest, MessagesRequestFields
from rostra.api.messages.stream import MessageOptions, MessageStream, new_id
from rostra.errors import APIError, InvalidRequest, ServerError
from rostra.protocol.chat import ChatCompletionRequest
from rostra.serving.chat import ChatService
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.generation import Job, OverChatJob
from rostra.serving.reasoning_crypto import ReasoningSealer


@dataclass
class MessagesJob(OverChatJob):
    """A prepared Messages request: the chat job that generates it and what shapes its Message."""

    chat: Job
    options: MessageOptions


# A chat request's fields as a Messages request names them (a 400 names what the client sent).
CHAT_TO_MESSAGES_PARAMS = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                           "top_k": "top_k", "stop": "stop_sequences", "tools": "tools", "tool_choice": "tool_choice",
                           "response_format": "output_config.format", "prompt_cache_key": "metadata.user_id"}


def messages_param(chat_param: str | None) -> str | None:
    """A chat request's parameter as a Messages request spells it (a 400 names what the client sent)."""
    if chat_param is None:
        return None
    if CONTENT_PART.match(chat_param):  # an image part's: spelled as this request spelled it (its source_param)
        return chat_param
    if chat_param.startswith("messages["):  # the system prompt is a message there: the numbers differ
        return "messages"
    if chat_param.startswith("response_format"):
        return "output_config.format" + chat_param.removeprefix("response_format.json_schema").removeprefix(
            "response_format")
    tool = TOOL_PARAMETERS.match(chat_param)
    if tool:
        return f"tools[{tool.group(1)}].input_schema" + chat_param[tool.end():]
    return CHAT_TO_MESSAGES_PARAMS.get(chat_param, chat_param)


TOOL_PARAMETERS = re.compile(r"^tools\[(\d+)\]\.function\.parameters")
# A content part's path: only images are named so in the chat request a Messages request becomes, and each keeps
# the path of its block in the Messages request (its `source_param`).
CONTENT_PART = re.compile(r"^messages\[\d+\]\.content\[")


class MessagesService:
    def __init__(self, chat: ChatService, sealer: ReasoningSealer, keep_attribution: bool = False):
        self.chat = chat
        self.sealer = sealer
        self.keep_attribution = keep_attribution

    async def prepare(self, request: MessagesRequest) -> MessagesJob:
        chat_request = self.chat_request(request, max_tokens=request.max_tokens)
        # A Claude Code-sized max_tokens (32000) is more than a local model's context has room for:
        # it is cut to the room left (as Anthropic's newer models do), and running out is then
        # reported as `model_context_window_exceeded`, not as a 400 before anything was generated.
        try:
            job = await self.chat.prepare(chat_request, fit_context=True)
        except InvalidRequest as exc:
            exc.param = messages_param(exc.param)
            raise
        job.id = new_id("msg")
        params = job.runs[0].params
        bound = params is not None and params.max_tokens < request.max_tokens
        show = not (request.thinking and request.thinking.display == "omitted")
        return MessagesJob(job, MessageOptions(self.sealer, show_thinking=show, context_bound=bound))

    async def count_tokens(self, request: MessagesRequestFields) -> int:
        """The prompt's tokens exactly as /v1/messages would count them: template and tools included."""
        return await self.chat.count_prompt_tokens(self.chat_request(request))

    def chat_request(self, request: MessagesRequestFields, max_tokens: int | None = None) -> ChatCompletionRequest:
        messages = chat_messages(request, self.sealer, self.keep_attribution)
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if messages[-1]["role"] == "assistant":  # a prefilled answer: the model continues it
            body.update(add_generation_prompt=False, continue_final_message=True)
        tools = chat_tools(request)
        if tools:
            body["tools"] = tools
        choice = request.tool_choice
        if choice is not None:
            body["tool_choice"] = _tool_choice(choice.type, choice.name, bool(tools))
            if choice.disable_parallel_tool_use:
                body["parallel_tool_calls"] = False
            if choice.type in ("any", "tool") and request.thinking and request.thinking.type != "disabled":
                raise InvalidRequest("Thinking may not be enabled when tool_choice forces tool use.",
                                     param="tool_choice")
        if request.thinking is not None:
            on = request.thinking.type != "disabled"
            body["chat_template_kwargs"] = {"enable_thinking": on, "thinking": on}
        if isinstance(request, MessagesRequest):
            body.update(max_tokens=max_tokens, stop=request.stop_sequences, temperature=request.temperature,
                        top_p=request.top_p, top_k=request.top_k)
            if request.metadata is not None and request.metadata.user_id:  # Claude Code's session is in it
                body["prompt_cache_key"] = request.metadata.user_id
        output_format = _output_format(request)
        if output_format is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": output_format, "strict": True}}
        try:
            return ChatCompletionRequest.model_validate(body)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = str(first["loc"][0]) if first["loc"] else "messages"
            param = CHAT_TO_MESSAGES_PARAMS.get(field, "messages")  # named as this request spelled it
            raise InvalidRequest(f"{first['msg']}", param=param) from exc

    async def stream(self, job: MessagesJob, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's events; an error after message_start is Anthropic's `error` event, and ends it."""
        output = MessageStream(job.id, job.model, job.stats, job.options)
        for started in output.start():
            yield started
        try:
            async with aclosing(deadline.bound(self.chat.events(job.chat))) as events:
                async for _, event in events:
                    for rendered in output.add(event):
                        yield rendered
        except Exception as exc:
            yield error_body(exc if isinstance(exc, APIError) else ServerError(f"internal error: {type(exc).__name__}"))

    async def complete(self, job: MessagesJob, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
        output = MessageStream(job.id, job.model, job.stats, job.options)
        output.start()
        async with aclosing(deadline.bound(self.chat.events(job.chat))) as events:
            async for _, event in events:
                output.add(event)
        return output.message


def _tool_choice(kind: str, name: str | None, have_tools: bool) -> Any:
    if kind == "tool":
        if not name:
            raise InvalidRequest("tool_choice.name: Field required for type 'tool'", param="tool_choice.name")
        return {"type": "function", "function": {"name": name}}
    if kind != "none" and not have_tools:
        raise InvalidRequest(f"tool_choice {kind!r} needs tools", param="tool_choice")
    return {"auto": "auto", "any": "required", "none": "none"}[kind]


def _output_format(request: MessagesRequestFields) -> dict[str, Any] | None:
    """Structured outputs (`output_config.format`, or the older `output_format`): the JSON schema, if any."""
    spec = (request.output_config.format if request.output_config else None) or request.output_format
    return spec.schema_ if spec is not None else None
