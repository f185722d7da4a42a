"""Semantic events -> the Messages API's stream events, and the Message they fold into.

Anthropic's stream: `message_start` (the message, empty), then per content block `content_block_start`,
its deltas (`text_delta`, `thinking_delta` then one `signature_delta`, `input_json_delta`) and
`content_block_stop`; a `ping` after the first block opens; then `message_delta` (stop reason, usage) and
`message_stop`. `MessageStream` is the Messages API's EventRenderer (rostra/serving/rendering.py): `add` renders
one semantic event as those events and folds each of them
into `message` the way the SDK's stream accumulator does, so a non-streamed answer is the fold of the
very events a stream sends.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from rostra.parsing.events import Event, Finish, Reasoning, Text, ToolCallArgs, ToolCallEnd, ToolCallStart
from rostra.serving.request_stats import RequestStats
from rostra.serving.reasoning_crypto import ReasoningSealer

# message_delta's usage (the SDK's MessageDeltaUsage): the counts, cumulative, without the Message's extras.
DELTA_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                      "server_tool_use", "output_tokens_details")


def ping(last: dict[str, Any] | None) -> dict[str, Any]:
    """What a silent Messages stream sends (rostra/http/sse.py's KeepAlive): Anthropic's own keep-alive, `event:
    ping` with `{"type": "ping"}`, which its SDKs skip wherever it comes."""
    return {"type": "ping"}


def new_id(prefix: str) -> str:
    """Anthropic's ids: msg_..., toolu_..."""
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass(frozen=True)
class MessageOptions:
    """What shapes a message's output, resolved when the request is prepared."""

    sealer: ReasoningSealer
    show_thinking: bool = True  # false: thinking: {display: "omitted"}, blocks carry only the signature
    # The request's max_tokens was cut to the room the context has left: running out of it is the context's doing.
    context_bound: bool = False
    # The client's stop_sequences: a stop the server adds (a template's own stop strings) ends the turn as
    # `end_turn`, as the model's own end would, never as a stop_sequence the client did not send.
    stop_sequences: tuple[str, ...] = ()


class MessageStream:
    def __init__(self, message_id: str, model: str, stats: RequestStats, options: MessageOptions):
        self.options = options
        self.stats = stats  # the job's counts: the prompt's at the start, the prefix-cache hits and output at the end
        self.message: dict[str, Any] = {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": self._usage()}
        self._open: str | None = None  # the type of the block being written (the last of `content`)
        self._thinking: list[str] = []  # the open thinking block's text (sealed into its signature)
        self._json = ""  # the open tool_use block's input so far
        self._pinged = False
        self._spaces = ""  # whitespace held back until text follows it (dropped before a call or the end)

    def start(self) -> list[dict[str, Any]]:
        return [self._fold({"type": "message_start", "message": {**self.message, "content": []}})]

    def add(self, index: int, event: Event) -> list[dict[str, Any]]:
        """The events a semantic event makes (a Message has one choice: `index` is 0)."""
        if isinstance(event, Text) and event.text:
            if self._open != "text" and event.text.isspace():  # whitespace between calls is no text block
                self._spaces += event.text
                return []
            text, self._spaces = self._spaces + event.text, ""
            return self._block("text") + [self._delta({"type": "text_delta", "text": text})]
        if isinstance(event, Reasoning) and event.text:
            out = self._block("thinking")
            self._thinking.append(event.text)
            if self.options.show_thinking:
                out.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
            return out
        if isinstance(event, ToolCallStart):
            self._spaces = ""
            block = {"type": "tool_use", "id": new_id("toolu"), "name": event.name, "input": {}}
            return self._close() + self._begin(block)
        if isinstance(event, ToolCallArgs) and event.text:
            return [self._delta({"type": "input_json_delta", "partial_json": event.text})]
        if isinstance(event, ToolCallEnd):
            return self._close()
        if isinstance(event, Finish):
            return self._close() + self._ping() + self._finish(event)
        return []

    def end(self) -> list[dict[str, Any]]:
        return []  # message_stop came with the Finish event

    def result(self) -> dict[str, Any]:
        return self.message

    def _block(self, kind: str) -> list[dict[str, Any]]:
        """Opens a text or thinking block unless one of that kind is being written."""
        if self._open == kind:
            return []
        closed = self._close()
        self._thinking = []
        block = {"type": "text", "text": ""} if kind == "text" else {"type": "thinking", "thinking": "", "signature": ""}
        return closed + self._begin(block)

    def _begin(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        self._open = block["type"]
        start = self._fold({"type": "content_block_start", "index": len(self.message["content"]),
                            "content_block": block})
        return [start] + self._ping()

    def _ping(self) -> list[dict[str, Any]]:
        """Anthropic sends one right after the first block opens (or before the end, when none did)."""
        if self._pinged:
            return []
        self._pinged = True
        return [{"type": "ping"}]

    def _delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        return self._fold({"type": "content_block_delta", "index": len(self.message["content"]) - 1, "delta": delta})

    def _close(self) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        out = []
        if self._open == "thinking":  # the signature seals the whole thinking, shown or not
            signature = self.options.sealer.seal("".join(self._thinking))
            out.append(self._delta({"type": "signature_delta", "signature": signature}))
        self._open = None
        return out + [self._fold({"type": "content_block_stop", "index": len(self.message["content"]) - 1})]

    def _finish(self, event: Finish) -> list[dict[str, Any]]:
        if event.reason == "tool_calls":
            reason = "tool_use"
        elif event.reason == "length":
            reason = "model_context_window_exceeded" if self.options.context_bound else "max_tokens"
        else:
            reason = "stop_sequence" if event.stop_string in self.options.stop_sequences else "end_turn"
        final = self._usage()
        delta_usage = {key: final[key] for key in DELTA_USAGE_FIELDS}
        sequence = event.stop_string if reason == "stop_sequence" else None
        return [self._fold({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": sequence},
                            "usage": delta_usage}),
                self._fold({"type": "message_stop"})]

    def _usage(self) -> dict[str, Any]:
        """Anthropic counts input in three parts: read from the cache, written to it, and the rest
        (`input_tokens`). rostra's prefix cache keeps every prompt without being asked: nothing is
        counted as a cache write; the prefix-cache hits are the cache reads."""
        stats = self.stats
        cached = stats.cached_tokens
        thinking = None if stats.reasoning_tokens is None else {"thinking_tokens": stats.reasoning_tokens}
        return {"input_tokens": stats.prompt_tokens - cached, "output_tokens": stats.completion_tokens,
                "output_tokens_details": thinking, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
                "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
                "server_tool_use": None, "service_tier": "standard"}

    # -- the fold: what the SDK's accumulator does with each event -------------------------------------
    def _fold(self, event: dict[str, Any]) -> dict[str, Any]:
        kind, content = event["type"], self.message["content"]
        if kind == "content_block_start":
            content.append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = content[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                self._json += delta["partial_json"]
        elif kind == "content_block_stop" and content[event["index"]]["type"] == "tool_use":
            content[event["index"]]["input"] = json.loads(self._json) if self._json else {}
            self._json = ""
        elif kind == "message_delta":
            self.message.update(event["delta"])
            self.message["usage"] = {**self.message["usage"], **event["usage"]}
        return event


