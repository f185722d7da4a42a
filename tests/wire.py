"""Raw HTTP helpers: every body and SSE event is validated against the spec and the SDK types."""

from __future__ import annotations

import json

import httpx
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from spec import validate

SCHEMAS = {
    "chat": ("CreateChatCompletionResponse", ChatCompletion),
    "chat_chunk": ("CreateChatCompletionStreamResponse", ChatCompletionChunk),
    "completion": ("CreateCompletionResponse", Completion),
    "completion_chunk": ("CreateCompletionResponse", Completion),
}


def check(kind: str, body: dict) -> dict:
    schema, sdk_type = SCHEMAS[kind]
    checked = _completion_chunk_as_spec_says(body) if kind == "completion_chunk" else body
    validate(schema, checked)
    sdk_type.model_validate(checked, strict=True)
    return body


def _completion_chunk_as_spec_says(chunk: dict) -> dict:
    """The spec gives Completions chunks the non-streamed shape, where finish_reason is a
    required string; OpenAI's real stream (and every client) has null until the last chunk.
    That one field is the only allowance: a null finish_reason is checked as if it were set."""
    choices = [{**c, "finish_reason": c["finish_reason"] or "stop"} for c in chunk["choices"]]
    return {**chunk, "choices": choices}


def echoed_as_spec_says(body: dict) -> dict:
    """OpenAI (and vLLM) give an echoed prompt's first token a null logprob, which the spec's
    `number` does not allow: checked as if it were 0."""
    copy = json.loads(json.dumps(body))
    for choice in copy["choices"]:
        logprobs = choice.get("logprobs") or {}
        logprobs["token_logprobs"] = [0.0 if v is None else v for v in logprobs.get("token_logprobs", [])]
        logprobs["top_logprobs"] = [{} if v is None else v for v in logprobs.get("top_logprobs", [])]
    return copy


def check_error(response: httpx.Response, status: int, param: str | None = "__any__") -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    validate("ErrorResponse", body)
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    if param != "__any__":
        assert body["error"]["param"] == param, body
    return body["error"]


def post(base_url: str, path: str, body: dict | str | bytes, **kwargs) -> httpx.Response:
    if isinstance(body, dict):
        return httpx.post(f"{base_url}{path}", json=body, **{"timeout": 60, **kwargs})
    return httpx.post(f"{base_url}{path}", content=body, timeout=60,
                      headers={"content-type": "application/json", **kwargs.pop("headers", {})}, **kwargs)


def stream(base_url: str, path: str, body: dict, kind: str) -> list[dict]:
    """POST with stream: true; every data event validated; ends with [DONE]."""
    events: list[dict] = []
    with httpx.stream("POST", f"{base_url}{path}", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        done = False
        for line in response.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            data = line[len("data: "):]
            assert not done, "data after [DONE]"
            if data == "[DONE]":
                done = True
                continue
            events.append(check(kind, json.loads(data)))
        assert done, "stream did not end with [DONE]"
    return events


def fold_chat_stream(chunks: list[dict]) -> dict[int, dict]:
    """The one client-side assembler of chat streams, as a client folds them, per choice: content, reasoning,
    tool calls (each announced once with id, type and name, then only argument deltas), logprobs, finish
    reason; with counts of role deltas and finish reasons to check the stream's shape."""
    choices: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            state = choices.setdefault(choice["index"], {"content": "", "reasoning": "", "tool_calls": [],
                                                          "finish_reason": None, "logprobs": [], "roles": 0,
                                                          "finishes": 0})
            delta = choice["delta"]
            state["roles"] += "role" in delta
            state["content"] += delta.get("content") or ""
            if "reasoning" in delta and "reasoning_content" in delta:  # --reasoning-field both: the same text
                assert delta["reasoning"] == delta["reasoning_content"]
            state["reasoning"] += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or []:
                _fold_tool_call(state["tool_calls"], call)
            if choice.get("logprobs"):
                state["logprobs"] += choice["logprobs"]["content"] or []
            if choice["finish_reason"]:
                state["finish_reason"] = choice["finish_reason"]
                state["finishes"] += 1
    return choices


def _fold_tool_call(calls: list[dict], delta: dict) -> None:
    if "id" in delta:
        assert delta["index"] == len(calls), "calls are announced once, in index order"
        assert delta["type"] == "function" and delta["function"]["name"]
        calls.append({"id": delta["id"], "name": delta["function"]["name"],
                      "arguments": delta["function"].get("arguments", "")})
    else:
        assert set(delta) == {"index", "function"} and set(delta["function"]) == {"arguments"}
        calls[delta["index"]]["arguments"] += delta["function"]["arguments"]


def fold_completion_stream(chunks: list[dict]) -> dict[int, dict]:
    """The same for Completions streams: text, logprob tokens, finish reason (and how many), per choice."""
    choices: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            state = choices.setdefault(choice["index"], {"text": "", "finish_reason": None, "finishes": 0,
                                                          "tokens": []})
            state["text"] += choice["text"]
            if choice["logprobs"]:
                state["tokens"] += choice["logprobs"]["tokens"]
            if choice["finish_reason"]:
                state["finish_reason"] = choice["finish_reason"]
                state["finishes"] += 1
    return choices
