"""The Responses API over the Chat Completions pipeline.

A Responses request is turned into the equivalent chat request (input items and the stored
conversation of `previous_response_id` -> messages; flat function tools -> chat tools;
text.format -> response_format) and prepared by the ChatService, so tool parsing, reasoning
parsing and constraints are the same for every model and engine. Its semantic events are
rendered by a ResponseBuilder; the response object is kept in the store (SQLite by default).

Several replicas may share one store (PostgreSQL). Each stored response that runs here is leased
to this replica (`owner`) and the lease is renewed every `tick` seconds; the same tick reads the
cancel requests other replicas recorded, and fails the responses of replicas whose leases expired.
A replica that does not run a response follows it through the store (`Watch`), not memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Callable

from pydantic import ValidationError

from rostra.errors import APIError, InvalidRequest, NotFound, ServerError
from rostra.generation_defaults import GenerationDefaults
from rostra.parsing.events import Finish
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.responses import CreateResponseRequest
from rostra.serving.chat import ChatService
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.event_log import DEFAULT_INTERVAL, EventLog
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
from rostra.store.base import RUNNING_STATUSES, ResponseStore, StoreError

log = logging.getLogger("rostra.responses")

MAX_HISTORY = 100  # previous_response_id links followed at most
MAX_HISTORY_ITEMS = 10_000  # conversation items read into one prompt at most
LOGPROBS = "message.output_text.logprobs"  # the `include` value asking for output logprobs
ENCRYPTED_REASONING = "reasoning.encrypted_content"  # ... and the one asking for sealed reasoning items
# What `include` may name (OpenAI's list); the values for tools rostra does not have change nothing.
INCLUDABLE = {LOGPROBS, ENCRYPTED_REASONING, "file_search_call.results", "web_search_call.results",
              "web_search_call.action.sources", "message.input_image.image_url",
              "computer_call_output.output.image_url", "code_interpreter_call.outputs"}
# The events that end a response's stream (a cancelled one ends with its status, not an event).
TERMINAL_EVENTS = {"response.completed", "response.failed", "response.incomplete"}
FOLLOW_WAIT = 1.0  # seconds a follower waits for a notification before looking at the status


def replica_id() -> str:
    """This process's name as a lease owner: readable in the database, unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass
class LiveRun:
    """A background response while it runs: its events so far, for followers."""

    task: asyncio.Task[None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False
    finishing: bool = False  # in its final store update: no longer to be cancelled

    def publish(self, event: dict[str, Any]) -> None:
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
    items: list[dict[str, Any]]  # the request's input items, as stored
    conversation: list[dict[str, Any]] = field(default_factory=list)  # the stored history, then the input items
    loop: ToolLoop = field(default_factory=lambda: ToolLoop(McpTools()))  # MCP tools run by rostra
    ready: list[dict[str, Any]] = field(default_factory=list)  # output items made before the model runs (MCP)
    turns: list[Job] = field(default_factory=list)  # the chat job of every model turn, `chat` the last

    # What the access log and the request log read of any job.
    @property
    def id(self) -> str:
        return str(self.builder.response["id"])

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
                 sealer: ReasoningSealer | None = None, *, lease_seconds: float = 10.0,
                 event_interval: float = DEFAULT_INTERVAL):
        self.chat = chat
        self.store = store
        self.mcp_policy = mcp_policy
        self.sealer = sealer or ReasoningSealer(key=secrets.token_bytes(32))  # a key for this process only
        self.live: dict[str, LiveRun] = {}  # background responses running here
        self.streaming: set[str] = set()  # stored foreground streams running here (leased too)
        self.owner = replica_id()
        self.lease_seconds = lease_seconds
        self.event_interval = event_interval  # seconds between batched writes of stream events
        self.tick = min(1.0, lease_seconds / 4)  # several renewals fit in one lease
        self._keeper: asyncio.Task[None] | None = None

    # -- leases ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """After the store is open: recover what a previous run left, then keep leases."""
        if self.store.shared:  # other replicas may be running theirs: only expired leases are dead
            failed = len(await self.store.fail_expired_leases())
        else:  # this process owns the store: whatever was running, stopped with the last process
            failed = await self.store.mark_interrupted()
        if failed:
            log.warning("%d stored response(s) were running on a server that stopped: marked failed", failed)
        self._keeper = asyncio.create_task(self._keep_leases())

    async def stop(self) -> None:
        """At shutdown, before the store closes: running background responses end as cancelled."""
        await self.cancel_running()
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)

    async def _keep_leases(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self._renew_and_sweep()
            except Exception:  # a database hiccup must not end lease keeping for good
                log.exception("renewing leases failed; trying again in %.1f s", self.tick)

    async def _renew_and_sweep(self) -> None:
        running = [*self.live, *self.streaming]
        held = await self.store.renew_leases(self.owner, running, self.lease_seconds)
        for response_id in running:
            live = self.live.get(response_id)
            if live is None or live.task is None or live.finishing:
                continue
            if response_id not in held:
                log.warning("response %s is no longer this server's to run (deleted, or failed after its "
                            "lease expired): stopping it", response_id)
            if response_id not in held or held[response_id]:  # lost, or a cancel was asked elsewhere
                live.task.cancel()
        failed = await self.store.fail_expired_leases()
        if failed:
            log.warning("marked failed, their server's lease expired: %s", ", ".join(failed))

    # -- create ----------------------------------------------------------------------------
    async def prepare(self, request: CreateResponseRequest) -> ResponseJob:
        if request.background and not request.store:
            raise InvalidRequest("background responses must be stored (store: true)", param="background")
        for index, value in enumerate(request.include or []):
            if value not in INCLUDABLE:
                raise InvalidRequest(f"include: unknown value {value!r}", param=f"include[{index}]")
        items = normalize_input(request.input)
        reference = conversation_id(request)
        if reference and request.previous_response_id:
            raise InvalidRequest("give either previous_response_id or conversation, not both", param="conversation")
        if reference:
            history = await self._conversation_items(reference)
        elif request.previous_response_id:
            history = await self._conversation(request.previous_response_id)
        else:
            history = []
        conversation = (opened(history, self.sealer, "conversation" if reference else "previous_response_id")
                        + opened(items, self.sealer))
        servers = requested_servers(request.tools, self.mcp_policy)
        functions = {tool["name"] for tool in request.tools or []
                     if tool.get("type") == "function" and isinstance(tool.get("name"), str)}
        loop = ToolLoop(await resolve(servers, conversation, functions) if servers else McpTools(),
                        request.max_tool_calls)
        ready = loop.tools.listings + await approved_calls(items, conversation, loop)
        builder = ResponseBuilder(base_response(request, self.chat.defaults))
        job = await self._turn(request, conversation + ready, loop.chat_tools(), builder)
        builder.mcp = loop.tools.labels()
        if ENCRYPTED_REASONING in (request.include or []):
            builder.sealer = self.sealer
        return ResponseJob(request, job, builder, items, conversation, loop, ready, [job])

    async def _turn(self, request: CreateResponseRequest, conversation: list[dict[str, Any]],
                    tools: list[dict[str, Any]], builder: ResponseBuilder) -> Job:
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
                start = next_start(conversation, dropped)
                if start is None:  # nothing left to drop but the newest item
                    raise
                dropped = start
        if dropped:
            builder.response["truncated_items"] = max(dropped, builder.response.get("truncated_items", 0))
            log.info("response %s: %d oldest conversation items dropped to fit the context",
                     builder.response["id"], dropped)
        return job

    async def complete(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
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

    async def stream(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        """A streamed response; every event is stored as it goes (when stored) for replay."""
        response, store = job.builder.response, job.request.store
        event_log = None
        if store:
            await self.store.create(response, job.items, owner=self.owner, lease_seconds=self.lease_seconds)
            self.streaming.add(response["id"])
            event_log = EventLog(self.store, response["id"], self.event_interval)
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for event in events:
                    if event_log is not None:
                        event_log.append(event)
                        if event["type"] in TERMINAL_EVENTS:  # the client hears of the end once it is all stored
                            await event_log.flush()
                    yield event
        except Exception as exc:  # the store failed (the engine's failures are events already)
            log.exception("response %s failed", response["id"])
            for event in job.builder.fail(as_api_error(exc)):
                yield event
        finally:
            if response["status"] == "in_progress":  # the client left mid-stream
                response["status"] = "cancelled"
            if event_log is not None:
                self.streaming.discard(response["id"])
                await self._store_final(response, event_log)

    async def start_background(self, job: ResponseJob, deadline: Deadline,
                               on_done: Callable[[], None]) -> dict[str, Any]:
        """Store the response as queued and run it in a task of its own; `on_done` runs when the run has
        ended, however it ends."""
        response = job.builder.response
        response["status"] = "queued"
        await self.store.create(response, job.items, owner=self.owner, lease_seconds=self.lease_seconds)
        live = self.live[response["id"]] = LiveRun()
        live.task = asyncio.create_task(self._run_in_background(job, deadline, live))
        live.task.add_done_callback(lambda _: on_done())  # runs even for a task cancelled before it started
        return dict(response)

    async def _run_in_background(self, job: ResponseJob, deadline: Deadline, live: LiveRun) -> None:
        response = job.builder.response
        event_log = EventLog(self.store, response["id"], self.event_interval)
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for event in events:
                    event_log.append(event)
                    if event["type"] == "response.in_progress":  # what a client polling any replica sees
                        await self.store.update(response)
                    elif event["type"] in TERMINAL_EVENTS:  # followers here hear of the end once it is stored
                        await event_log.flush()
                    live.publish(event)
        except asyncio.CancelledError:
            response["status"] = "cancelled"
        except Exception as exc:  # a store error: the run fails, and says so to its followers
            log.exception("background response %s failed", response["id"])
            for event in job.builder.fail(as_api_error(exc)):
                live.publish(event)
        finally:
            live.finishing = True
            try:
                await asyncio.shield(self._store_final(response, event_log))
            finally:  # followers here end even if this task is cancelled once more meanwhile
                live.end()
                self.live.pop(response["id"], None)

    async def _store_final(self, response: dict[str, Any], events: EventLog) -> None:
        """The end of a run this replica owns: its events still queued, then its final state (a follower
        that sees the response ended finds every event stored). Unless the response was deleted meanwhile,
        or failed by another replica (this one's lease expired): then there is nothing left to write."""
        try:
            await events.flush()
        except Exception:  # already reported by the stream, which failed for it
            pass
        try:
            if not await self.store.finish(response, self.owner):
                log.warning("response %s was deleted, or failed by another replica, before it ended here",
                            response["id"])
        except Exception:  # nothing more can be done: its lease expires and a sweep marks it failed
            log.exception("could not store the final state of response %s", response["id"])

    async def _events(self, job: ResponseJob, deadline: Deadline) -> AsyncGenerator[dict[str, Any], None]:
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
        final = builder.finish(reason, response_usage(*(job.turns or [job.chat])))
        conversation = conversation_id(job.request)
        if conversation:  # before the client hears of the end, so its next response sees these items
            output = [item for item in builder.response["output"] if item.get("type") in _REPLAYED]
            await self.store.add_conversation_items(conversation, with_status(job.items + output))
        yield final

    # -- read, follow, cancel, delete ------------------------------------------------------------
    async def retrieve(self, response_id: str) -> dict[str, Any]:
        response = await self.store.get(response_id)
        if response is None:
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return response

    async def follow(self, response_id: str, starting_after: int | None) -> AsyncGenerator[dict[str, Any], None]:
        """Stored events after `starting_after`, then live ones until the response ends."""
        await self.retrieve(response_id)
        live = self.live.get(response_id)  # taken before the store is read: no event falls between the two
        if live is None:  # finished, or running on another replica: the store has it all
            async for event in self._follow_store(response_id, starting_after):
                yield event
            return
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

    async def _follow_store(self, response_id: str, starting_after: int | None) -> AsyncGenerator[dict[str, Any], None]:
        """The logged events after `starting_after`, read by sequence number (so never repeated
        nor reordered) each time the store says there may be more, until the response ends."""
        last = -1 if starting_after is None else starting_after
        with self.store.watch(response_id) as watch:  # opened before the first read: no wake-up lost
            while True:
                events = await self.store.events(response_id, last)
                for event in events:
                    last = event["sequence_number"]
                    yield event
                if events and events[-1]["type"] in TERMINAL_EVENTS:
                    return
                if not events and not await self._running(response_id):
                    for event in await self.store.events(response_id, last):  # logged before it ended
                        last = event["sequence_number"]
                        yield event
                    return
                await watch.wait(FOLLOW_WAIT)

    async def _running(self, response_id: str) -> bool:
        response = await self.store.get(response_id)
        return response is not None and response["status"] in RUNNING_STATUSES

    async def cancel(self, response_id: str) -> dict[str, Any]:
        response = await self.retrieve(response_id)
        live = self.live.get(response_id)
        if live is not None and live.task is not None:
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
            return await self.retrieve(response_id)
        if response.get("background") and await self.store.request_cancel(response_id):
            return await self._until_ended(response_id)  # its replica reads the request within a tick
        raise InvalidRequest(f"Response '{response_id}' is not a running background response "
                             f"(status: {response['status']}); it cannot be cancelled.", param="response_id")

    async def _until_ended(self, response_id: str) -> dict[str, Any]:
        """The response once it has stopped running on whichever replica runs it. If that replica
        died, its lease expires and a sweep fails the response: bounded by about two leases."""
        deadline = asyncio.get_running_loop().time() + 2 * self.lease_seconds + 2 * self.tick
        with self.store.watch(response_id) as watch:
            while await self._running(response_id) and asyncio.get_running_loop().time() < deadline:
                await watch.wait(self.tick)
        return await self.retrieve(response_id)

    async def cancel_running(self) -> None:
        """At shutdown: background responses still running end as cancelled, and are stored so."""
        tasks = [run.task for run in list(self.live.values()) if run.task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def delete(self, response_id: str) -> dict[str, Any]:
        live = self.live.get(response_id)
        if live and live.task:
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
        if not await self.store.delete(response_id):
            raise NotFound(f"No response found with id '{response_id}'.", param="response_id")
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    async def input_items(self, response_id: str, after: str | None, limit: int, order: str) -> dict[str, Any]:
        await self.retrieve(response_id)
        try:
            items, has_more = await self.store.input_items(response_id, after=after, limit=limit, order=order)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return {"object": "list", "data": items, "has_more": has_more,
                "first_id": items[0]["id"] if items else None, "last_id": items[-1]["id"] if items else None}

    async def _conversation_items(self, conversation: str) -> list[dict[str, Any]]:
        if await self.store.get_conversation(conversation) is None:
            raise NotFound(f"Conversation with id '{conversation}' not found.", param="conversation")
        items, _ = await self.store.conversation_items(conversation, limit=MAX_HISTORY_ITEMS, order="asc")
        return items

    async def _conversation(self, response_id: str) -> list[dict[str, Any]]:
        """Every item of the conversation up to and including `response_id`'s output, oldest first."""
        chain: list[dict[str, Any]] = []
        current: str | None = response_id
        while current:
            if len(chain) >= MAX_HISTORY:
                raise InvalidRequest("previous_response_id chain is too long", param="previous_response_id")
            response = await self.store.get(current)
            if response is None:
                raise NotFound(f"Previous response with id '{current}' not found.", param="previous_response_id")
            chain.append(response)
            current = response.get("previous_response_id")
        items: list[dict[str, Any]] = []
        for response in reversed(chain):
            stored, _ = await self.store.input_items(response["id"], limit=10_000, order="asc")
            items += stored + [item for item in response["output"] if item.get("type") in _REPLAYED]
        return items


def conversation_id(request: CreateResponseRequest) -> str | None:
    conversation = request.conversation
    if isinstance(conversation, dict):
        reference = conversation.get("id")
        if not isinstance(reference, str):
            raise InvalidRequest("conversation must be an id or {\"id\": ...}", param="conversation")
        return reference
    return conversation


def with_status(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as the API returns them from a conversation: every one has a status."""
    return [{**item, "status": item.get("status") or "completed"} for item in items]


def next_start(conversation: list[dict[str, Any]], start: int) -> int | None:
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


def base_response(request: CreateResponseRequest, defaults: GenerationDefaults = GenerationDefaults()) -> dict[str, Any]:
    """The response object before any output; temperature and top_p are those in force."""
    return {
        "id": new_id("resp"), "object": "response", "created_at": int(time.time()), "status": "in_progress",
        "completed_at": None, "error": None, "incomplete_details": None, "instructions": request.instructions,
        "model": request.model, "output": [],
        "tools": [redacted(tool) if tool.get("type") == "mcp" else response_tool(tool) for tool in request.tools or []],
        "parallel_tool_calls": request.parallel_tool_calls, "metadata": request.metadata or {},
        "tool_choice": request.tool_choice or "auto",
        "temperature": defaults.get("temperature", 1.0) if request.temperature is None else request.temperature,
        "top_p": defaults.get("top_p", 1.0) if request.top_p is None else request.top_p,
        "max_output_tokens": request.max_output_tokens, "max_tool_calls": request.max_tool_calls,
        "previous_response_id": request.previous_response_id,
        "reasoning": {"effort": request.reasoning.effort if request.reasoning else None, "summary": None},
        "store": request.store, "background": request.background, "truncation": request.truncation or "disabled",
        "conversation": {"id": conversation_id(request)} if request.conversation else None,
        "text": {"format": (request.text.format if request.text and request.text.format else {"type": "text"})},
        **({"user": request.user} if request.user is not None else {}),  # usage: set when it finishes
    }


def response_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A function tool as the response object echoes it (strict and parameters always present)."""
    return {**tool, "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            "strict": bool(tool.get("strict", False))}


def response_usage(*turns: Job) -> dict[str, Any]:
    """The usage of a response: all its model turns' (each turn reads its whole prompt again)."""
    usages = [job.stats.usage() for job in turns]
    input_tokens = sum(usage["prompt_tokens"] for usage in usages)
    output_tokens = sum(usage["completion_tokens"] for usage in usages)
    return {"input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": sum(job.stats.cached_tokens for job in turns),
                                     "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": sum(job.stats.reasoning_tokens or 0 for job in turns)},
            "total_tokens": input_tokens + output_tokens}


# -- input items -> chat messages ---------------------------------------------------------------
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs",
              "mcp_list_tools": "mcpl", "mcp_call": "mcp", "mcp_approval_request": "mcpr",
              "mcp_approval_response": "mcpa"}
_ROLES = {"user", "system", "developer", "assistant"}


def normalize_input(value: str | list[dict[str, Any]], param: str = "input") -> list[dict[str, Any]]:
    """The input as stored items: each has a type and an id. `param` names the list in errors."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    if not value:
        raise InvalidRequest(f"{param} must not be empty", param=param)
    items = []
    list_param = param
    for index, raw in enumerate(value):
        item = dict(raw)
        kind = item.setdefault("type", "message")
        param = f"{list_param}[{index}]"
        if kind not in _ID_PREFIX:
            raise InvalidRequest(f"input item type {kind!r} is not supported", param=f"{param}.type")
        if kind == "message":
            if item.get("role") not in _ROLES:
                raise InvalidRequest("a message needs a role: user, system, developer or assistant",
                                     param=f"{param}.role")
            if isinstance(item.get("content"), str):
                item["content"] = [text_part(item["role"], item["content"])]
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


def text_part(role: str, text: str) -> dict[str, Any]:
    """A message's text as the part the API lists it with (an assistant's is output text)."""
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "input_text", "text": text}


def items_to_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
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


def chat_request(request: CreateResponseRequest, items: list[dict[str, Any]],
                 mcp_tools: list[dict[str, Any]] | None = None) -> ChatCompletionRequest:
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


def chat_tool(tool: dict[str, Any], index: int) -> dict[str, Any]:
    if tool.get("type") != "function":
        raise InvalidRequest("only function tools are supported", param=f"tools[{index}].type")
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if key in tool}
    return {"type": "function", "function": function}
