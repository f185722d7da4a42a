"""The wire of the Responses API's WebSocket mode, as openai-python 3.57's `client.responses.connect()` types it
(ResponsesClientEvent, ResponsesServerEvent) and OpenAI's WebSocket-mode guide describes it.

In: `response.create`, the POST /v1/responses body plus the envelope fields `type`, `stream_id` (the lane) and
`generate` (false: a warm-up that runs no model); `stream` is implicit and `background` is not served. And
`response.steer` (`previous_response_id` and user `input` only). Out: every event of the SSE stream, the very same
objects, with the lane's `stream_id` added when the create named one; `error` events in the WebSocket shape
(`status` and an `error` object, where SSE's `error` event is flat); and `response.steer.accepted / pending /
failed`."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from starlette.requests import HTTPConnection

from rostra.api.responses.models import CreateResponseRequest
from rostra.api.responses.wire import WireObject
from rostra.errors import APIError, InvalidRequest
from rostra.http.request_body import parse_json
from rostra.http.sse import json_bytes

# The lane names OpenAI accepts (the SDK's session checks the same before it reserves one).
STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")
ENVELOPE = ("type", "stream_id", "generate", "stream")  # not fields of the POST /v1/responses body
STEER_MESSAGE_FIELDS = {"type", "role", "content", "id", "status"}
STEER_PARTS = {"input_text", "input_image", "input_file"}


@dataclass
class Steer:
    """A steering submission accepted into a running response: queued for its successor."""

    id: str
    target: str  # the response it steers
    input: list[dict[str, Any]]  # user messages


@dataclass
class CreateEvent:
    """One `response.create`: the request, its lane, and (an automatic successor's) the steering it commits."""

    request: CreateResponseRequest
    stream_id: str | None = None
    generate: bool = True
    steers: list[Steer] = field(default_factory=list)


def client_event(raw: str | bytes | None) -> dict[str, Any]:
    try:
        event = orjson.loads(raw or b"")
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"the message is not valid JSON: {exc}") from exc
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise InvalidRequest("a client event is a JSON object with a string `type`", param="type")
    return event


def lane_of(event: dict[str, Any]) -> str | None:
    stream_id = event.get("stream_id")
    if stream_id is not None and not (isinstance(stream_id, str) and STREAM_ID.fullmatch(stream_id)):
        raise InvalidRequest("stream_id: 1 to 256 ASCII letters, digits, '_', '-' or '.'", param="stream_id",
                             code="invalid_stream_id")
    return stream_id


async def create_event(connection: HTTPConnection, event: dict[str, Any]) -> CreateEvent:
    """A `response.create` validated as POST /v1/responses validates its body (the same errors, params, aliases)."""
    stream_id = lane_of(event)
    generate = event.get("generate", True)
    if not isinstance(generate, bool):
        raise InvalidRequest("generate must be a boolean", param="generate")
    if event.get("background"):
        raise InvalidRequest("background responses are not served over WebSocket: use POST /v1/responses",
                             param="background")
    body = {name: value for name, value in event.items() if name not in ENVELOPE}
    request = await parse_json(connection, CreateResponseRequest, json_bytes(body))
    return CreateEvent(request, stream_id, generate)


def steer_input(value: Any) -> list[dict[str, Any]]:
    """The input of a `response.steer` as message items; only user messages of text, image and file parts (the
    SDK's ResponseSteerEvent)."""
    if isinstance(value, str) and value:
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("input: a non-empty string or list of user messages", param="input")
    for index, item in enumerate(value):
        if not isinstance(item, dict) or item.get("role") != "user" or item.get("type", "message") != "message" \
                or not set(item) <= STEER_MESSAGE_FIELDS:
            raise InvalidRequest("steering takes only user messages (type, role, content)", param=f"input[{index}]")
        content = item.get("content")
        if not isinstance(content, str) and not (
                isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in STEER_PARTS
                                                  for p in content)):
            raise InvalidRequest("content: a string or input_text, input_image and input_file parts",
                                 param=f"input[{index}].content")
    return [{"type": "message", **item} for item in value]


class SocketEvent(WireObject):
    """An event of the connection's own (not one of a response's stream, which are sent as the SSE stream has
    them): `sequence_number` in the connection's sequence (an error of a response's stream: in that one), and
    `stream_id` when its lane has a name."""

    type: str
    sequence_number: int | None = None
    stream_id: str | None = None
    absent_unless_set = ("sequence_number", "stream_id")


class SocketError(WireObject):
    type: str
    code: str | None
    message: str
    param: str | None = None
    headers: dict[str, str] | None = None  # what an HTTP answer would carry in its headers (a 429's Retry-After)
    absent_unless_set = ("headers",)


class ErrorEvent(SocketEvent):
    """The WebSocket's `error` event: an HTTP status and an error object (SSE's `error` event is flat)."""

    type: Literal["error"] = "error"
    status: int
    error: SocketError


class SteerReference(WireObject):
    id: str | None = None  # (a refused steer has none)
    previous_response_id: str  # the response it steers
    absent_unless_set = ("id",)


class FailedSteer(SteerReference):
    input: Any  # what the client sent, as sent


class SteerAccepted(SocketEvent):
    type: Literal["response.steer.accepted"] = "response.steer.accepted"
    steer: SteerReference


class SteerPending(SocketEvent):
    """Accepted, but the response it steers ended waiting for the client's tool results: it goes with them."""

    type: Literal["response.steer.pending"] = "response.steer.pending"
    reason: Literal["waiting_for_required_input"] = "waiting_for_required_input"
    required_input: list[dict[str, Any]]
    steer: SteerReference


class SteerError(WireObject):
    type: str = "invalid_request_error"
    code: str
    message: str


class SteerFailed(SocketEvent):
    type: Literal["response.steer.failed"] = "response.steer.failed"
    error: SteerError
    steer: FailedSteer


class EventWriter:
    """The connection's own events (errors before a response exists, steering) and the lane's `stream_id` on
    every event; connection events are numbered in their own sequence."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    @staticmethod
    def on_lane(event: dict[str, Any], stream_id: str | None) -> dict[str, Any]:
        return {**event, "stream_id": stream_id} if stream_id is not None else event

    @staticmethod
    def error(error: APIError, stream_id: str | None = None, sequence_number: int | None = None) -> ErrorEvent:
        """`sequence_number`: an error of a response's stream, numbered in it."""
        details = SocketError(type=error.error_type, code=error.code, message=error.message, param=error.param,
                              headers=dict(error.headers) if error.headers else None)
        return ErrorEvent(status=error.status_code, error=details, sequence_number=sequence_number,
                          stream_id=stream_id)

    def steer_accepted(self, steer: Steer, stream_id: str | None) -> SteerAccepted:
        return SteerAccepted(sequence_number=next(self._numbers), stream_id=stream_id,
                             steer=SteerReference(id=steer.id, previous_response_id=steer.target))

    def steer_pending(self, steer: Steer, required: list[dict[str, Any]], stream_id: str | None) -> SteerPending:
        return SteerPending(sequence_number=next(self._numbers), stream_id=stream_id, required_input=required,
                            steer=SteerReference(id=steer.id, previous_response_id=steer.target))

    def steer_failed(self, code: str, message: str, target: str, steer_input: Any, steer_id: str | None = None,
                     stream_id: str | None = None) -> SteerFailed:
        return SteerFailed(sequence_number=next(self._numbers), stream_id=stream_id,
                           error=SteerError(code=code, message=message),
                           steer=FailedSteer(input=steer_input, previous_response_id=target, id=steer_id or None))
