"""The decoder, data-driven: every case whole and under many random splits of its bytes."""

import random

import pytest

from rostra.core import EngineOutput, TokenStep
from rostra.parsing.decoder import Decoder
from rostra.parsing.events import Finish, Text
from rostra.parsing.parser import ChoicePipeline

CASES = [
    # (output text, stop strings, expected text, stopped by a stop string)
    ("Hello world", [], "Hello world", False),
    ("alpha beta STOP gamma", ["STOP"], "alpha beta ", True),
    ("alpha beta STOP gamma", [" STOP", "beta"], "alpha ", True),
    ("no stop here", ["zzz"], "no stop here", False),
    ("ends with a partial ST", ["STOP"], "ends with a partial ST", False),
    ("Grüße 日本語 🎉 end", ["🎉"], "Grüße 日本語 ", True),
    ("Grüße 日本語 🎉 end", [], "Grüße 日本語 🎉 end", False),
    ("aaab", ["aab"], "a", True),
    ("line one\n\nline two", ["\n\n"], "line one", True),
]


def _splits(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), k=rng.randint(0, min(len(data) - 1, 12)))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def _run(pieces: list[bytes], stop: list[str]) -> tuple[str, bool]:
    pipeline = ChoicePipeline(Decoder(stop))
    text = ""
    for i, piece in enumerate(pieces):
        for event in pipeline.feed(EngineOutput(tokens=(TokenStep(i, piece),))):
            assert isinstance(event, Text)
            text += event.text
        if pipeline.stopped:
            break
    events = pipeline.finish("stop")
    assert isinstance(events[-1], Finish)
    text += "".join(e.text for e in events if isinstance(e, Text))
    return text, pipeline.stopped


@pytest.mark.parametrize("output,stop,expected,stopped", CASES)
def test_decoder_whole_and_split(output, stop, expected, stopped):
    data = output.encode()
    assert _run([data], stop) == (expected, stopped)
    rng = random.Random(output)
    for _ in range(200):
        assert _run(_splits(data, rng), stop) == (expected, stopped)
    assert _run([bytes([b]) for b in data], stop) == (expected, stopped)  # one byte per token


def test_stop_token_id_flushes_held_text():
    decoder = Decoder(["STOP"], stop_token_ids=[99])
    assert decoder.feed(TokenStep(1, b"abc ST")) == "abc "
    assert decoder.feed(TokenStep(99, b"<eos>")) == "ST"
    assert decoder.stopped and decoder.finish() == ""


def test_finish_reason_and_token_count():
    pipeline = ChoicePipeline(Decoder(["x"]))
    pipeline.feed(EngineOutput(tokens=(TokenStep(1, b"ab"), TokenStep(2, b"cx"), TokenStep(3, b"zz"))))
    finish = pipeline.finish("length")[-1]
    # Stopped by a stop string: "stop", whatever the engine said; the token after it is not counted.
    assert finish.reason == "stop" and finish.completion_tokens == 2
    pipeline = ChoicePipeline(Decoder())
    pipeline.feed(EngineOutput(tokens=(TokenStep(1, b"ab"),), finish_reason="length"))
    assert pipeline.finish("length")[-1].reason == "length"
