"""The llama.cpp engine hands llama.cpp at most one request per slot; one cancelled while it waits for a slot
is never started, so it costs no prefill (on the embedded model, one slot)."""

import asyncio

from rostra.embedded import embedded_model_path
from rostra.core import Prompt, SamplingParams
from rostra.engines.llamacpp import LlamaCppEngine


class CountingServer:
    """llama.cpp's server, with a count of the requests handed to it."""

    def __init__(self, server):
        self.server, self.started = server, []

    def handle_completions(self, body, callback):
        self.started.append(body["n_predict"])
        return self.server.handle_completions(body, callback)


def test_a_request_cancelled_while_waiting_for_a_slot_is_never_started():
    async def scenario():
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=512, parallel=1)
        await engine.start()
        try:
            engine._server = counting = CountingServer(engine._server)
            prompt = Prompt(await engine.tokenize("Tell me a long story.", add_special=False))
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
