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
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from pydantic import ValidationError

from rostra.errors import APIError, InvalidRequest, NotFound
from rostra.generation_defaults import GenerationDefaults
from rostra.parsing.events import Finish
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.responses import CreateResponseRequest
from rostra.serving.chat import ChatService
from rostra.serving.generation import Job
from rostra.serving.responses_render import ResponseBuilder, new_id
from rostra.store.base import ResponseStore, StoreError

MAX_HISTORY = 100  # previous_response_id links followed at most
LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs


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


class ResponsesService:
    def __init__(self, chat: ChatService, store: ResponseStore):
        self.chat = chat
        self.store = store
        self.live: dict[str, LiveRun] = {}

    # -- create ----------------------------------------------------------------------------
    async def create(self, request: CreateResponseRequest) -> dict | AsyncIterator[dict]:
        if request.background and not request.store:
            raise InvalidRequest("background responses must be stored (store: true)", param="background")
        items = normalize_input(request.input)
        history = await self._conversation(request.previous_response_id) if request.previous_response_id else []
        job = await self.chat.prepare(chat_request(request, history + items))
        builder = ResponseBuilder(base_response(request, self.chat.defaults))
        if request.background:
            builder.response["status"] = "queued"
            await self.store.create(builder.response, items)
            live = self.live[builder.response["id"]] = LiveRun()
            live.task = asyncio.create_task(self._run_in_background(job, builder, live))
            return self.follow(builder.response["id"], None) if request.stream else dict(builder.response)
        if request.stream:
            return self._stream(job, builder, items, request.store)
        async with aclosing(self._events(job, builder)) as events:
            async for _ in events:
                pass
        if request.store:
            await self.store.create(builder.response, items)
        return builder.response

    async def _stream(self, job: Job, builder: ResponseBuilder, items: list[dict], store: bool) -> AsyncIterator[dict]:
        if store:
            await self.store.create(builder.response, items)
        try:
            async with aclosing(self._events(job, builder)) as events:
                async for event in events:
                    if store:
                        await self.store.append_event(builder.response["id"], event)
                    yield event
        finally:
            if store:
                if builder.response["status"] == "in_progress":  # the client left mid-stream
                    builder.response["status"] = "cancelled"
                await self.store.update(builder.response)

    async def _run_in_background(self, job: Job, builder: ResponseBuilder, live: LiveRun) -> None:
        response_id = builder.response["id"]
        try:
            async with aclosing(self._events(job, builder)) as events:
                async for event in events:
                    await self.store.append_event(response_id, event)
                    live.publish(event)
        except asyncio.CancelledError:
            builder.response["status"] = "cancelled"
        finally:
            await asyncio.shield(self.store.update(builder.response))
            live.done = True
            live.publish({"type": "_end"})
            self.live.pop(response_id, None)

    async def _events(self, job: Job, builder: ResponseBuilder) -> AsyncIterator[dict]:
        yield builder.lifecycle("response.created")
        builder.response["status"] = "in_progress"
        yield builder.lifecycle("response.in_progress")
        reason = "stop"
        try:
            async with aclosing(self.chat.events(job)) as events:
                async for _, event in events:
                    for out in builder.add(event):
                        yield out
                    if isinstance(event, Finish):
                        reason = event.reason
        except APIError as exc:
            yield builder.fail(exc.message)
            return
        yield builder.finish(reason, response_usage(job))

    # -- read, follow, cancel, delete ------------------------------------------------------------
    async def retrieve(self, response_id: str) -> dict:
        response = await self.store.get(response_id)
        if response is None:
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return response

    async def follow(self, response_id: str, starting_after: int | None) -> AsyncIterator[dict]:
        """Stored events after `starting_after`, then live ones until the response ends."""
        await self.retrieve(response_id)
        live = self.live.get(response_id)
        last = -1 if starting_after is None else starting_after
        for event in await self.store.events(response_id, last):
            last = event["sequence_number"]
            yield event
        while live is not None and not live.done:
            waiting = live.changed
            for event in list(live.events):
                if event["type"] != "_end" and event["sequence_number"] > last:
                    last = event["sequence_number"]
                    yield event
            if live.done:
                break
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


_REPLAYED = {"message", "function_call", "reasoning", "function_call_output"}


def base_response(request: CreateResponseRequest, defaults: GenerationDefaults = GenerationDefaults()) -> dict[str, Any]:
    """The response object before any output; temperature and top_p are those in force."""
    return {
        "id": new_id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
        "completed_at": None, "error": None, "incomplete_details": None, "instructions": request.instructions,
        "model": request.model, "tools": [response_tool(tool) for tool in request.tools or []], "output": [],
        "parallel_tool_calls": request.parallel_tool_calls, "metadata": request.metadata or {},
        "tool_choice": request.tool_choice or "auto",
        "temperature": defaults.get("temperature", 1.0) if request.temperature is None else request.temperature,
        "top_p": defaults.get("top_p", 1.0) if request.top_p is None else request.top_p,
        "max_output_tokens": request.max_output_tokens, "previous_response_id": request.previous_response_id,
        "reasoning": {"effort": request.reasoning.effort if request.reasoning else None, "summary": None},
        "store": request.store, "background": request.background, "truncation": "disabled",
        "text": {"format": (request.text.format if request.text and request.text.format else {"type": "text"})},
        **({"user": request.user} if request.user is not None else {}),  # usage: set when it finishes
    }


def response_tool(tool: dict) -> dict:
    """A function tool as the response object echoes it (strict and parameters always present)."""
    return {**tool, "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": bool(tool.get("strict", False))}


def response_usage(job: Job) -> dict[str, Any]:
    usage = job.stats.usage()
    return {"input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": job.stats.reasoning_tokens or 0},
            "total_tokens": usage["total_tokens"]}


# -- input items -> chat messages ---------------------------------------------------------------
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}
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
        item.setdefault("id", new_id(_ID_PREFIX[kind]))
        items.append(item)
    return items


def items_to_messages(items: list[dict]) -> list[dict]:
    messages: list[dict] = []
    reasoning = ""  # a reasoning item belongs to the assistant turn that follows it
    for item in items:
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


def chat_request(request: CreateResponseRequest, items: list[dict]) -> ChatCompletionRequest:
    messages = items_to_messages(items)
    if request.instructions:
        messages.insert(0, {"role": "system", "content": request.instructions})
    body: dict[str, Any] = {"model": request.model, "messages": messages,
                            "parallel_tool_calls": request.parallel_tool_calls}
    if request.tools:
        body["tools"] = [chat_tool(tool, index) for index, tool in enumerate(request.tools)]
    if request.tool_choice is not None:
        choice = request.tool_choice
        if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
            choice = {"type": "function", "function": {"name": choice["name"]}}
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
