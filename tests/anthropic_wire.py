"""The Messages API on the wire, checked against the `anthropic` SDK's own types: every body and every
stream event must parse into its SDK model with no field the model does not declare."""

from __future__ import annotations

import json
from typing import Any

import httpx
from anthropic.types import Message, MessageTokensCount, RawMessageStreamEvent
from pydantic import BaseModel, TypeAdapter

EVENT = TypeAdapter(RawMessageStreamEvent)
STREAM_ERROR_TYPE = "error"  # `event: error`, {"type": "error", "error": {...}}: not one of RawMessageStreamEvent


def no_extras(model: Any, path: str = "$") -> None:
    """SDK models accept unknown keys; a key rostra sends must be one the SDK declares."""
    if isinstance(model, BaseModel):
        assert not model.model_extra, f"{path}: fields the SDK does not declare: {sorted(model.model_extra)}"
        for name in type(model).model_fields:
            no_extras(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, list):
        for index, item in enumerate(model):
            no_extras(item, f"{path}[{index}]")


def check_message(body: dict[str, Any]) -> Message:
    message = Message.model_validate(body)
    no_extras(message)
    return message


def check_count(body: dict[str, Any]) -> int:
    count = MessageTokensCount.model_validate(body)
    no_extras(count)
    return count.input_tokens


def headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


def sse_events(base_url: str, body: dict[str, Any], key: str, http: httpx.Client | None = None) -> list[dict[str, Any]]:
    """A streamed request's events, each named (`event:`) as its type says and valid as the SDK's event;
    `http`: the client to send it with (an in-process app's; default: a new connection)."""
    events = []
    with (http.stream if http is not None else httpx.stream)("POST", f"{base_url}/v1/messages", json={**body, "stream": True}, headers=headers(key),
                      timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        name_line, data_line = frame.split("\n")
        assert name_line.startswith("event: ") and data_line.startswith("data: "), frame
        event = json.loads(data_line[len("data: "):])
        assert name_line[len("event: "):] == event["type"]
        if event["type"] == "ping":  # the SDK skips pings (anthropic/_streaming.py): they have no type of their own
            assert event == {"type": "ping"}
        elif event["type"] == STREAM_ERROR_TYPE:  # the SDK raises it as an APIStatusError from its body
            assert set(event) == {"type", "error", "request_id"} and set(event["error"]) == {"type", "message"}
        else:
            no_extras(EVENT.validate_python(event))
        events.append(event)
    return events


def event_sequence(events: list[dict[str, Any]]) -> list[str]:
    """The events' types, deltas named by their own type: the shape of a stream at a glance."""
    return [event["delta"]["type"] if event["type"] == "content_block_delta" else event["type"] for event in events]
