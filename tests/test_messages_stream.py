"""The Messages API's stream state (rostra/api/messages/stream.py) without a server: semantic events in,
Anthropic's events out; the Message it folds must not depend on how the text was cut into deltas, and must
equal what the SDK's own accumulator rebuilds from the events."""

from __future__ import annotations

import random

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from anthropic_wire import check_message
from rostra.api.messages.history import system_text
from rostra.api.messages.models import MessagesRequest
from rostra.api.messages.stream import MessageOptions, MessageStream
from rostra.parsing.events import Finish, Reasoning, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.serving.request_stats import RequestStats
from rostra.serving.reasoning_crypto import ReasoningSealer

SEALER = ReasoningSealer(key=bytes(32))
EVENTS = adapter = TypeAdapter(RawMessageStreamEvent)

CASES = {
    "text": [Text("Hello there, how are you?"), Finish("stop", 7)],
    "thinking then text": [Reasoning("Let me think about it."), Text("\n\n"), Text("It is 4."), Finish("stop", 9, 5)],
    "text then call": [Text("Let me check.\n"), ToolCallStart(0, "call_1", "get_weather"),
                       ToolCallArgs(0, '{"city": "Oslo"}'), ToolCallEnd(0), Finish("tool_calls", 12)],
    "two calls, spaces between": [ToolCallStart(0, "a", "f"), ToolCallArgs(0, '{"x": 1}'), ToolCallEnd(0), Text("\n"),
                                  ToolCallStart(1, "b", "f"), ToolCallArgs(1, '{"x": 2}'), ToolCallEnd(1), Text("\n"),
                                  Finish("tool_calls", 20)],
    "stop sequence": [Text("one, two, "), Finish("stop", 4, stop_string="three")],
    "cut short": [Reasoning("Long thought that never"), Finish("length", 6, 6)],
    "nothing": [Finish("stop", 1)],
}


def split(events, rng: random.Random):
    """The same events with every text cut at random places (as tokens arrive)."""
    out = []
    for event in events:
        text = getattr(event, "text", None)
        if not text or isinstance(event, Finish):
            out.append(event)
            continue
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        out += [type(event)(**{**event.__dict__, "text": piece}) for piece in pieces]
    return out


def run(events, show_thinking=True, stop_sequences=("three",)):  # the client asked to stop at "three"
    stats = RequestStats(prompt_tokens=30, reasoning_tokens=0)
    stream = MessageStream("msg_1", "m", stats, MessageOptions(SEALER, show_thinking=show_thinking,
                                                                stop_sequences=stop_sequences))
    wire = stream.start()
    for event in events:
        stats.observe(event)
        wire += stream.add(0, event)
    return stream.message, wire


def rebuilt(wire):
    snapshot, buffers = None, {}
    for event in wire:
        if event["type"] != "ping":
            snapshot = accumulate_event(event=EVENTS.validate_python(event), current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


def without_signatures(message: dict) -> dict:
    return {**message, "content": [{k: v for k, v in block.items() if k not in ("signature", "id")}
                                   for block in message["content"]]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fold_is_the_same_under_random_splits_and_is_the_sdks(name):
    whole, wire = run(CASES[name])
    assert rebuilt(wire).model_dump(mode="json") == check_message(whole).model_dump(mode="json")
    rng = random.Random(name)
    for _ in range(25):
        message, _ = run(split(CASES[name], rng))
        assert without_signatures(message) == without_signatures(whole)
    for block in whole["content"]:
        if block["type"] == "thinking":
            assert SEALER.open(block["signature"], "x") == block["thinking"]


def test_shapes():
    message, wire = run(CASES["two calls, spaces between"])
    assert [b["type"] for b in message["content"]] == ["tool_use", "tool_use"]  # no whitespace text blocks
    assert [b["input"] for b in message["content"]] == [{"x": 1}, {"x": 2}]
    assert message["stop_reason"] == "tool_use"
    assert run(CASES["stop sequence"])[0]["stop_sequence"] == "three"
    unasked = run(CASES["stop sequence"], stop_sequences=())[0]  # a stop the server added (a template's own)
    assert unasked["stop_reason"] == "end_turn" and unasked["stop_sequence"] is None
    assert run(CASES["cut short"])[0]["stop_reason"] == "max_tokens"
    omitted, wire = run(CASES["thinking then text"], show_thinking=False)
    assert omitted["content"][0]["thinking"] == "" and \
        SEALER.open(omitted["content"][0]["signature"], "x") == "Let me think about it."
    assert not any(e.get("delta", {}).get("type") == "thinking_delta" for e in wire)
    empty, wire = run(CASES["nothing"])
    assert empty["content"] == [] and [e["type"] for e in wire] == ["message_start", "ping", "message_delta", "message_stop"]


@pytest.mark.parametrize("system,expected", [
    ("x-anthropic-billing-header: cc_version=2.1.330.572; cc_entrypoint=cli;\nYou are helpful.", "You are helpful."),
    ([{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330.a1f; cc_entrypoint=sdk-cli; cch=00000;"},
      {"type": "text", "text": "You are helpful."}], "You are helpful."),
    ("You are helpful.\nx-anthropic-billing-header: not at the start", "You are helpful.\nx-anthropic-billing-header: not at the start"),
])
def test_attribution_line_is_dropped(system, expected):
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 1, "system": system,
                                              "messages": [{"role": "user", "content": "hi"}]})
    assert system_text(request, keep_attribution=False) == expected
    assert system_text(request, keep_attribution=True) != expected or "not at the start" in expected
