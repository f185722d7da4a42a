"""The Responses API over the shared pipeline.

Each model turn of a Responses request is a typed turn (input items and the stored conversation of
`previous_response_id` -> the turn's messages; its tools -> functions; text.format -> the constraint:
to_chat.py) prepared by the ChatService, so tool parsing, reasoning
parsing and constraints are the same for every model and engine. Its semantic events are
rendered by a ResponseBuilder (render.py); the response object is kept in the store (SQLite by default),
and the runs of stored responses (leases, background tasks, followers, cancel, delete) are the RunRegistry's
(runs.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, AsyncGenerator, Callable

from rostra.api.responses.compaction import asking_for_summary, compaction_requested, summary_request
from rostra.api.responses.event_log import DEFAULT_INTERVAL
from rostra.api.responses.file_inputs import FileReader, reads_files, with_files_read
from rostra.api.responses.file_search import FileSearcher, serve_file_search
from rostra.api.responses.items import MCP_ITEM_TYPES, normalize_input, with_status
from rostra.api.responses.builtin_tools import HostedRoute, serve_hosted_tools, speaks_harmony_prompts
from rostra.api.responses.calls import orphan_output
from rostra.api.responses.mcp.loop import ToolLoop, approved_calls, awaits_client
from rostra.api.responses.mcp.tools import McpPolicy, McpTools, requested_servers, resolve
from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.objects import new_id
from rostra.api.responses.render import ResponseBuilder
from rostra.api.responses.response_messages import response_messages
from rostra.api.responses.runs import DEFAULT_MAX_BACKGROUND, RunRegistry, ended_on_error
from rostra.api.responses.to_chat import (LOGPROBS, forced_freeform, input_paths, next_start, offer,
                                          response_turn)
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.wire import (ConversationReference, Deleted, InputTokensDetails, ItemPage,
                                       OutputBudget, OutputTokensDetails, ReasoningEcho, ResponseUsage)
from rostra.api.responses.tools import Tool, ignored_tools, parse_tools
from rostra.errors import APIError, InvalidRequest, NotFound
from rostra.generation_defaults import GenerationDefaults
from rostra.http.scope import RequestScope
from rostra.serving.chat import ChatService
from rostra.serving.deadline import NO_DEADLINE, Deadline
from rostra.serving.budget import check_context
from rostra.serving.job import Job, OverChatJob
from rostra.serving.rendering import rendered
from rostra.serving.reasoning_crypto import ReasoningSealer, opened
from rostra.store.base import ResponseStore, StoreError
from rostra.store.tenancy import EVERYONE, Tenant

log = logging.getLogger("rostra.responses")

MAX_HISTORY = 100  # previous_response_id links followed at most
MAX_HISTORY_ITEMS = 10_000  # conversation items read into one prompt at most
ENCRYPTED_REASONING = "reasoning.encrypted_content"  # the `include` value asking for sealed reasoning items
# What `include` may name (OpenAI's list); the values for tools rostra does not have change nothing.
INCLUDABLE = {LOGPROBS, ENCRYPTED_REASONING, "file_search_call.results", "web_search_call.results",
              "web_search_call.action.sources", "message.input_image.image_url",
              "computer_call_output.output.image_url", "code_interpreter_call.outputs"}
# The output items a later turn of the conversation reads again.
REPLAYED = {"message", "function_call", "reasoning", "function_call_output", "custom_tool_call",
            "custom_tool_call_output", "local_shell_call", "local_shell_call_output", *MCP_ITEM_TYPES}


@dataclass
class TurnInputs:
    """What a request's first model turn reads (see ResponsesService._inputs)."""

    items: list[dict[str, Any]]  # the request's input items, as stored
    tools: list[Tool]
    conversation: list[dict[str, Any]]  # the stored history, then the input items
    loop: ToolLoop = field(default_factory=lambda: ToolLoop(McpTools()))
    ready: list[dict[str, Any]] = field(default_factory=list)  # output items made before the model runs (MCP)
    approved: list[dict[str, Any]] = field(default_factory=list)  # approved MCP calls not run yet
    hosted: dict[str, HostedRoute] = field(default_factory=dict)  # hosted tools' functions, by the model's name


@dataclass
class ResponseJob(OverChatJob):
    """One prepared Responses request: the chat job that generates it and the builder that is its response."""

    request: CreateResponseRequest
    chat: Job
    builder: ResponseBuilder
    items: list[dict[str, Any]]  # the request's input items, as stored
    conversation: list[dict[str, Any]] = field(default_factory=list)  # the stored history, then the input items
    loop: ToolLoop = field(default_factory=lambda: ToolLoop(McpTools()))  # MCP tools run by rostra
    ready: list[dict[str, Any]] = field(default_factory=list)  # output items made before the model runs (MCP)
    turns: list[Job] = field(default_factory=list)  # the chat job of every model turn, `chat` the last
    tools: list[Tool] = field(default_factory=list)  # the request's tools, typed
    approved: list[dict[str, Any]] = field(default_factory=list)  # approved MCP calls, run as the first step
    tenant: Tenant = EVERYONE  # who asked: the stored response is its key's

    async def close(self) -> None:
        """Free what its turns' jobs hold (a relayed upstream) if they never ran."""
        for turn in self.turns:
            await turn.close()

    @property
    def id(self) -> str:  # the response's id, not its last turn's chat job's
        return self.builder.response.id


class ResponsesService:
    def __init__(self, chat_for: Callable[[str], ChatService], store: ResponseStore,
                 mcp_policy: McpPolicy = McpPolicy(),
                 sealer: ReasoningSealer | None = None, *, lease_seconds: float = 10.0,
                 event_interval: float = DEFAULT_INTERVAL, shutdown_grace: float = 10.0,
                 max_background: int | None = DEFAULT_MAX_BACKGROUND):
        # The ChatService of a request's model: a conversation may go on with another model (the endpoint
        # holds a lease on the request's model for as long as the response runs).
        self.chat_for = chat_for
        self.store = store
        self.files: FileReader | None = None  # the Files API's, where input parts name uploaded files (app.py)
        self.file_searcher: FileSearcher | None = None  # the vector stores', for the file_search tool (app.py)
        self.mcp_policy = mcp_policy
        self.sealer = sealer or ReasoningSealer(key=secrets.token_bytes(32))  # a key for this process only
        self.runs = RunRegistry(store, lease_seconds=lease_seconds, event_interval=event_interval,
                                shutdown_grace=shutdown_grace, max_background=max_background)

    async def start(self) -> None:
        """After the store is open: recover what a previous run left, then keep leases."""
        await self.runs.start()

    async def stop(self) -> None:
        """At shutdown, before the store closes."""
        await self.runs.stop()

    # -- create ----------------------------------------------------------------------------
    def for_tenant(self, tenant: Tenant) -> "TenantResponses":
        """This service as `tenant` drives it through the generation endpoint."""
        return TenantResponses(self, tenant)

    async def prepare(self, request: CreateResponseRequest, tenant: Tenant = EVERYONE,
                      known: Mapping[str, list[dict[str, Any]]] = MappingProxyType({})) -> ResponseJob:
        """`tenant`: who asks; what the request continues (previous_response_id, conversation, item
        references) must be visible to it, and the stored response will be its key's. `known`: conversations
        the caller holds, by the id of the response they end with (a WebSocket's connection-local cache, where a
        `store: false` response lives on): a previous_response_id found there is read from there, not the store."""
        if request.background and not request.store:
            raise InvalidRequest("background responses must be stored (store: true)", param="background")
        if request.background:  # before any work: a full server says so at once
            self.runs.check_room()
        inputs = await self._inputs(request, tenant, known)
        items, tools, conversation, loop = inputs.items, inputs.tools, inputs.conversation, inputs.loop
        if compaction_requested(items):
            return await self._compact(request, tools, conversation, items)
        ready, approved = inputs.ready, inputs.approved
        defaults = self.chat_for(request.model).defaults
        builder = ResponseBuilder(base_response(request, tools, defaults), offer(tools)[1],
                                  summary=bool(request.reasoning and request.reasoning.summary))
        freeform = forced_freeform(request, tools)
        builder.freeform = freeform.name if freeform else None
        job = await self._turn(request, tools, conversation + ready, loop.chat_tools(), builder, input_paths(items))
        builder.mcp.tools, builder.mcp.hosted.routes = loop.tools.labels(), inputs.hosted
        builder.mcp.hosted.include_results = "file_search_call.results" in (request.include or [])
        if ENCRYPTED_REASONING in (request.include or []):
            builder.sealer = self.sealer
        return ResponseJob(request, job, builder, items, conversation, loop, ready, [job], tools, approved, tenant)

    async def _inputs(self, request: CreateResponseRequest, tenant: Tenant,
                      known: Mapping[str, list[dict[str, Any]]] = MappingProxyType({})) -> TurnInputs:
        """What the request's first model turn reads: its items, the stored conversation it continues, its tools
        and the MCP servers' (listed), and the approved MCP calls (with the results of those that already ran)."""
        for index, value in enumerate(request.include or []):
            if value not in INCLUDABLE:
                raise InvalidRequest(f"include: unknown value {value!r}", param=f"include[{index}]")
        items = await self._resolved(normalize_input(request.input), tenant)
        if reads_files(items):
            if self.files is None:
                raise InvalidRequest("this server reads no files: send images as image_url and files' text as "
                                     "input_text", param="input")
            items = await with_files_read(items, self.files, tenant, self.chat_for(request.model).images.limits)
        tools, hosted = serve_hosted_tools(parse_tools(request.tools), self.mcp_policy,
                                           speaks_harmony_prompts(self.chat_for(request.model)))
        tools, searched = await serve_file_search(tools, self.file_searcher, tenant)
        hosted = {**hosted, **searched}
        for ignored in ignored_tools(tools):
            log.warning("tools[%d]: %s is %s: not offered to the model", ignored["index"], ignored["type"],
                        ignored["reason"])
        reference = conversation_id(request)
        if reference and request.previous_response_id:
            raise InvalidRequest("give either previous_response_id or conversation, not both", param="conversation")
        if reference:
            history = await self._conversation_items(reference, tenant)
        elif request.previous_response_id and request.previous_response_id in known:
            history = known[request.previous_response_id]
        elif request.previous_response_id:
            history = await self._conversation(request.previous_response_id, tenant)
        else:
            history = []
        conversation = (opened(history, self.sealer, "conversation" if reference else "previous_response_id")
                        + opened(items, self.sealer))
        orphan = orphan_output(items, conversation)
        if orphan is not None:  # OpenAI's answer: the model would read a result of a call it never made
            raise InvalidRequest(f"No tool call found for function call output with call_id {orphan}.",
                                 param="input")
        if compaction_requested(items):
            return TurnInputs(items, tools, conversation)
        servers = requested_servers(tools, self.mcp_policy)
        functions = set(offer(tools)[1].by_model_name)  # names MCP tools must not take
        loop = ToolLoop(await resolve(servers, conversation, functions) if servers else McpTools(),
                        request.max_tool_calls, hosted=hosted)
        approved = approved_calls(items, conversation, loop)
        ran = await self._ran_before(approved, tenant)  # a retry's calls keep their first run's result
        ready = loop.tools.listings + [ran.get(call["id"], call) for call in approved]
        approved = [call for call in approved if call["id"] not in ran]
        return TurnInputs(items, tools, conversation, loop, ready, approved, hosted)

    async def _compact(self, request: CreateResponseRequest, tools: list[Tool], conversation: list[dict[str, Any]],
                       items: list[dict[str, Any]]) -> ResponseJob:
        """A compaction turn: the model summarizes the conversation; its answer is one compaction item."""
        builder = ResponseBuilder(base_response(request, tools, self.chat_for(request.model).defaults))
        builder.compaction = self.sealer
        job = await self._turn(summary_request(request), [], asking_for_summary(conversation), [], builder)
        return ResponseJob(request, job, builder, items, conversation, turns=[job], tools=tools)

    async def count_input_tokens(self, request: CreateResponseRequest, tenant: Tenant = EVERYONE) -> int:
        """The prompt's tokens as POST /v1/responses would count them (stored history, instructions, tools and
        template included): the same turn through the same template, never prepared for a generation (a model
        an upstream serves is not counted: 501). Output and delivery fields do not count; a prompt the context
        cannot hold is a 400, unless `truncation: "auto"` drops its oldest turns as the response would.
        `tenant`: who asks; another key's stored history is a 404 here as on POST /v1/responses."""
        counted = request.model_copy(update={"max_output_tokens": None, "background": False, "stream": False})
        inputs = await self._inputs(counted, tenant)
        chat = self.chat_for(counted.model)
        context_length = chat.engine.model_info(counted.model).context_length
        conversation, dropped = inputs.conversation + inputs.ready, 0
        while True:
            if compaction_requested(inputs.items):
                turn = response_turn(summary_request(counted), [], asking_for_summary(conversation[dropped:]))
            else:
                turn = response_turn(counted, inputs.tools, conversation[dropped:], inputs.loop.chat_tools(),
                                     input_paths(inputs.items))
            tokens = await chat.count_prompt_tokens(turn)
            start = next_start(conversation, dropped) if counted.truncation == "auto" else None
            if tokens < context_length or start is None:
                check_context(tokens, None, context_length, "input", "max_output_tokens")
                return tokens
            dropped = start

    async def _turn(self, request: CreateResponseRequest, tools: list[Tool], conversation: list[dict[str, Any]],
                    mcp_tools: list[dict[str, Any]], builder: ResponseBuilder,
                    paths: Mapping[str, str] = MappingProxyType({})) -> Job:
        """The job of one model turn (`paths`: the request's input items', to_chat.input_paths). With `truncation: "auto"`, a conversation that outgrows the context
        loses its oldest items (whole turns: it then starts at a user message) until it fits; the response says how
        many (`truncated_items`)."""
        dropped = 0
        while True:
            try:
                chat = self.chat_for(request.model)
                job = await chat.prepare_turn(response_turn(request, tools, conversation[dropped:], mcp_tools, paths))
                break
            except InvalidRequest as exc:
                if request.truncation != "auto" or exc.code != "context_length_exceeded":
                    raise
                start = next_start(conversation, dropped)
                if start is None:  # nothing left to drop but the newest item
                    raise
                dropped = start
        if dropped:
            builder.response.truncated_items = max(dropped, builder.response.truncated_items or 0)
            log.info("response %s: %d oldest conversation items dropped to fit the context",
                     builder.response.id, dropped)
        return job

    async def complete(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> ResponseObject:
        """A non-streamed response: the fold of its events. A failure is raised (as for Chat), once stored."""
        try:
            async with aclosing(self._events(job, deadline)) as events:
                async for _ in events:
                    pass
        finally:
            await job.close()
            if job.request.store and job.builder.response.status != "in_progress":  # not if the client left
                await self.store.create(job.builder.response.wire(), job.items, tenant=job.tenant.key)
        if job.builder.error is not None:
            raise job.builder.error
        return job.builder.response

    async def stream(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        """A streamed response; every event is stored as it goes (when stored) for replay."""
        events = self._events(job, deadline)
        if job.request.store:
            events = self.runs.stream(job.builder.response, job.items, events, job.builder.fail, job.tenant.key)
        else:
            events = ended_on_error(events, job.builder.fail)
        try:
            async with aclosing(events):
                async for event in events:
                    yield event
        finally:
            await job.close()

    async def start_background(self, job: ResponseJob, scope: RequestScope) -> ResponseObject:
        """Store the response as queued and run it in a task of its own, which takes the request's scope (its
        slot, its lease, what preparing opened) and closes it when the run has ended, however it ends (even a
        task cancelled before it began)."""
        scope.hold(job.close)  # (held already by the generation endpoint's scope: closing twice is harmless)
        try:
            return await self.runs.launch(job.builder.response, job.items, self._events(job, scope.deadline),
                                          job.builder.fail, scope.close, job.tenant.key)
        except BaseException:  # not stored (a full disk, too many at once): nothing runs, nothing stays open
            await scope.aclose()
            raise

    async def _events(self, job: ResponseJob, deadline: Deadline) -> AsyncGenerator[dict[str, Any], None]:
        builder = job.builder
        yield builder.lifecycle("response.created")
        builder.response.status = "in_progress"
        yield builder.lifecycle("response.in_progress")
        try:
            if job.approved:  # the first step of the stored turn; the first model turn then reads their results
                await job.loop.run_approved(job.approved)
            for item in job.ready:  # before the turn that reads them: a refused turn keeps the calls' results
                for out in builder.mcp.whole_item(item):
                    yield out
            if job.approved:
                await job.chat.close()  # prepared (to validate the request) before the results were known
                job.chat = await self._turn(job.request, job.tools, job.conversation + job.ready,
                                            job.loop.chat_tools(), builder, input_paths(job.items))
                job.turns = [job.chat]
            while True:  # one model turn, then the MCP calls it made, as long as the model makes some
                start = len(builder.response.output)
                chat = self.chat_for(job.request.model)
                async with aclosing(rendered(deadline.bound(chat.events(job.chat)), builder)) as outputs:
                    async for out in outputs:
                        yield out
                reason = builder.finish_reason
                calls, builder.mcp.pending_calls = builder.mcp.pending_calls, []
                if not calls:
                    break
                async with aclosing(deadline.bound(job.loop.run(builder, calls))) as ended:  # runs them
                    async for out in ended:
                        yield out
                if awaits_client(builder.response.output[start:]) or reason != "tool_calls":
                    break
                job.loop.turns += 1
                # A forced tool_choice was for the first turn: later ones are free to answer.
                later = job.request.model_copy(update={"tool_choice": None})
                builder.freeform = None
                so_far = builder.mcp.hosted.replayable(builder.response.output)  # hosted calls with results
                job.chat = await self._turn(later, job.tools, job.conversation + so_far,
                                            job.loop.chat_tools(), builder, input_paths(job.items))
                job.turns.append(job.chat)
        except APIError as exc:  # the engine failed, the deadline passed, or a later turn was refused
            for out in builder.fail(exc):
                yield out
            return
        if job.request.enable_response_messages:
            messages = response_messages((job.turns or [job.chat])[0].request, builder.response.output,
                                         offer(job.tools)[1])
            builder.response.input_messages, builder.response.output_messages = messages
        final = builder.finish(reason, response_usage(*(job.turns or [job.chat])))
        conversation = conversation_id(job.request)
        if conversation:  # before the client hears of the end, so its next response sees these items
            output = [item for item in builder.response.output if item.get("type") in REPLAYED]
            await self.store.add_conversation_items(conversation, with_status(job.items + output))
        yield final

    # -- read, follow, cancel, delete (the run registry's) -------------------------------------------
    async def retrieve(self, response_id: str, tenant: Tenant = EVERYONE) -> ResponseObject:
        return await self.runs.retrieve(response_id, tenant)

    def follow(self, response_id: str, starting_after: int | None,
               tenant: Tenant = EVERYONE) -> AsyncGenerator[dict[str, Any], None]:
        return self.runs.follow(response_id, starting_after, tenant)

    async def cancel(self, response_id: str, tenant: Tenant = EVERYONE) -> ResponseObject:
        return await self.runs.cancel(response_id, tenant)

    async def delete(self, response_id: str, tenant: Tenant = EVERYONE) -> Deleted:
        return await self.runs.delete(response_id, tenant)

    async def input_items(self, response_id: str, after: str | None, limit: int, order: str,
                          tenant: Tenant = EVERYONE) -> ItemPage:
        await self.retrieve(response_id, tenant)
        try:
            items, has_more = await self.store.input_items(response_id, after=after, limit=limit, order=order)
        except StoreError as exc:
            raise InvalidRequest(str(exc), param="after") from exc
        return ItemPage.of(items, has_more, empty_id=None)

    # -- the conversation a request continues --------------------------------------------------------
    async def _ran_before(self, calls: list[dict[str, Any]], tenant: Tenant) -> dict[str, dict[str, Any]]:
        """The approved calls a stored response of `tenant` already ran, by id (an approved call's id names the
        approval and the call: mcp/loop.py approved_call_id): the first attempt of a request whose next model turn
        was refused ran them, and its retry must not run the (side-effecting) tool again."""
        ran = {}
        for call in calls:
            stored = await self.store.find_item(call["id"], tenant)
            if stored is not None and stored.get("type") == "mcp_call" and stored.get("status") == "completed":
                ran[call["id"]] = stored
        return ran

    async def _resolved(self, items: list[dict[str, Any]], tenant: Tenant) -> list[dict[str, Any]]:
        """The input with each item_reference replaced by the stored item it names (of `tenant`'s responses)."""
        resolved = []
        for index, item in enumerate(items):
            if item["type"] == "item_reference":
                found = await self.store.find_item(item["id"], tenant)
                if found is None:
                    raise InvalidRequest(f"Item with id '{item['id']}' not found. Only items of stored responses "
                                         "can be referenced (a response created with store: false keeps none).",
                                         param=f"input[{index}]")
                item = found
            resolved.append(item)
        return resolved

    # -- the conversation a request continues --------------------------------------------------------
    async def _conversation_items(self, conversation: str, tenant: Tenant) -> list[dict[str, Any]]:
        if await self.store.get_conversation(conversation, tenant) is None:
            raise NotFound(f"Conversation with id '{conversation}' not found.", param="conversation")
        items, _ = await self.store.conversation_items(conversation, limit=MAX_HISTORY_ITEMS, order="asc")
        return items

    async def _conversation(self, response_id: str, tenant: Tenant) -> list[dict[str, Any]]:
        """Every item of the conversation up to and including `response_id`'s output, oldest first (each
        response of the chain one `tenant` may see)."""
        chain: list[ResponseObject] = []
        current: str | None = response_id
        while current:
            if len(chain) >= MAX_HISTORY:
                raise InvalidRequest("previous_response_id chain is too long", param="previous_response_id")
            row = await self.store.get(current, tenant)
            if row is None:
                raise NotFound(f"Previous response with id '{current}' not found.", param="previous_response_id",
                               code="previous_response_not_found")
            chain.append(ResponseObject.stored(row))
            current = chain[-1].previous_response_id
        items: list[dict[str, Any]] = []
        for response in reversed(chain):
            stored, _ = await self.store.input_items(response.id, limit=10_000, order="asc")
            items += stored + [item for item in response.output if item.get("type") in REPLAYED]
        return items


def conversation_after(job: ResponseJob) -> list[dict[str, Any]]:
    """What a later response continuing `job`'s reads: its history, its input, the output a later turn replays
    (as `_conversation` reads a stored one back)."""
    return job.conversation + [item for item in job.builder.response.output if item.get("type") in REPLAYED]


@dataclass(frozen=True)
class TenantResponses:
    """The Responses service as one tenant drives it through the generation endpoint: its jobs are prepared
    for that tenant (and carry it to the store), and a background response's stream follows as it."""

    service: ResponsesService
    tenant: Tenant

    async def prepare(self, request: CreateResponseRequest) -> ResponseJob:
        return await self.service.prepare(request, self.tenant)

    def stream(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> AsyncGenerator[dict[str, Any], None]:
        return self.service.stream(job, deadline)

    # The generation endpoint's contract (rostra/http/generation_endpoint.py) is the wire's: the object leaves here.
    async def complete(self, job: ResponseJob, deadline: Deadline = NO_DEADLINE) -> dict[str, Any]:
        return (await self.service.complete(job, deadline)).wire()

    async def start_background(self, job: ResponseJob, scope: RequestScope) -> dict[str, Any]:
        return (await self.service.start_background(job, scope)).wire()

    def follow(self, response_id: str, starting_after: int | None) -> AsyncGenerator[dict[str, Any], None]:
        return self.service.follow(response_id, starting_after, self.tenant)


def conversation_id(request: CreateResponseRequest) -> str | None:
    conversation = request.conversation
    if isinstance(conversation, dict):
        reference = conversation.get("id")
        if not isinstance(reference, str):
            raise InvalidRequest("conversation must be an id or {\"id\": ...}", param="conversation")
        return reference
    return conversation


def base_response(request: CreateResponseRequest, tools: list[Tool],
                  defaults: GenerationDefaults = GenerationDefaults()) -> ResponseObject:
    """The response object before any output; temperature and top_p are those in force."""
    reasoning = request.reasoning
    return ResponseObject(
        id=new_id("resp"), created_at=int(time.time()), status="in_progress", instructions=request.instructions,
        model=request.model, output=[], tools=[tool.echo() for tool in tools],
        parallel_tool_calls=request.parallel_tool_calls, metadata=request.metadata or {},
        tool_choice=request.tool_choice or "auto",
        temperature=defaults.get("temperature", 1.0) if request.temperature is None else request.temperature,
        top_p=defaults.get("top_p", 1.0) if request.top_p is None else request.top_p,
        presence_penalty=_in_force(request.presence_penalty, defaults, "presence_penalty"),
        frequency_penalty=_in_force(request.frequency_penalty, defaults, "frequency_penalty"),
        top_logprobs=request.top_logprobs or 0,
        safety_identifier=request.safety_identifier, prompt_cache_key=request.prompt_cache_key,
        max_output_tokens=request.max_output_tokens, max_tool_calls=request.max_tool_calls,
        previous_response_id=request.previous_response_id,
        reasoning=ReasoningEcho(effort=reasoning.effort if reasoning else None,
                                summary=reasoning.summary if reasoning else None),
        store=request.store, background=request.background, truncation=request.truncation or "disabled",
        conversation=ConversationReference(id=conversation_id(request) or "") if request.conversation else None,
        text={"format": (request.text.format if request.text and request.text.format else {"type": "text"})},
        user=request.user, ignored_tools=ignored_tools(tools) or None)


def _in_force(value: float | None, defaults: GenerationDefaults, name: str) -> float:
    """The request's value, else the server's default, else 0 (OpenAI reports unset penalties as 0)."""
    if value is not None:
        return value
    return float(defaults.get(name, 0.0))


def response_usage(*turns: Job) -> ResponseUsage:
    """The usage of a response: all its model turns' (each turn reads its whole prompt again)."""
    usages = [job.stats.usage() for job in turns]
    input_tokens = sum(usage["prompt_tokens"] for usage in usages)
    output_tokens = sum(usage["completion_tokens"] for usage in usages)
    return ResponseUsage(
        input_tokens=input_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=sum(job.stats.cached_tokens for job in turns),
            cache_write_tokens=sum(job.stats.cache_write_tokens for job in turns)),
        output_tokens=output_tokens,
        output_tokens_details=OutputTokensDetails(
            reasoning_tokens=sum(job.stats.reasoning_tokens or 0 for job in turns)),
        total_tokens=input_tokens + output_tokens,
        output_budget=OutputBudget.model_validate(budget) if (budget := usages[-1].get("output_budget")) else None)
