"""The llama.cpp engine reads llama.cpp's stream in batches: tokens that piled up while the event loop was
busy come out as one output, in order, with nothing lost (embedded model)."""

import asyncio
import os
import socket
import time

from rostra.core import Prompt, SamplingParams
from rostra.embedded import embedded_model_path
from rostra.engines.base import EngineError
from rostra.engines.llamacpp import LlamaCppEngine, _Chunks


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
            if waiting.count(b"data: ") >= count or b'"stop":true' in waiting:
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


# Chunks as xllamacpp 2026.10 streams them from /completion with `return_tokens` (embedded model), shortened.
def _token_chunk(token_id: int, text: str, predicted: int) -> dict:
    return {"index": 0, "content": text, "tokens": [token_id], "stop": False, "id_slot": -1,
            "tokens_predicted": predicted, "tokens_evaluated": 4}


def _final(predicted: int, stop_type: str = "limit") -> dict:
    return {"index": 0, "content": "", "tokens": [], "id_slot": 1, "stop": True, "tokens_predicted": predicted,
            "tokens_evaluated": 4, "stop_type": stop_type, "stopping_word": "", "tokens_cached": 7,
            "timings": {"cache_n": 3, "prompt_n": 1, "predicted_n": predicted}}


def _chunks(top_n: int = 0) -> _Chunks:
    pieces = {174: b"\xe3", 219: b"\x81", 79: b"_", 100: b"t", 43405: b"utorial"}
    return _Chunks(top_n, lambda token_id: pieces.get(token_id, b"?"), {piece: i for i, piece in pieces.items()})


def test_a_batch_is_one_output_with_the_last_finish_reason_and_cache_count():
    chunks = [_token_chunk(79, "_", 1), _token_chunk(100, "t", 2), _token_chunk(43405, "utorial", 3), _final(3)]
    output, error = _chunks().merge(chunks)
    assert error is None
    assert [step.token_id for step in output.tokens] == [79, 100, 43405]
    assert output.tokens[2].token_bytes == b"utorial" and output.tokens[0].top_logprobs == ()
    assert output.finish_reason == "length" and output.cached_tokens == 3 and output.completion_tokens is None
    assert output.cache_write_tokens == 1  # timings.prompt_n: the prompt tokens evaluated, held by the slot from now on
    assert _chunks().merge([_final(0, "eos")])[0].finish_reason == "stop"


def test_an_error_in_a_batch_keeps_the_tokens_before_it():
    chunks = [_token_chunk(79, "_", 1), {"error": {"message": "slot failed"}}, _token_chunk(100, "t", 2)]
    output, error = _chunks(1).merge(chunks)
    assert [step.token_id for step in output.tokens] == [79] and output.finish_reason is None
    assert isinstance(error, EngineError) and "slot failed" in str(error)


def test_tokens_held_back_inside_a_character_are_recovered_from_the_text():
    """What llama.cpp streamed for six tokens E3 81 81 E3 81 81 ("ぁぁ", forced with logit_bias): a token whose
    text ends inside a character gets no chunk of its own; the next chunk lists only its own token, with the
    text of all three, and tokens_predicted counts them all."""
    chunks = [_token_chunk(219, "ぁ", 3), _token_chunk(219, "ぁ", 6), _final(6)]
    for split in ([chunks], [chunks[:1], chunks[1:]]):
        reader = _chunks()
        outputs = [reader.merge(batch)[0] for batch in split]
        steps = [step for output in outputs for step in output.tokens]
        assert [step.token_id for step in steps] == [174, 219, 219] * 2
        assert b"".join(step.token_bytes for step in steps).decode() == "ぁぁ"
        assert all(output.completion_tokens is None for output in outputs)


def test_tokens_of_a_character_cut_off_at_the_end_still_count():
    """Seven tokens: the seventh (E3) starts a character that the limit cuts off; llama.cpp never sends it."""
    output, error = _chunks().merge([_token_chunk(219, "ぁ", 3), _token_chunk(219, "ぁ", 6), _final(7)])
    assert len(output.tokens) == 6 and output.completion_tokens == 7 and output.finish_reason == "length"


def test_held_back_tokens_on_the_embedded_model():
    """The same, from llama.cpp itself: every forced token comes out, with its bytes; usage counts the cut one."""
    async def scenario():
        engine = LlamaCppEngine(embedded_model_path(), "m", max_model_len=512, parallel=1)
        await engine.start()
        try:
            lead, continuation = engine._token_ids[b"\xe3"], engine._token_ids[b"\x81"]
            prompt = Prompt(await engine.tokenize("Hi", add_special=False))
            params = SamplingParams(max_tokens=7, temperature=0, logit_bias={lead: 30.0, continuation: 29.0})
            return [output async for output in engine.generate("a", prompt, params)]
        finally:
            await engine.close()

    outputs = asyncio.run(scenario())
    steps = [step for output in outputs for step in output.tokens]
    assert b"".join(step.token_bytes for step in steps) == "ぁぁ".encode()
    assert len(steps) == 6 and outputs[-1].completion_tokens == 7 and outputs[-1].finish_reason == "length"
