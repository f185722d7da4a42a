"""The llama.cpp engine hands llama.cpp at most one request per slot; one cancelled while it waits for a slot
is never started, so it costs no prefill (on the embedded model, one slot)."""

import asyncio

from rostra.embedded import embedded_model_path
from rostra.core import Prompt, SamplingParams
from rostra.engines.llamacpp import LlamaCppEngine


class CountingClient:
    """The engine's client of llama.cpp's server, with a count of the generations handed to it."""

    def __init__(self, client):
        self.client, self.started = client, []

    async def stream(self, path, body):
        self.started.append(body["n_predict"])
        return await self.client.stream(path, body)


def test_a_request_cancelled_while_waiting_for_a_slot_is_never_started():
    async def scenario():
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=512, parallel=1)
        await engine.start()
        try:
            prompt = Prompt(await engine.tokenize("Tell me a long story.", add_special=False))
            engine._loopback = counting = CountingClient(engine._loopback)
            first = engine.generate("a", prompt, SamplingParams(max_tokens=40, ignore_eos=True))
            await anext(first)  # the only slot is busy now
            waiting = asyncio.ensure_future(anext(engine.generate("b", prompt, SamplingParams(max_tokens=7))))
            await asyncio.sleep(0.2)
            waiting.cancel()  # the client of "b" went away while it waited
            await asyncio.gather(waiting, return_exceptions=True)
            async for _ in first:
                pass
            await asyncio.sleep(0.2)
            return counting.started, engine.running_requests()
        finally:
            await engine.close()

    started, running = asyncio.run(scenario())
    assert started == [40] and running == 0


def test_a_generation_closed_early_stops_in_llama_cpp():
    """Leaving a generation closes its connection to llama.cpp's server, which stops it: the only slot serves
    the next request at once, rather than after the thousands of tokens the first one asked for."""
    async def scenario():
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=8192, parallel=1)
        await engine.start()
        try:
            prompt = Prompt(await engine.tokenize("Tell me a long story.", add_special=False))
            first = engine.generate("a", prompt, SamplingParams(max_tokens=8000, ignore_eos=True))
            await anext(first)
            await first.aclose()
            assert engine.running_requests() == 0
            # Were "a" still running, this one would wait for its 8000 tokens (minutes here).
            second = engine.generate("b", prompt, SamplingParams(max_tokens=3, ignore_eos=True))
            outputs = await asyncio.wait_for(_all(second), timeout=60)
            return sum(len(output.tokens) for output in outputs)
        finally:
            await engine.close()

    assert asyncio.run(scenario()) == 3


async def _all(outputs):
    return [output async for output in outputs]
