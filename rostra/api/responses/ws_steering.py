"""Steering on a Responses WebSocket: user input queued into a response while it runs (`response.steer`).

As OpenAI's WebSocket mode defines it (openai-python 3.57, ResponseSteerEvent and the steer events' docs): input
for a running response of this connection is accepted (`response.steer.accepted`, an id) and queued. When the
response ends, its queued input is committed by an automatic successor (a response that inherits its settings and
continues it with that input, on its lane), whose `response.created` is the commit point. A response that stopped
for client-owned work (function calls, an MCP approval) keeps the input queued: `response.steer.pending` names the
results it waits for, and the client's next `response.create` continuing it gets the input prepended. Input
that cannot be committed comes back in `response.steer.failed` with a code of the SDK's ResponseSteerErrorCode.
rostra lets the running turn finish rather than cutting it at an output boundary (OpenAI may end it early as
`incomplete`, reason `steered`; that is optional)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rostra.api.responses.objects import new_id
from rostra.api.responses.response_object import ResponseObject
from rostra.api.responses.ws_events import CreateEvent, EventWriter, SocketEvent, Steer, SteerFailed

MAX_PENDING_STEERS = 16  # steering submissions queued for one response at most (too_many_pending_steers)
REMEMBERED = 256  # responses that ended here, remembered to tell `response_already_completed` from not found


@dataclass
class Running:
    create: CreateEvent
    steers: list[Steer] = field(default_factory=list)


@dataclass
class Refusal:
    code: str
    message: str


def required_input(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stubs of the results a response waits for from the client (the SDK's ResponseSteerRequiredInput)."""
    stubs = []
    for item in output:
        if item.get("type") == "function_call":
            stubs.append({"type": "function_call_output", "call_id": item["call_id"], "name": item["name"]})
        elif item.get("type") == "custom_tool_call":
            stubs.append({"type": "custom_tool_call_output", "call_id": item["call_id"]})
        elif item.get("type") == "mcp_approval_request":
            stubs.append({"type": "mcp_approval_response", "approval_request_id": item["id"]})
    return stubs


class Steering:
    """The steering state of one connection."""

    def __init__(self, writer: EventWriter):
        self.writer = writer
        self.running: dict[str, Running] = {}  # by response id, from its response.created to its end
        self.waiting: dict[str, list[Steer]] = {}  # by response id: input queued behind the client's results
        self.ended: OrderedDict[str, None] = OrderedDict()

    def started(self, response_id: str, create: CreateEvent) -> None:
        self.running[response_id] = Running(create)

    def submit(self, target: str, items: list[dict[str, Any]]) -> Steer | Refusal:
        running = self.running.get(target)
        if running is None:
            if target in self.ended or target in self.waiting:
                return Refusal("response_already_completed", f"response {target} is no longer running")
            return Refusal("response_not_found", f"no response {target} runs on this connection")
        if running.create.request.conversation is not None:
            return Refusal("steering_not_supported", "a response bound to a conversation cannot be steered")
        if len(running.steers) >= MAX_PENDING_STEERS:
            return Refusal("too_many_pending_steers", f"{MAX_PENDING_STEERS} steering inputs are queued already")
        steer = Steer(new_id("steer"), target, items)
        running.steers.append(steer)
        return steer

    def finished(self, response: ResponseObject) -> tuple[list[SocketEvent], CreateEvent | None]:
        """When a response that ran here ended: the steering events to send, and its automatic successor."""
        running = self.running.pop(response.id, None)
        self._remember(response.id)
        if running is None or not running.steers:
            return [], None
        lane, steers = running.create.stream_id, running.steers
        if response.status not in ("completed", "incomplete"):
            return [self.failed(steer, "successor_creation_failed", f"the response ended {response.status}",
                                lane) for steer in steers], None
        required = required_input(response.output)
        if required:
            self.waiting[response.id] = steers
            return [self.writer.steer_pending(steer, required, lane) for steer in steers], None
        inputs = [item for steer in steers for item in steer.input]
        request = running.create.request.model_copy(update={"input": inputs, "previous_response_id": response.id,
                                                            "tool_choice": None})
        return [], CreateEvent(request, lane, True, steers)

    def with_waiting(self, create: CreateEvent) -> CreateEvent:
        """A client's create continuing a response whose steering waited for its results: that input first."""
        steers = self.waiting.pop(create.request.previous_response_id or "", [])
        if not steers:
            return create
        given = create.request.input
        given_items = [{"type": "message", "role": "user", "content": given}] if isinstance(given, str) else given
        inputs = [item for steer in steers for item in steer.input] + given_items
        return CreateEvent(create.request.model_copy(update={"input": inputs}), create.stream_id, create.generate,
                           steers)

    def failed(self, steer: Steer, code: str, message: str, lane: str | None) -> SteerFailed:
        return self.writer.steer_failed(code, message, steer.target, steer.input, steer.id, lane)

    def _remember(self, response_id: str) -> None:
        self.ended[response_id] = None
        while len(self.ended) > REMEMBERED:
            self.ended.popitem(last=False)
