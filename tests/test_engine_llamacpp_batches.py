"""The llama.cpp engine reads llama.cpp's stream in batches: tokens that piled up while the event loop was
busy come out as one output, in order, with nothing lost (embedded model)."""

import asyncio
import os
import socket
import time

from rostra.core import Prompt, SamplingParams
from rostra.embedded import embedded_model_path
from rostra.engines.base import EngineError
from rostra.engines.llamacpp import LlamaCppEngine, _merge_chunks


def _hold_loop_until_events_wait(engine: LlamaCppEngine, request_id: str, count: int) -> None:
    """Block the event loop until `count` more events wait, unread, in the request's socket (or it ended)."""
    transport = engine._streams[request_id]._exchange.transport
    peek = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))  # closing it closes the copy
    try:
        for _ in range(6000):
            try:
                waiting = peek.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                waiting = b""
            if waiting.count(b"data: ") >= count or b"[DONE]" in waiting:
                return
            time.sleep(0.01)
    finally:
        peek.close()


def _generate(hold: bool) -> list[tuple[int, ...]]:
    async def scenario():
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=512, parallel=1)
        await engine.start()
        try:
            prompt = Prompt(await engine.tokenize("Count to twenty.", add_special=False))
            outputs = engine.generate("a", prompt, SamplingParams(max_tokens=12, temperature=0, ignore_eos=True))
            got = [await anext(outputs)]
            if hold:  # the loop is busy (blocked) while llama.cpp produces four more tokens
                _hold_loop_until_events_wait(engine, "a", 4)
            got += [output async for output in outputs]
            assert got[-1].finish_reason == "length"
            return [tuple(step.token_id for step in output.tokens) for output in got]
        finally:
            await engine.close()

    return asyncio.run(scenario())


def test_tokens_that_piled_up_come_out_together_in_order():
    held = _generate(hold=True)
    free = _generate(hold=False)
    assert [t for output in held for t in output] == [t for output in free for t in output]
    assert len([t for output in held for t in output]) == 12
    assert len(held[1]) >= 4  # the four (or more) tokens produced while the loop was blocked: one output


# Chunks as xllamacpp 2026.10 streams them for the embedded model (`n_probs: 1`), shortened.
def _token_chunk(token_id: int, text: str) -> dict:
    step = {"id": token_id, "token": text, "bytes": list(text.encode()), "logprob": -1.0}
    return {"choices": [{"text": text, "index": 0, "logprobs": {"content": [{**step, "top_logprobs": [step]}]},
                         "finish_reason": None}], "object": "text_completion"}


FINAL = {"choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
         "object": "text_completion", "usage": {"completion_tokens": 3, "prompt_tokens": 4, "total_tokens": 7,
                                                "prompt_tokens_details": {"cached_tokens": 3}}}


def test_a_batch_is_one_output_with_the_last_finish_reason_and_cache_count():
    chunks = [_token_chunk(79, "_"), _token_chunk(100, "t"), _token_chunk(43405, "utorial"), FINAL]
    output, error = _merge_chunks(chunks, 0, lambda token_id: str(token_id).encode())
    assert error is None
    assert [step.token_id for step in output.tokens] == [79, 100, 43405]
    assert output.tokens[2].token_bytes == b"43405" and output.tokens[0].top_logprobs == ()
    assert output.finish_reason == "length" and output.cached_tokens == 3


def test_an_error_in_a_batch_keeps_the_tokens_before_it():
    chunks = [_token_chunk(79, "_"), {"error": {"message": "slot failed"}}, _token_chunk(100, "t")]
    output, error = _merge_chunks(chunks, 1, lambda token_id: b"x")
    assert [step.token_id for step in output.tokens] == [79] and output.finish_reason is None
    assert isinstance(error, EngineError) and "slot failed" in str(error)
