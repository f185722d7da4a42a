"""The Responses API over the Chat Completions pipeline.

A Responses request is turned into the equivalent chat request (input items and the stored
conversation of `previous_response_id` -> messages; flat function tools -> chat tools;
text.format -> response_format) and prepared by the ChatService, so tool parsing, reasoning
parsing and constraints are the same for every model and engine. Its semantic events are
rendered by a ResponseBuilder; the response object is kept in the store (SQLite by default).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from pydantic import ValidationError

from rostra.errors import APIError, InvalidRequest, NotFound, ServerError
from rostra.parsing.events import Finish
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.responses import CreateResponseRequest
from rostra.serving.chat import ChatService
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.generation import ChoiceRun, Job, RequestStats
from rostra.serving.reasoning_crypto import ReasoningSealer, opened
from rostra.serving.mcp_tools import McpPolicy, McpTools, redacted, requested_servers, resolve
from rostra.serving.responses_mcp import (
    MCP_ITEM_TYPES,
    ToolLoop,
    approved_calls,
    awaits_client,
    check_mcp_item,
    expand_mcp,
)
from rostra.serving.responses_render import ResponseBuilder, new_id
from rostra.store.base import ResponseStore, StoreError

log = logging.getLogger("rostra.responses")

MAX_HISTORY = 100  # previous_response_id links followed at most
LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs
ENCRYPTED_REASONING = "reasoning.encrypted_content"  # ... and the one asking for sealed reasoning items
# What `include` may name (OpenAI's list); the values for tools rostra does not have change nothing.
INCLUDABLE = {LOGPROBS, ENCRYPTED_REASONING, "file_search_call.results", "web_search_call.results",
              "web_search_call.action.sources", "message.input_image.image_url",
              "computer_call_output.output.image_url", "code_interpreter_call.outputs"}


@dataclass
class LiveRun:
    """A background response while it runs: its events so far, for followers."""

    task: asyncio.Task | None = None
    events: list[dict] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False

    def publish(self, event: dict) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = asyncio.Event()

    def end(self) -> None:
        self.done = True
        self.changed.set()


@dataclass
class ResponseJob:
    """One prepared Responses request: the chat job that generates it and the builder that is its response."""

    request: CreateResponseRequest
    chat: Job
    builder: ResponseBuilder
    items: list[dict]  # the request's input items, as stored
    conversation: list[dict] = field(default_factory=list)  # the stored history, then the input items
    loop: ToolLoop = field(default_factory=lambda: ToolLoop(McpTools()))  # MCP tools run by rostra
    ready: list[dict] = field(default_factory=list)  # output items made before the model runs (MCP)
    turns: list[Job] = field(default_factory=list)  # the chat job of every model turn, `chat` the last

    # What the access log and the request log read of any job.
    @property
    def id(self) -> str:
        return self.builder.response["id"]

    @property
    def model(self) -> str:
        return self.chat.model

    @property
    def stats(self) -> RequestStats:
        return self.chat.stats

    @property
    def runs(self) -> list[ChoiceRun]:
        return self.chat.runs


class ResponsesService:
    def __init__(self, chat: ChatService, store: ResponseStore, mcp_policy: McpPolicy = McpPolicy(),
                 sealer: ReasoningSealer | None = None):
        self.chat = chat
        self.store = store
        self.mcp_policy = mcp_policy
        self.sealer = sealer or ReasoningSealer(key=secrets.token_bytes(32))  # a key for this process only
        self.live: dict[str, LiveRun] = {}

    # -- create ----------------------------------------------------------------------------
    async def prepare(self, request: CreateResponseRequest) -> ResponseJob:
        if request.background and not request.store:
            raise InvalidRequest("background responses must be stored (store: true)", param="background")
        for index, value in enumerate(request.include or []):
            if value not in INCLUDABLE:
                raise InvalidRequest(f"include: unknown value {value!r}", param=f"include[{index}]")
        items = normalize_input(request.input)
        history = await self._conversation(request.previous_response_id) if request.previous_response_id else []
        conversation = opened(history, self.sealer, "previous_response_id") + opened(items, self.sealer)
        servers = requested_servers(request.tools, self.mcp_policy)
        functions = {tool.get("name") for tool in request.tools or [] if tool.get("type") == "function"}
        loop = ToolLoop(await resolve(servers, conversation, functions) if servers else McpTools(),
                        request.max_tool_calls)
        ready = loop.tools.listings + await approved_calls(items, conversation, loop)
        builder = ResponseBuilder(base_response(request))
        job = await self._turn(request, conversation + ready, loop.chat_tools(), builder)
        builder.mcp = loop.tools.labels()
        if ENCRYPTED_REASONING in (request.include or []):
            builder.sealer = self.sealer
        return ResponseJob(request, job, builder, items, conversation, loop, ready, [job])

    async def _turn(self, request: CreateResponseRequest, conversation: list[dict], tools: list[dict],
                    builder: ResponseBuilder) -> Job:
        """The chat job of one model turn. With `truncation: "auto"`, a conversation that outgrows the context
        loses its oldest items (whole turns: it then starts at a user message) until it fits; the response says how
        many (`truncated_items`)."""
        dropped = 0
        while True:
            try:
                job = await self.chat.prepare(chat_request(request, conversation[dropped:], tools))
                break
            except InvalidRequest as exc:
                if request.truncation != "auto" or exc.code != "context_length_exceeded":
                    raise
                dropped = next_start(conversation, dropped)
                if dropped is None:  # nothing left to drop but the newest item
                    raise
        if dropped:
            builder.response["truncated_items"] = max(dropped, builder.response.get("truncated_items", 0))
            log.info("response %s: %d oldest conversation items dropped to fit the context",
                     builder.response["id"], dropped)
        return job

    async def complete(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> dict:
        """A non-streamed response: the fold of its events. A failure is raised (as for Chat), once stored."""
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for _ in events:
                    pass
        finally:
            if job.request.store and job.builder.response["status"] != "in_progress":  # not if the client left
                await self.store.create(job.builder.response, job.items)
        if job.builder.error is not None:
            raise job.builder.error
        return job.builder.response

    async def stream(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> AsyncIterator[dict]:
        """A streamed response; every event is stored as it goes (when stored) for replay."""
        response, store = job.builder.response, job.request.store
        if store:
            await self.store.create(response, job.items)
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for event in events:
                    if store:
                        await self.store.append_event(response["id"], event)
                    yield event
        except Exception as exc:  # the store failed (the engine's failures are events already)
            log.exception("response %s failed", response["id"])
            for event in job.builder.fail(as_api_error(exc)):
                yield event
        finally:
            if response["status"] == "in_progress":  # the client left mid-stream
                response["status"] = "cancelled"
            if store:
                await self._store_final(response)

    async def start_background(self, job: ResponseJob, deadline: Deadline, on_done: Callable[[], None]) -> dict:
        """Store the response as queued and run it in a task of its own; `on_done` runs when the run has
        ended, however it ends."""
        response = job.builder.response
        response["status"] = "queued"
        await self.store.create(response, job.items)
        live = self.live[response["id"]] = LiveRun()
        live.task = asyncio.create_task(self._run_in_background(job, deadline, live))
        live.task.add_done_callback(lambda _: on_done())  # runs even for a task cancelled before it started
        return dict(response)

    async def _run_in_background(self, job: ResponseJob, deadline: Deadline, live: LiveRun) -> None:
        response = job.builder.response
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for event in events:
                    await self.store.append_event(response["id"], event)
                    live.publish(event)
        except asyncio.CancelledError:
            response["status"] = "cancelled"
        except Exception as exc:  # a store error: the run fails, and says so to its followers
            log.exception("background response %s failed", response["id"])
            for event in job.builder.fail(as_api_error(exc)):
                live.publish(event)
        finally:
            await asyncio.shield(self._store_final(response))
            live.end()
            self.live.pop(response["id"], None)

    async def _store_final(self, response: dict) -> None:
        try:
            await self.store.update(response)
        except Exception:  # nothing more can be done; the next start marks a stored in_progress run failed
            log.exception("could not store the final state of response %s", response["id"])

    async def _events(self, job: ResponseJob, deadline: Deadline) -> AsyncIterator[dict]:
        builder = job.builder
        yield builder.lifecycle("response.created")
        builder.response["status"] = "in_progress"
        yield builder.lifecycle("response.in_progress")
        for item in job.ready:
            for out in builder.whole_item(item):
                yield out
        reason = "stop"
        try:
            while True:  # one model turn, then the MCP calls it made, as long as the model makes some
                start = len(builder.response["output"])
                async with aclosing(deadline.bound(self.chat.events(job.chat))) as events:
                    async for _, event in events:
                        for out in builder.add(event):
                            yield out
                        if isinstance(event, Finish):
                            reason = event.reason
                calls, builder.pending_calls = builder.pending_calls, []
                if not calls:
                    break
                async with aclosing(deadline.bound(job.loop.run(builder, calls))) as ended:  # runs them
                    async for out in ended:
                        yield out
                if awaits_client(builder.response["output"][start:]) or reason != "tool_calls":
                    break
                job.loop.turns += 1
                # A forced tool_choice was for the first turn: later ones are free to answer.
                later = job.request.model_copy(update={"tool_choice": None})
                job.chat = await self._turn(later, job.conversation + builder.response["output"],
                                            job.loop.chat_tools(), builder)
                job.turns.append(job.chat)
        except APIError as exc:  # the engine failed, the deadline passed, or a later turn was refused
            for out in builder.fail(exc):
                yield out
            return
        yield builder.finish(reason, response_usage(*(job.turns or [job.chat])))

    # -- read, follow, cancel, delete ------------------------------------------------------------
    async def retrieve(self, response_id: str) -> dict:
        response = await self.store.get(response_id)
        if response is None:
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return response

    async def follow(self, response_id: str, starting_after: int | None) -> AsyncIterator[dict]:
        """Stored events after `starting_after`, then live ones until the response ends."""
        await self.retrieve(response_id)
        live = self.live.get(response_id)  # taken before the store is read: no event falls between the two
        last = -1 if starting_after is None else starting_after
        for event in await self.store.events(response_id, last):
            last = event["sequence_number"]
            yield event
        while live is not None:
            waiting, done = live.changed, live.done
            for event in list(live.events):  # drained once more after the end: the last events too
                if event["sequence_number"] > last:
                    last = event["sequence_number"]
                    yield event
            if done:
                return
            await waiting.wait()

    async def cancel(self, response_id: str) -> dict:
        response = await self.retrieve(response_id)
        live = self.live.get(response_id)
        if live is None or live.task is None:
            raise InvalidRequest(f"Response '{response_id}' is not a running background response "
                                 f"(status: {response['status']}); it cannot be cancelled.", param="response_id")
        live.task.cancel()
        await asyncio.gather(live.task, return_exceptions=True)
        return await self.retrieve(response_id)

    async def cancel_running(self) -> None:
        """At shutdown: background responses still running end as cancelled, and are stored so."""
        tasks = [run.task for run in list(self.live.values()) if run.task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def delete(self, response_id: str) -> dict:
        live = self.live.get(response_id)
        if live and live.task:
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
        if not await self.store.delete(response_id):
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    async def input_items(self, response_id: str, after: str | None, limit: int, order: str) -> dict:
        await self.retrieve(response_id)
        try:
            items, has_more = await self.store.input_items(response_id, after=after, limit=limit, order=order)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return {"object": "list", "data": items, "has_more": has_more,
                "first_id": items[0]["id"] if items else None, "last_id": items[-1]["id"] if items else None}

    async def _conversation(self, response_id: str) -> list[dict]:
        """Every item of the conversation up to and including `response_id`'s output, oldest first."""
        chain: list[dict] = []
        current: str | None = response_id
        while current:
            if len(chain) >= MAX_HISTORY:
                raise InvalidRequest("previous_response_id chain is too long", param="previous_response_id")
            response = await self.store.get(current)
            if response is None:
                raise NotFound(f"Previous response with id '{current}' not found.", param="previous_response_id")
            chain.append(response)
            current = response.get("previous_response_id")
        items: list[dict] = []
        for response in reversed(chain):
            stored, _ = await self.store.input_items(response["id"], limit=10_000, order="asc")
            items += stored + [item for item in response["output"] if item.get("type") in _REPLAYED]
        return items


def next_start(conversation: list[dict], start: int) -> int | None:
    """Where the conversation starts once its oldest turn is dropped: at the next user message (a whole
    turn goes: never a tool output without its call), and never past the newest item."""
    index = start + 1
    while index < len(conversation) - 1 and not (conversation[index].get("type") == "message"
                                                 and conversation[index].get("role") == "user"):
        index += 1
    return index if index < len(conversation) else None


def as_api_error(exc: Exception) -> APIError:
    return exc if isinstance(exc, APIError) else ServerError(f"{type(exc).__name__}: {exc}")


_REPLAYED = {"message", "function_call", "reasoning", "function_call_output", *MCP_ITEM_TYPES}


def base_response(request: CreateResponseRequest) -> dict[str, Any]:
    return {
        "id": new_id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
        "completed_at": None, "error": None, "incomplete_details": None, "instructions": request.instructions,
        "model": request.model, "output": [],
        "tools": [redacted(tool) if tool.get("type") == "mcp" else response_tool(tool) for tool in request.tools or []],
        "parallel_tool_calls": request.parallel_tool_calls, "metadata": request.metadata or {},
        "tool_choice": request.tool_choice or "auto",
        "temperature": 1.0 if request.temperature is None else request.temperature,
        "top_p": 1.0 if request.top_p is None else request.top_p,
        "max_output_tokens": request.max_output_tokens, "max_tool_calls": request.max_tool_calls,
        "previous_response_id": request.previous_response_id,
        "reasoning": {"effort": request.reasoning.effort if request.reasoning else None, "summary": None},
        "store": request.store, "background": request.background, "truncation": request.truncation or "disabled",
        "text": {"format": (request.text.format if request.text and request.text.format else {"type": "text"})},
        **({"user": request.user} if request.user is not None else {}),  # usage: set when it finishes
    }


def response_tool(tool: dict) -> dict:
    """A function tool as the response object echoes it (strict and parameters always present)."""
    return {**tool, "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": bool(tool.get("strict", False))}


def response_usage(*turns: Job) -> dict[str, Any]:
    """The usage of a response: all its model turns' (each turn reads its whole prompt again)."""
    usages = [job.stats.usage() for job in turns]
    input_tokens = sum(usage["prompt_tokens"] for usage in usages)
    output_tokens = sum(usage["completion_tokens"] for usage in usages)
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": sum(job.stats.reasoning_tokens or 0 for job in turns)},
            "total_tokens": input_tokens + output_tokens}


# -- input items -> chat messages ---------------------------------------------------------------
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs",
              "mcp_list_tools": "mcpl", "mcp_call": "mcp", "mcp_approval_request": "mcpr",
              "mcp_approval_response": "mcpa"}
_ROLES = {"user", "system", "developer", "assistant"}


def normalize_input(value: str | list[dict]) -> list[dict]:
    """The input as stored items: each has a type and an id."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    if not value:
        raise InvalidRequest("input must not be empty", param="input")
    items = []
    for index, raw in enumerate(value):
        item = dict(raw)
        kind = item.setdefault("type", "message")
        param = f"input[{index}]"
        if kind not in _ID_PREFIX:
            raise InvalidRequest(f"input item type {kind!r} is not supported", param=f"{param}.type")
        if kind == "message":
            if item.get("role") not in _ROLES:
                raise InvalidRequest("a message needs a role: user, system, developer or assistant",
                                     param=f"{param}.role")
            if isinstance(item.get("content"), str):
                part = "output_text" if item["role"] == "assistant" else "input_text"
                item["content"] = [{"type": part, "text": item["content"]}]
            if not isinstance(item.get("content"), list) or not all(
                    isinstance(p, dict) and isinstance(p.get("text"), str) for p in item["content"]):
                raise InvalidRequest("message content must be a string or text parts", param=f"{param}.content")
        elif kind == "function_call":
            if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
                raise InvalidRequest("a function_call needs call_id, name and arguments", param=param)
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str) or "output" not in item:
                raise InvalidRequest("a function_call_output needs call_id and output", param=param)
        elif kind in MCP_ITEM_TYPES:
            check_mcp_item(item, param)
        if not item.get("id"):  # absent, or null (as SDKs send an approval response's)
            item["id"] = new_id(_ID_PREFIX[kind])
        items.append(item)
    return items


def items_to_messages(items: list[dict]) -> list[dict]:
    messages: list[dict] = []
    reasoning = ""  # a reasoning item belongs to the assistant turn that follows it
    for item in expand_mcp(items):
        kind = item["type"]
        if kind == "reasoning":
            reasoning += "".join(part.get("text", "") for part in item.get("content") or [])
        elif kind == "message":
            text = "".join(part["text"] for part in item["content"])
            message = {"role": item["role"], "content": text}
            if item["role"] == "assistant" and reasoning:
                message["reasoning_content"], reasoning = reasoning, ""
            messages.append(message)
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last and last["role"] == "assistant" and last.get("tool_calls") is not None and not last["content"]:
                last["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                message = {"role": "assistant", "content": "", "tool_calls": [call]}
                if reasoning:
                    message["reasoning_content"], reasoning = reasoning, ""
                messages.append(message)
        elif kind == "function_call_output":
            output = item["output"]
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": output if isinstance(output, str) else json.dumps(output)})
    return messages


def chat_request(request: CreateResponseRequest, items: list[dict],
                 mcp_tools: list[dict] | None = None) -> ChatCompletionRequest:
    """The chat request of one model turn: the conversation so far, the function tools and the MCP tools."""
    messages = items_to_messages(items)
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "parallel_tool_calls": request.parallel_tool_calls}
    tools = [chat_tool(tool, index) for index, tool in enumerate(request.tools or []) if tool.get("type") != "mcp"]
    if tools or mcp_tools:
        body["tools"] = tools + (mcp_tools or [])
    if request.tool_choice is not None:
        choice = request.tool_choice
        if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
            choice = {"type": "function", "function": {"name": choice["name"]}}
        elif isinstance(choice, dict) and choice.get("type") == "mcp":  # one of a server's tools, or any tool
            choice = {"type": "function", "function": {"name": choice["name"]}} if choice.get("name") else "required"
        body["tool_choice"] = choice
    if request.text and request.text.format and request.text.format.get("type") == "json_schema":
        spec = request.text.format
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": spec.get("name", "output"), "schema": spec.get("schema"), "strict": spec.get("strict")}}
    elif request.text and request.text.format:
        body["response_format"] = request.text.format
    for source, target in (("max_output_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                           ("top_p", "top_p"), ("user", "user")):
        if getattr(request, source) is not None:
            body[target] = getattr(request, source)
    if request.reasoning and request.reasoning.effort:
        body["reasoning_effort"] = request.reasoning.effort
    if LOGPROBS in (request.include or []):
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs or 0
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise InvalidRequest(f"invalid request: {first['msg']}", param="input") from exc


def chat_tool(tool: dict, index: int) -> dict:
    if tool.get("type") != "function":
        raise InvalidRequest("only function tools are supported", param=f"tools[{index}].type")
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if key in tool}
    return {"type": "function", "function": function}
