"""A slow first token never kills a stream (issue 46): a stream silent for --stream-keep-alive seconds sends its API's
keep-alive (Chat: an empty chunk; Messages: Anthropic's ping; Responses: OpenAI's keepalive event; Completions: an SSE
comment), which the official SDKs read past, so the answer is the same as without them; a real client whose idle
timeout is shorter than the first token's wait (Codex) gets its answer; and a client that leaves during the silence
releases everything at once."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import anthropic
import openai
import pytest

from codex_cli import codex_exec
from harness import BASE_URL, MODEL, InProcessServer, served
from rostra.http.sse import KEEP_ALIVE_COMMENT, EventStreamResponse
from servers import RunningServer
from wire import check

ANSWER = "The answer, after a long read."
SLOW_FIRST_TOKEN = 600  # ms: many keep-alive intervals
INTERVAL = 0.1
SCRIPT = [{"match": "^slow", "output": ANSWER, "first_token_delay_ms": SLOW_FIRST_TOKEN},
          {"match": "^stuck", "output": ANSWER, "first_token_delay_ms": 60_000},
          {"match": "^quick", "output": ANSWER}]


def _body(path: str, prompt: str) -> dict:
    if path == "/v1/completions":
        return {"model": MODEL, "stream": True, "prompt": prompt}
    if path == "/v1/responses":
        return {"model": MODEL, "stream": True, "input": prompt}
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    return {**body, "max_tokens": 64} if path == "/v1/messages" else body


def _frames(raw: bytes) -> list[str]:
    return [frame for frame in raw.decode().split("\n\n") if frame]


def _data(frame: str) -> dict | None:
    for line in frame.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            return json.loads(line[6:])
    return None


def _is_token(path: str, frame: str) -> bool:
    """Whether `frame` carries generated text (the first token's, or a later one's)."""
    data = _data(frame)
    if data is None:
        return False
    if path == "/v1/chat/completions":
        return bool(data["choices"] and data["choices"][0]["delta"].get("content"))
    if path == "/v1/completions":
        return bool(data["choices"][0]["text"])
    if path == "/v1/messages":
        return data["type"] == "content_block_delta"
    return data["type"] == "response.output_text.delta"


def _is_keep_alive(path: str, frame: str) -> bool:
    if path == "/v1/chat/completions":  # an empty chunk, valid against the spec and the SDK's type
        data = _data(frame)
        if data is None or not check("chat_chunk", data)["choices"]:
            return False
        choice = data["choices"][0]
        return choice["delta"] == {} and choice["finish_reason"] is None
    if path == "/v1/messages":  # Anthropic's own: its SDKs skip `event: ping` before parsing events
        return frame == 'event: ping\ndata: {"type":"ping"}'
    if path == "/v1/responses":  # OpenAI's own, not in the spec's ResponseStreamEvent
        return frame.startswith("event: keepalive\n") and set(_data(frame)) == {"type", "sequence_number"}
    return frame + "\n\n" == KEEP_ALIVE_COMMENT.decode()


APIS = ["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"]


@pytest.mark.parametrize("path", APIS)
async def test_a_slow_first_token_is_preceded_by_keep_alives(tmp_path, path):
    async with InProcessServer(tmp_path, SCRIPT, stream_keep_alive=INTERVAL) as server:
        exchange = server.call("POST", path, _body(path, "slow, please"))
        await asyncio.wait_for(exchange.task, 10)
    frames = _frames(b"".join(exchange.chunks))
    first_token = next(i for i, frame in enumerate(frames) if _is_token(path, frame))
    before = [frame for frame in frames[:first_token] if _is_keep_alive(path, frame)]
    # 600 ms of silence at one keep-alive per 100 ms (polled at a quarter of that): several, never a flood.
    assert 3 <= len(before) <= 7, frames[:first_token]
    # Tokens that follow one another at once have no keep-alive between them.
    assert not any(_is_keep_alive(path, frame) for frame in frames[first_token:])
    if path == "/v1/responses":  # each repeats the last event's number: the events' own numbers have no gap
        numbered = [(_is_keep_alive(path, frame), _data(frame)["sequence_number"]) for frame in frames]
        assert [number for kept, number in numbered if not kept] == list(range(len(frames) - len(before)))
        assert all(number == numbered[i - 1][1] for i, (kept, number) in enumerate(numbered) if kept)


@pytest.mark.parametrize("path", APIS)
async def test_a_stream_that_is_never_silent_has_no_keep_alive(tmp_path, path):
    async with InProcessServer(tmp_path, SCRIPT, stream_keep_alive=INTERVAL) as server:
        exchange = server.call("POST", path, _body(path, "quick, please"))
        await asyncio.wait_for(exchange.task, 10)
    frames = _frames(b"".join(exchange.chunks))
    assert any(_is_token(path, frame) for frame in frames)
    # Messages' own ping, after the first block opens (Anthropic's stream), is the only one.
    assert sum(_is_keep_alive(path, frame) for frame in frames) == (path == "/v1/messages")


async def test_keep_alives_can_be_switched_off(tmp_path):
    path = "/v1/chat/completions"
    async with InProcessServer(tmp_path, SCRIPT, stream_keep_alive=0) as server:
        exchange = server.call("POST", path, _body(path, "slow, please"))
        await asyncio.wait_for(exchange.task, 10)
    assert not any(_is_keep_alive(path, frame) for frame in _frames(b"".join(exchange.chunks)))


@pytest.mark.parametrize("path", APIS)
async def test_a_client_gone_during_the_silence_releases_its_slot(tmp_path, path):
    async with InProcessServer(tmp_path, SCRIPT, stream_keep_alive=INTERVAL, max_concurrency=1, max_queue=0) as server:
        exchange = server.call("POST", path, _body(path, "stuck for a minute"))
        await exchange.wait_until(lambda e: any(_is_keep_alive(path, f) for f in _frames(b"".join(e.chunks))))
        assert server.app.state.rostra.admission.running == 1
        assert server.engine.running_requests() == 1
        exchange.hang_up()
        await asyncio.wait_for(exchange.task, 2)  # at once, not after the minute the first token would take
        assert server.app.state.rostra.admission.running == 0
        assert server.engine.running_requests() == 0
        # The one slot is free again: a request that would get a 429 while it was taken is served.
        answer = await server.client.post("/v1/chat/completions", json={
            "model": MODEL, "messages": [{"role": "user", "content": "quick"}]})
        assert answer.status_code == 200


def _settings_scope(**settings) -> dict:
    """An ASGI scope whose app carries the server's settings, as EventStreamResponse reads them."""
    app = SimpleNamespace(state=SimpleNamespace(rostra=SimpleNamespace(settings=SimpleNamespace(**settings))))
    return {"type": "http", "app": app}


async def test_a_reader_that_takes_nothing_is_still_ended_while_keep_alives_are_due():
    """The watchdog writes keep-alives and ends stalled streams, in one task: a keep-alive whose write never
    completes (the client reads nothing, its buffers are full) must not keep it from ending the stream."""
    closed = asyncio.Event()
    generator_closed = []

    async def silent():
        try:
            yield {"id": "x", "object": "chat.completion.chunk", "choices": []}
            await asyncio.sleep(3600)
        finally:
            generator_closed.append(True)

    sent: list[dict] = []

    async def send(message):
        sent.append(message)
        if len(sent) > 2:  # the headers and the first frame go out; then the client's buffers are full
            await asyncio.sleep(3600)

    async def receive():
        await asyncio.sleep(3600)

    response = EventStreamResponse(silent(), on_close=closed.set)
    await asyncio.wait_for(response(_settings_scope(stream_write_timeout=0.4, stream_keep_alive=0.1), receive, send), 5)
    assert closed.is_set() and generator_closed == [True]
    assert sent[2]["body"] == KEEP_ALIVE_COMMENT  # the keep-alive that never got through


async def test_a_frame_that_comes_while_a_keep_alive_is_written_goes_after_it():
    """The watchdog writes from its own task: a send is never entered twice at once, and frames keep their order."""
    async def slow_then_fast():
        yield {"n": 1}
        await asyncio.sleep(0.15)  # the keep-alive (due at 0.1 s) is still being written at 0.15 s
        yield {"n": 2}

    sent: list[bytes] = []
    in_flight = []

    async def send(message):
        in_flight.append(message)
        assert len(in_flight) == 1, "two writes at once"
        if message.get("body") == KEEP_ALIVE_COMMENT:
            await asyncio.sleep(0.2)  # the client's buffers are full for a while
        sent.append(message.get("body", b"headers"))
        in_flight.pop()

    async def receive():
        await asyncio.sleep(3600)

    response = EventStreamResponse(slow_then_fast())
    await asyncio.wait_for(response(_settings_scope(stream_write_timeout=5, stream_keep_alive=0.1), receive, send), 5)
    assert sent == [b"headers", b'data: {"n":1}\n\n', KEEP_ALIVE_COMMENT, b'data: {"n":2}\n\n', b"data: [DONE]\n\n"]


def _chat(client: openai.OpenAI, prompt: str, stream: bool):
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}], stream=stream)


def test_the_official_sdks_read_past_the_keep_alives(tmp_path):
    """The same answer streamed through the keep-alives as not streamed: the openai SDK (Chat, with its stream
    accumulator too; Completions; Responses) and the anthropic SDK (Messages)."""
    with served(tmp_path, SCRIPT, stream_keep_alive=0.05) as http:
        client = openai.OpenAI(base_url=f"{BASE_URL}/v1", api_key="unused", max_retries=0, http_client=http)
        whole = _chat(client, "slow chat", stream=False).choices[0].message.content
        assert whole == ANSWER
        assert "".join(chunk.choices[0].delta.content or "" for chunk in _chat(client, "slow chat", True)
                       if chunk.choices) == whole
        with client.chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": "slow chat"}]) as s:
            final = s.get_final_completion().choices[0]
        assert (final.message.content, final.finish_reason) == (whole, "stop")

        text = client.completions.create(model=MODEL, prompt="slow text").choices[0].text
        assert "".join(chunk.choices[0].text for chunk in client.completions.create(
            model=MODEL, prompt="slow text", stream=True)) == text == ANSWER

        output = client.responses.create(model=MODEL, input="slow response").output_text
        with client.responses.stream(model=MODEL, input="slow response") as s:
            assert s.get_final_response().output_text == output == ANSWER

        claude = anthropic.Anthropic(base_url=BASE_URL, api_key="unused", max_retries=0, http_client=http)
        message = claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "slow"}])
        with claude.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "slow"}]) as s:
            streamed = s.get_final_message()
        assert streamed.content[0].text == message.content[0].text == ANSWER
        assert streamed.stop_reason == message.stop_reason == "end_turn"


def test_codex_waits_out_a_first_token_longer_than_its_idle_timeout(tmp_path):
    """Codex CLI (tests/clients/codex) over Responses, its idle timer (stream_idle_timeout_ms, 300 s by default)
    cut to 2 s, no retries, and a first token 5 s away: with keep-alives off it fails (`idle timeout waiting for
    SSE`; SSE comments do not reset that timer either, its reader counts events), with them it gets its answer."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"match": "Wait for it", "output": "Done waiting.", "first_token_delay_ms": 5000}))
    config = ('model = "scripted"\nmodel_provider = "rostra"\n[model_providers.rostra]\nname = "rostra"\n'
              'base_url = "{base_url}"\nwire_api = "responses"\nstream_idle_timeout_ms = 2000\n'
              'stream_max_retries = 0\nrequest_max_retries = 0\n')
    runs = {}
    for keep_alive in ("0", "0.5"):
        server = RunningServer(["--engine", "scripted", "--script", str(script), "--max-model-len", "131072",
                                "--stream-keep-alive", keep_alive])
        try:
            workdir = tmp_path / f"work-{keep_alive}"
            workdir.mkdir()
            runs[keep_alive] = codex_exec(server.v1, workdir, "Wait for it.", timeout=120,
                                          user_config=config.format(base_url=server.v1))
        finally:
            server.stop()
    assert runs["0"].returncode != 0 and "idle timeout" in json.dumps(runs["0"].errors())
    assert runs["0.5"].returncode == 0, (runs["0.5"].errors(), runs["0.5"].stderr[-2000:])
    assert runs["0.5"].last_message == "Done waiting." and not runs["0.5"].errors()
