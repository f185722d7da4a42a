"""A llama.cpp prompt with images (rostra/engines/llamacpp_payload.py): its body is the JSON llama.cpp reads, each
image is base64-encoded once per request (every choice and think-first's second generation share it), and the
event loop keeps answering while a 32 MiB image is encoded and sent (issue 42: 0.25 s of loop time per choice
for one such image, when it was encoded on the loop)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time

from rostra.core import PromptImage
from rostra.engines import llamacpp_payload
from rostra.engines.llamacpp_http import LoopbackClient
from rostra.engines.llamacpp_payload import PIECE, MultimodalPrompt


def image(size: int) -> PromptImage:
    return PromptImage(os.urandom(size), 8, 8)


def test_the_body_is_the_json_llama_cpp_reads():
    images = [image(PIECE * 2 + 1), image(5), image(PIECE)]
    text = 'Say "hi" <__media__> ünï <__media__>\n<__media__>'

    async def main():
        prompt = await MultimodalPrompt.of(text, images)
        return json.loads(b"".join(prompt.body({"n_predict": 3, "id_slot": 0})))

    body = asyncio.run(main())
    assert body == {"n_predict": 3, "id_slot": 0, "prompt": {
        "prompt_string": text, "multimodal_data": [base64.b64encode(one.data).decode() for one in images]}}


def test_each_image_is_encoded_once_per_request(monkeypatch):
    calls: list[int] = []
    encode = llamacpp_payload._encode
    monkeypatch.setattr(llamacpp_payload, "_encode", lambda data: calls.append(len(data)) or encode(data))
    shown = image(PIECE + 7)

    async def main():
        choices = await asyncio.gather(*(MultimodalPrompt.of("<m>", [shown]) for _ in range(4)))
        again = await MultimodalPrompt.of("<m> then", [shown])  # think-first's second generation
        return choices, again

    choices, again = asyncio.run(main())
    assert calls == [PIECE + 7]
    assert all(choice.images == choices[0].images == again.images for choice in choices)
    assert shown == PromptImage(shown.data, 8, 8)  # the cache is no field: equality is the image's


def test_the_loop_keeps_answering_while_a_large_image_is_encoded_and_sent():
    """Four choices of a request with one 32 MiB image, sent to a socket server that reads the whole body: a
    ticker on the same loop is never held up for long (the image's base64 and its JSON copies took about
    0.2 s each on the loop before)."""
    big = image(32 * 1024 * 1024)
    received: list[int] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        left = length
        while left:
            left -= len(await reader.read(min(left, 1 << 16)))
        received.append(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def choice(client: LoopbackClient) -> None:
        prompt = await MultimodalPrompt.of("<__media__> describe", [big])
        stream = await client.stream("/completion", prompt.body({"n_predict": 1}))
        assert await stream.next_batch() == []
        stream.close()

    async def main() -> float:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        client = LoopbackClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", "key")
        longest, done = 0.0, asyncio.Event()

        async def tick() -> None:
            nonlocal longest
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                longest, last = max(longest, now - last), now

        ticker = asyncio.create_task(tick())
        try:
            await asyncio.gather(*(choice(client) for _ in range(4)))
        finally:
            done.set()
            await ticker
            server.close()
            await server.wait_closed()
        return longest

    longest = asyncio.run(main())
    assert received == [received[0]] * 4 and received[0] > 32 * 1024 * 1024 * 4 // 3
    assert longest < 0.1, f"the loop was held {longest:.3f} s"
