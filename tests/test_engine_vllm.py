"""The vLLM engine adapter.

Two parts. The adapter's own logic (parameter mapping, output conversion, vocabulary bytes, the
CLI without vLLM) runs everywhere, CI included. The real-engine tests need vLLM and a GPU with a test model, or
ROSTRA_TEST_VLLM=cpu on vLLM's CPU build (tests/vllm_env.py says which; .ci/run runs them there).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from contextlib import aclosing
from types import SimpleNamespace

import jsonschema
import pytest

from rostra.config import Settings
from rostra.engines.base import EngineError
from rostra.core import Prompt, SamplingParams
from rostra.engines.vllm import (
    MISSING_VLLM,
    engine_arg_kwargs,
    engine_output,
    is_byte_level,
    parse_engine_args,
    sampling_kwargs,
    structured_output_spec,
    vocabulary_bytes,
)
from rostra.guided.constraints import choice_grammar, regex_grammar
from vllm_env import ENGINE_OPTIONS, SERVE_FLAGS, VLLM_INSTALLED, loop, real, test_model  # noqa: F401 (fixtures)



# Parameters: rostra's SamplingParams to vLLM's keywords

def test_default_parameters_map_to_vllms_off_values():
    kwargs = sampling_kwargs(SamplingParams(max_tokens=32))
    assert kwargs == {
        "n": 1, "max_tokens": 32, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "seed": None,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "logit_bias": None,
        "logprobs": None, "ignore_eos": False, "detokenize": False,
        "min_tokens": 0, "stop_token_ids": None, "bad_words": None, "allowed_token_ids": None, "prompt_logprobs": None,
    }


def test_vllm_extensions_are_passed_on_natively():
    kwargs = sampling_kwargs(SamplingParams(max_tokens=9, min_tokens=3, stop_token_ids=(5,), bad_words=("drat",),
                                            bad_words_ids=((11,),), allowed_token_ids=(1, 2), prompt_logprobs=2))
    assert (kwargs["min_tokens"], kwargs["stop_token_ids"], kwargs["bad_words"], kwargs["allowed_token_ids"],
            kwargs["prompt_logprobs"]) == (3, [5], ["drat"], [1, 2], 2)


def test_every_parameter_is_passed_on():
    params = SamplingParams(max_tokens=5, temperature=0.0, top_p=0.9, top_k=40, min_p=0.05, seed=7,
                            presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.1,
                            logit_bias={42: -100.0, 7: 2.5}, top_logprobs=3, ignore_eos=True)
    kwargs = sampling_kwargs(params)
    assert (kwargs["temperature"], kwargs["top_p"], kwargs["top_k"], kwargs["min_p"], kwargs["seed"]) == \
        (0.0, 0.9, 40, 0.05, 7)
    assert (kwargs["presence_penalty"], kwargs["frequency_penalty"], kwargs["repetition_penalty"]) == (0.5, -0.5, 1.1)
    assert kwargs["logit_bias"] == {42: -100.0, 7: 2.5}
    assert kwargs["logprobs"] == 3 and kwargs["ignore_eos"] is True


def test_top_logprobs_zero_still_asks_for_the_sampled_tokens_logprob():
    assert sampling_kwargs(SamplingParams(max_tokens=1, top_logprobs=0))["logprobs"] == 0


def test_no_constraint_no_structured_output():
    assert structured_output_spec(SamplingParams(max_tokens=1)) is None


def test_json_schema_is_vllms_json():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert structured_output_spec(SamplingParams(max_tokens=1, json_schema=schema)) == {"json": schema}


def test_gbnf_grammar_is_vllms_grammar():
    grammar = choice_grammar(["yes", "no"])
    assert structured_output_spec(SamplingParams(max_tokens=1, grammar=grammar)) == {"grammar": grammar}


def test_hand_written_llguidance_grammar_stays_a_grammar():
    grammar = '%llguidance {}\nstart: "a" number\nnumber: /[0-9]+/'
    assert structured_output_spec(SamplingParams(max_tokens=1, grammar=grammar)) == {"grammar": grammar}


@pytest.mark.parametrize("pattern, matching, not_matching", [
    (r"\d{3}-\d{4}", "555-1234", "5551234"),
    (r"(yes|no)", "no", "maybe"),
    ("a/b", "a/b", "ab"),  # "/" is escaped in the llguidance grammar, plain again in the regex
    (r"a\/b", "a/b", "a\\/b"),
    ("x\ny", "x\ny", "xy"),  # a newline becomes the regex escape \n
    (r"[A-Z][a-z]+ \w+", "Hello world", "hello world"),
])
def test_guided_regex_goes_back_to_vllms_regex(pattern, matching, not_matching):
    spec = structured_output_spec(SamplingParams(max_tokens=1, grammar=regex_grammar(pattern)))
    assert list(spec) == ["regex"]
    assert re.fullmatch(spec["regex"], matching) and not re.fullmatch(spec["regex"], not_matching)


def test_guided_regex_comes_back_unescaped():
    # vLLM's regex backends need not accept "\/", the llguidance grammar's escape of a "/".
    for pattern in ["a/b", r"\d+/\d+", r"[^/]+"]:
        assert structured_output_spec(SamplingParams(max_tokens=1, grammar=regex_grammar(pattern))) == \
            {"regex": pattern}


# Outputs: a vLLM delta (token ids, logprob dicts, finish) to rostra's EngineOutput

def _lp(logprob: float, rank: int | None) -> SimpleNamespace:
    return SimpleNamespace(logprob=logprob, rank=rank, decoded_token=None)


def _bytes(token_id: int) -> bytes:
    return {0: b""}.get(token_id, f"<{token_id}>".encode())


def test_tokens_without_logprobs():
    output = engine_output([5, 6], None, None, None, 0, _bytes)
    assert [(s.token_id, s.token_bytes, s.logprob, s.top_logprobs) for s in output.tokens] == \
        [(5, b"<5>", None, ()), (6, b"<6>", None, ())]
    assert output.finish_reason is None


def test_logprobs_and_top_logprobs_by_rank():
    # The sampled token 9 ranks 4th: it has its logprob but is not among the top 2.
    position = {9: _lp(-2.5, 4), 3: _lp(-0.2, 1), 4: _lp(-1.0, 2)}
    step = engine_output([9], [position], None, None, 2, _bytes).tokens[0]
    assert step.logprob == -2.5
    assert [(t.token_id, t.token_bytes, t.logprob) for t in step.top_logprobs] == [(3, b"<3>", -0.2), (4, b"<4>", -1.0)]


def test_sampled_token_in_the_top_appears_once():
    position = {3: _lp(-0.2, 1), 4: _lp(-1.0, 2)}
    step = engine_output([3], [position], None, None, 2, _bytes).tokens[0]
    assert step.logprob == -0.2 and [t.token_id for t in step.top_logprobs] == [3, 4]


@pytest.mark.parametrize("ranks", [(2, 1), (1, 1), (None, None)])
def test_on_an_exact_tie_the_sampled_token_is_listed_first(ranks):
    # vLLM's own server lists the sampled token first when its logprob ties another's, whatever rank each got.
    sampled_rank, other_rank = ranks
    position = {3: _lp(-0.5, other_rank), 4: _lp(-0.5, sampled_rank), 5: _lp(-0.9, 3)}
    step = engine_output([4], [position], None, None, 2, _bytes).tokens[0]
    assert [(t.token_id, t.logprob) for t in step.top_logprobs] == [(4, -0.5), (3, -0.5)]


def test_top_logprobs_zero_keeps_only_the_sampled_logprob():
    step = engine_output([4], [{4: _lp(-0.7, 2)}], None, None, 0, _bytes).tokens[0]
    assert step.logprob == -0.7 and step.top_logprobs == ()


def test_missing_ranks_order_by_logprob():
    position = {1: _lp(-3.0, None), 2: _lp(-0.1, None), 3: _lp(-1.0, None)}
    step = engine_output([1], [position], None, None, 2, _bytes).tokens[0]
    assert [t.token_id for t in step.top_logprobs] == [2, 3]


def test_logprobs_align_with_the_delta_from_the_end():
    positions = [{1: _lp(-1.0, 1)}, {2: _lp(-2.0, 1)}, {3: _lp(-3.0, 1)}]
    output = engine_output([2, 3], positions, None, None, 1, _bytes)
    assert [(s.token_id, s.logprob) for s in output.tokens] == [(2, -2.0), (3, -3.0)]


def test_a_delta_without_tokens_has_no_steps_whatever_the_logprobs():
    # vLLM slices logprobs[-len(token_ids):], which is the whole list when a delta has no tokens.
    output = engine_output([], [{1: _lp(-1.0, 1)}], "length", None, 1, _bytes)
    assert output.tokens == () and output.finish_reason == "length"


def test_length_keeps_the_last_token():
    output = engine_output([5, 6], None, "length", None, 0, _bytes)
    assert output.finish_reason == "length" and output.tokens[-1].token_bytes == b"<6>"


@pytest.mark.parametrize("stop_reason", [None, 6])  # EOS, or a generation-config stop token id
def test_the_token_vllm_stopped_on_is_silent(stop_reason):
    output = engine_output([5, 6], [{5: _lp(-0.1, 1)}, {6: _lp(-0.3, 1)}], "stop", stop_reason, 1, _bytes)
    assert output.finish_reason == "stop"
    assert [s.token_bytes for s in output.tokens] == [b"<5>", b""]
    assert output.tokens[-1].logprob == -0.3  # still counted and scored


def test_a_stop_string_leaves_the_last_token_as_text():
    output = engine_output([5, 6], None, "stop", "halt", 0, _bytes)
    assert [s.token_bytes for s in output.tokens] == [b"<5>", b"<6>"]


@pytest.mark.parametrize("reason", ["error", "something-new"])
def test_failed_requests_raise(reason):
    with pytest.raises(EngineError, match=reason):
        engine_output([], None, reason, None, 0, _bytes)


# Vocabulary: the bytes each token id stands for

def test_byte_level_vocabulary_round_trips_text():
    from rostra.embedded import embedded_model_path
    from rostra.gguf_metadata import read_gguf_metadata
    from rostra.tokenizer import tokenizer_from_gguf

    metadata = read_gguf_metadata(embedded_model_path())
    pieces = metadata["tokenizer.ggml.tokens"]
    control = {i for i, kind in enumerate(metadata["tokenizer.ggml.token_type"]) if kind == 3}
    eos = metadata["tokenizer.ggml.eos_token_id"]
    table = vocabulary_bytes(pieces, control, eos)
    text = "Héllo wörld 🙂\n\tdone <tool_call>"
    ids = tokenizer_from_gguf(embedded_model_path(), metadata).encode(text)
    assert b"".join(table[i] for i in ids) == text.encode()
    assert table[pieces.index("<|im_start|>")] == b"<|im_start|>"  # markers stay visible to parsers
    assert table[eos] == b"" and table[pieces.index("<|endoftext|>")] == b""


def test_sentencepiece_vocabulary():
    pieces = ["<unk>", "<s>", "<eos>", "\u2581Hello", "<0x0A>", "\u2581w", "ö", "rld", "<0xF0>", "<0x9F>", "<0x99>",
              "<0x82>", "<start_of_turn>", "<end_of_turn>", "\u2581the", "\u2581a"]
    table = vocabulary_bytes(pieces, {0, 1, 2, 12, 13}, 2)
    assert b"".join(table[i] for i in [3, 5, 6, 7, 4]) == " Hello wörld\n".encode()
    assert b"".join(table[i] for i in [8, 9, 10, 11]).decode() == "🙂"
    assert table[2] == b"" and table[13] == b""  # the eos id (Gemma's "<eos>") and an end-of-turn marker
    assert table[12] == b"<start_of_turn>"


def test_raw_byte_pieces_and_gaps():
    table = vocabulary_bytes(["\u0120a", b"\xe2\x82", None, "\u0120b"], set(), None)
    assert table == [b" a", b"\xe2\x82", b"", b" b"]


def test_byte_level_detection():
    assert is_byte_level(["\u0120the", "\u0120a", "x", "\u2581odd"])
    assert not is_byte_level(["\u2581the", "\u2581a", "x", "\u0120odd"])


# Engine arguments

def test_vllm_args_read_as_yaml_values():
    assert parse_engine_args(["max_num_seqs=256", "enforce-eager=true", "distributed_executor_backend=ray",
                              "swap_space=0.5", "hf_overrides={rope_theta: 1000000}"]) == {
        "max_num_seqs": 256, "enforce_eager": True, "distributed_executor_backend": "ray", "swap_space": 0.5,
        "hf_overrides": {"rope_theta": 1000000}}


def test_vllm_arg_without_a_value_is_refused():
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_engine_args(["enforce_eager"])


def test_engine_arguments_from_flags():
    kwargs = engine_arg_kwargs("org/model", max_model_len=None, tensor_parallel_size=2, pipeline_parallel_size=3,
                               gpu_memory_utilization=None, dtype="bfloat16", extra={"max_num_seqs": 64})
    assert kwargs == {"model": "org/model", "dtype": "bfloat16", "tensor_parallel_size": 2,
                      "pipeline_parallel_size": 3, "max_num_seqs": 64}
    kwargs = engine_arg_kwargs("m", max_model_len=4096, tensor_parallel_size=1, pipeline_parallel_size=1,
                               gpu_memory_utilization=0.5, dtype="auto", extra={})
    assert kwargs["max_model_len"] == 4096 and kwargs["gpu_memory_utilization"] == 0.5


@pytest.mark.parametrize("speculative, draft, extra, expected", [
    ("on", None, {}, {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("on", 6, {}, {"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("on", None, {"speculative_config": {"method": "ngram", "num_speculative_tokens": 9}},
     {"method": "ngram", "num_speculative_tokens": 9}),  # the operator's own config wins
    ("auto", None, {}, None),  # vLLM's default: no speculation
    ("off", 6, {}, None),
])
def test_speculative_flags_become_vllms_ngram_config(speculative, draft, extra, expected):
    kwargs = engine_arg_kwargs("m", max_model_len=None, tensor_parallel_size=1, pipeline_parallel_size=1,
                               gpu_memory_utilization=None, dtype="auto", extra=extra, speculative=speculative,
                               speculative_draft=draft)
    assert kwargs.get("speculative_config") == expected


def test_a_vllm_arg_may_not_repeat_a_flag():
    with pytest.raises(ValueError, match="--tensor-parallel-size"):
        engine_arg_kwargs("m", max_model_len=None, tensor_parallel_size=1, pipeline_parallel_size=1,
                          gpu_memory_utilization=None, dtype="auto", extra={"tensor_parallel_size": 4})


# The adapter's glue over a stand-in for vLLM's API (the members the adapter uses, as 0.33.0 has them)

class _StandInTokenizer:
    pieces = ["<unk>", "<s>", "</s>", "\u0120hi", "\u0120there", "!"]
    eos_token_id, bos_token_id, max_token_id, all_special_ids = 2, 1, 5, [0, 1, 2]

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i] for i in ids]

    def get_added_vocab(self):
        return {"<s>": 1, "</s>": 2}

    def get_chat_template(self, chat_template):
        return "{% for m in messages %}{{ m.content }}{% endfor %}"

    def encode(self, text, add_special_tokens):
        return [1] * add_special_tokens + [3 + ["hi", "there", "!"].index(w) for w in text.split()]

    def decode(self, ids, skip_special_tokens):
        return "|".join(self.pieces[i] for i in ids)


class _StandInLLM:
    """Yields DELTA outputs: two tokens a step, then `finish` on the last, like AsyncLLM.generate."""

    last: "_StandInLLM"
    finish, stop_reason, fail, steps = "stop", None, None, [[3, 4], [5, 2]]
    prompt_logprobs, num_cached_tokens = None, None  # what vLLM says of the prompt (first / every output)

    def __init__(self, engine_args):
        self.engine_args, self.requests, self.aborted, self.closed = engine_args, [], [], []
        self.model_config = SimpleNamespace(max_model_len=512)
        self.vllm_config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=128))
        _StandInLLM.last = self

    @classmethod
    def from_engine_args(cls, engine_args):
        return cls(engine_args)

    def get_tokenizer(self):
        return _StandInTokenizer()

    async def generate(self, prompt, sampling_params, request_id):
        self.requests.append((prompt, sampling_params, request_id))
        try:
            if self.fail:
                raise RuntimeError("engine core died") from self.fail
            for number, ids in enumerate(self.steps):
                await asyncio.sleep(0)
                if request_id in self.aborted:
                    yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=[], logprobs=None, finish_reason="abort",
                                                                   stop_reason=None)])
                    return
                last = number == len(self.steps) - 1
                yield SimpleNamespace(outputs=[SimpleNamespace(
                    token_ids=ids, logprobs=None, finish_reason=self.finish if last else None,
                    stop_reason=self.stop_reason if last else None)],
                    prompt_logprobs=self.prompt_logprobs if number == 0 else None,
                    num_cached_tokens=self.num_cached_tokens)
        finally:
            self.closed.append(request_id)

    async def abort(self, request_id):
        self.aborted.append(request_id)

    def shutdown(self):
        self.closed.append("shutdown")


@pytest.fixture
def stand_in_vllm(monkeypatch):
    import dataclasses
    import enum
    import types

    @dataclasses.dataclass
    class AsyncEngineArgs:
        model: str
        dtype: str = "auto"
        tensor_parallel_size: int = 1
        pipeline_parallel_size: int = 1
        max_model_len: int | None = None
        gpu_memory_utilization: float = 0.9
        max_num_seqs: int | None = None
        runner: str = "auto"  # generate | pooling (embedding models)
        speculative_config: dict | None = None

    vllm = types.ModuleType("vllm")
    vllm.AsyncEngineArgs, vllm.AsyncLLMEngine = AsyncEngineArgs, _StandInLLM
    vllm.SamplingParams = lambda **kwargs: SimpleNamespace(**kwargs)
    vllm.TokensPrompt = lambda **kwargs: dict(kwargs)
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.RequestOutputKind = enum.Enum("RequestOutputKind", "CUMULATIVE DELTA FINAL_ONLY")
    sampling.StructuredOutputsParams = lambda **kwargs: ("structured", kwargs)
    inputs = types.ModuleType("vllm.inputs")  # the current input form (older releases: a raw TokensPrompt)
    inputs.tokens_input = lambda prompt_token_ids: {"type": "token", "prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    monkeypatch.setattr(_StandInLLM, "fail", None)
    return sampling


def _stand_in_engine(**options):
    from rostra.engines.vllm import VllmEngine

    return VllmEngine(model="org/model", model_name="served", **options)


def _run_stand_in(engine, params, request_id="r-0", abort_after=None, close_after=None):
    async def run():
        outputs = []
        async with aclosing(engine.generate(request_id, Prompt([1, 3]), params)) as stream:
            async for output in stream:
                outputs.append(output)
                if abort_after == len(outputs):
                    await engine.abort(request_id)
                if close_after == len(outputs):
                    break
        return outputs

    return asyncio.run(run())


def test_stand_in_engine_describes_the_model(stand_in_vllm):
    engine = _stand_in_engine(tensor_parallel_size=2, engine_args=["max_num_seqs=64"])
    assert _StandInLLM.last.engine_args.tensor_parallel_size == 2 and _StandInLLM.last.engine_args.max_num_seqs == 64
    assert (engine.model.id, engine.model.context_length, engine.parallel, engine.vocab_size) == ("served", 512, 128, 6)
    assert (engine.bos_token, engine.eos_token) == ("<s>", "</s>") and "messages" in engine.chat_template
    assert [engine.token_bytes(i) for i in range(6)] == [b"<unk>", b"<s>", b"", b" hi", b" there", b"!"]
    assert asyncio.run(engine.tokenize("hi there", add_special=True)) == [1, 3, 4]
    asyncio.run(engine.close())
    assert _StandInLLM.last.closed == ["shutdown"]


def test_stand_in_gauges_are_vllms_scheduler_bounded_by_the_requests_in_flight(stand_in_vllm):
    engine = _stand_in_engine()
    engine._running.update({"a", "b", "c"})  # three generations in flight, no report from vLLM yet: rostra's count
    assert (engine.scheduled_requests(), engine.queued_requests(), engine.cache_usage()) == (3, 0, 3 / 128)
    engine._scheduler.record(SimpleNamespace(num_running_reqs=1, num_waiting_reqs=2, kv_cache_usage=0.25))
    assert (engine.scheduled_requests(), engine.queued_requests(), engine.cache_usage()) == (1, 2, 0.25)
    engine._running.clear()  # all ended since vLLM's last report (an idle engine reports no more)
    assert (engine.scheduled_requests(), engine.queued_requests(), engine.cache_usage()) == (0, 0, 0.0)


def test_stand_in_speculative_config_is_passed_to_the_engine(stand_in_vllm):
    _stand_in_engine(speculative="on", speculative_draft=5)
    assert _StandInLLM.last.engine_args.speculative_config == {
        "method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


def test_stand_in_unknown_engine_argument_is_refused_before_loading(stand_in_vllm):
    with pytest.raises(ValueError, match="no argument not_a_setting"):
        _stand_in_engine(engine_args=["not_a_setting=1"])


def test_stand_in_generation_streams_deltas_and_silences_the_stop_token(stand_in_vllm):
    engine = _stand_in_engine()
    schema = {"type": "object"}
    outputs = _run_stand_in(engine, SamplingParams(max_tokens=9, temperature=0.0, json_schema=schema))
    assert [[s.token_id for s in o.tokens] for o in outputs] == [[3, 4], [5, 2]]
    assert b"".join(s.token_bytes for o in outputs for s in o.tokens) == b" hi there!"
    assert [o.finish_reason for o in outputs] == [None, "stop"]
    prompt, params, request_id = _StandInLLM.last.requests[0]
    assert prompt == {"type": "token", "prompt_token_ids": [1, 3]} and request_id == "r-0"
    assert params.output_kind == stand_in_vllm.RequestOutputKind.DELTA and params.detokenize is False
    assert params.structured_outputs == ("structured", {"json": schema}) and params.max_tokens == 9
    assert engine.running_requests() == 0


def test_stand_in_older_vllm_gets_a_tokens_prompt(stand_in_vllm, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm.inputs", None)  # a vLLM without vllm.inputs.tokens_input
    _run_stand_in(_stand_in_engine(), SamplingParams(max_tokens=4))
    assert _StandInLLM.last.requests[0][0] == {"prompt_token_ids": [1, 3]}


def test_stand_in_prompt_logprobs_and_cached_tokens(stand_in_vllm, monkeypatch):
    monkeypatch.setattr(_StandInLLM, "prompt_logprobs", [None, {3: _lp(-0.5, 2), 4: _lp(-0.2, 1)}])
    monkeypatch.setattr(_StandInLLM, "num_cached_tokens", 1)
    outputs = _run_stand_in(_stand_in_engine(), SamplingParams(max_tokens=9, prompt_logprobs=1))
    scores = outputs[0].prompt_logprobs
    assert scores[0] is None and scores[1].token_id == 3 and scores[1].logprob == -0.5
    assert [(top.token_id, top.logprob) for top in scores[1].top_logprobs] == [(4, -0.2)]
    assert outputs[1].prompt_logprobs is None
    assert [o.cached_tokens for o in outputs] == [None, 1]  # on the last output
    assert _StandInLLM.last.requests[0][1].prompt_logprobs == 1


def test_stand_in_older_vllm_gets_guided_decoding(stand_in_vllm, monkeypatch):
    monkeypatch.delattr(stand_in_vllm, "StructuredOutputsParams")
    stand_in_vllm.GuidedDecodingParams = lambda **kwargs: ("guided", kwargs)
    _run_stand_in(_stand_in_engine(), SamplingParams(max_tokens=4, grammar=regex_grammar("[0-9]+")))
    params = _StandInLLM.last.requests[0][1]
    assert params.guided_decoding == ("guided", {"regex": "[0-9]+"}) and not hasattr(params, "structured_outputs")


def test_stand_in_abort_ends_the_stream_quietly(stand_in_vllm):
    engine = _stand_in_engine()
    outputs = _run_stand_in(engine, SamplingParams(max_tokens=9), abort_after=1)
    assert len(outputs) == 1 and _StandInLLM.last.aborted == ["r-0"] and engine.running_requests() == 0


def test_stand_in_closing_early_closes_vllms_stream(stand_in_vllm):
    engine = _stand_in_engine()
    assert len(_run_stand_in(engine, SamplingParams(max_tokens=9), close_after=1)) == 1
    assert _StandInLLM.last.closed == ["r-0"] and engine.running_requests() == 0  # vLLM aborts on close


def test_stand_in_abort_vllm_did_not_get_from_us_is_an_error(stand_in_vllm, monkeypatch):
    monkeypatch.setattr(_StandInLLM, "finish", "abort")
    with pytest.raises(EngineError, match="aborted"):
        _run_stand_in(_stand_in_engine(), SamplingParams(max_tokens=9))


def test_stand_in_engine_failure_is_an_engine_error_with_the_cause(stand_in_vllm, monkeypatch):
    monkeypatch.setattr(_StandInLLM, "fail", ValueError("CUDA out of memory"))
    engine = _stand_in_engine()
    with pytest.raises(EngineError, match="CUDA out of memory"):
        _run_stand_in(engine, SamplingParams(max_tokens=9))
    assert engine.running_requests() == 0


# Without vLLM installed

def test_engines_and_the_adapter_import_without_vllm():
    # sys.modules["vllm"] = None makes `import vllm` fail in that process, installed or not.
    code = "import rostra.engines, rostra.engines.vllm, rostra.cli; print('ok')"
    result = subprocess.run([sys.executable, "-c", "import sys; sys.modules['vllm'] = None\n" + code],
                            capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "ok", result.stderr


def test_serve_help_lists_the_vllm_engine():
    result = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    assert "vllm" in result.stdout and "--tensor-parallel-size" in result.stdout and "--vllm-arg" in result.stdout


def test_building_the_vllm_engine_without_vllm_says_how_to_install(monkeypatch):
    from rostra.engines.registry import build_engine

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(SystemExit) as exited:
        build_engine(Settings(engine="vllm", model="Qwen/Qwen2.5-0.5B-Instruct"))
    assert "pip install 'rostra[vllm]'" in str(exited.value.code) and MISSING_VLLM in str(exited.value.code)


def test_the_vllm_engine_needs_a_model():
    from rostra.engines.registry import build_engine

    with pytest.raises(SystemExit, match="needs a MODEL"):
        build_engine(Settings(engine="vllm"))


@pytest.mark.skipif(VLLM_INSTALLED, reason="vLLM is installed: this checks the message when it is not")
def test_serve_engine_vllm_without_vllm_exits_with_a_clear_message():
    result = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--engine", "vllm", "org/model",
                             "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "pip install 'rostra[vllm]'" in result.stderr and "Traceback" not in result.stderr


# The real engine (tests/vllm_env.py: a GPU and ROSTRA_VLLM_TEST_MODEL, or ROSTRA_TEST_VLLM=cpu)

@pytest.fixture(scope="module")
def engine(loop, test_model):
    from rostra.engines.vllm import VllmEngine

    engine = VllmEngine(model=test_model, model_name="test", max_model_len=2048, **ENGINE_OPTIONS)
    loop.run_until_complete(engine.start())
    yield engine
    loop.run_until_complete(engine.close())


def _collect(loop, engine, request_id, prompt_ids, params, stop_after=None):
    async def run():
        outputs = []
        async with aclosing(engine.generate(request_id, Prompt(prompt_ids), params)) as stream:
            async for output in stream:
                outputs.append(output)
                if stop_after is not None and len(outputs) >= stop_after:
                    break
        return outputs

    return loop.run_until_complete(run())


def _prompt(loop, engine, text="The capital of France is"):
    return loop.run_until_complete(engine.tokenize(text, add_special=True))


@real
def test_real_engine_describes_its_model(engine):
    assert engine.model.context_length == 2048 and engine.vocab_size > 1000 and engine.parallel >= 1
    assert engine.enforces_constraints and isinstance(engine.chat_template, str) and engine.eos_token


@real
def test_real_tokenize_detokenize_and_token_bytes(loop, engine):
    text = "Héllo wörld 🙂, 1234!"
    ids = loop.run_until_complete(engine.tokenize(text, add_special=False))
    assert loop.run_until_complete(engine.detokenize(ids)) == text
    assert b"".join(engine.token_bytes(i) for i in ids).decode() == text


@real
def test_real_greedy_generation_is_deterministic_and_streams_deltas(loop, engine):
    prompt = _prompt(loop, engine)
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    first = _collect(loop, engine, "greedy-1", prompt, params)
    second = _collect(loop, engine, "greedy-2", prompt, params)
    ids = [s.token_id for o in first for s in o.tokens]
    assert ids == [s.token_id for o in second for s in o.tokens] and len(ids) == 12
    assert len(first) > 1 and all(o.tokens for o in first)  # one delta per step, not one final blob
    assert [o.finish_reason for o in first] == [None] * (len(first) - 1) + ["length"]
    assert b"".join(s.token_bytes for o in first for s in o.tokens).decode(errors="replace").strip()
    assert engine.running_requests() == 0


@real
def test_real_abort_and_early_close_end_the_generation(loop, engine):
    prompt = _prompt(loop, engine)
    params = SamplingParams(max_tokens=1500, temperature=0.0, ignore_eos=True)

    async def abort_after_first():
        got = 0
        async with aclosing(engine.generate("to-abort", Prompt(prompt), params)) as stream:
            async for output in stream:
                if not got:
                    await engine.abort("to-abort")
                got += len(output.tokens)
        return got

    tokens = loop.run_until_complete(asyncio.wait_for(abort_after_first(), 60))
    assert 0 < tokens < 1500 and engine.running_requests() == 0
    assert len(_collect(loop, engine, "to-close", prompt, params, stop_after=2)) == 2
    assert engine.running_requests() == 0


@real
def test_real_logprobs(loop, engine):
    outputs = _collect(loop, engine, "logprobs", _prompt(loop, engine),
                       SamplingParams(max_tokens=6, temperature=0.0, top_logprobs=3))
    steps = [s for o in outputs for s in o.tokens]
    assert steps
    for step in steps:
        assert step.logprob is not None and step.logprob <= 0 and len(step.top_logprobs) == 3
        values = [t.logprob for t in step.top_logprobs]
        assert values == sorted(values, reverse=True)
        assert step.top_logprobs[0].token_id == step.token_id  # greedy: the sampled token is the best


@real
def test_real_json_schema_is_enforced(loop, engine):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    outputs = _collect(loop, engine, "json", _prompt(loop, engine, "Describe Paris."),
                       SamplingParams(max_tokens=80, temperature=0.7, seed=3, json_schema=schema))
    assert outputs[-1].finish_reason == "stop"
    text = b"".join(s.token_bytes for o in outputs for s in o.tokens).decode()
    jsonschema.validate(json.loads(text), schema)


@real
def test_real_guided_regex(loop, engine):
    outputs = _collect(loop, engine, "regex", _prompt(loop, engine, "A phone number:"),
                       SamplingParams(max_tokens=20, temperature=0.8, seed=1, grammar=regex_grammar(r"\d{3}-\d{4}")))
    text = b"".join(s.token_bytes for o in outputs for s in o.tokens).decode()
    assert re.fullmatch(r"\d{3}-\d{4}", text), text


@real
def test_real_serve_with_the_openai_sdk(test_model):
    from openai import OpenAI

    from servers import RunningServer

    server = RunningServer(["--engine", "vllm", test_model, "--served-model-name", "small", "--max-model-len", "2048",
                            *SERVE_FLAGS], startup_timeout=900)
    try:
        client = OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == ["small"]
        messages = [{"role": "user", "content": "Say hello in one short sentence."}]
        whole = client.chat.completions.create(model="small", messages=messages, max_tokens=24, temperature=0,
                                               logprobs=True, top_logprobs=2)
        choice = whole.choices[0]
        assert choice.message.content.strip() and choice.finish_reason in ("stop", "length")
        assert all(len(t.top_logprobs) == 2 for t in choice.logprobs.content)
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
            model="small", messages=messages, max_tokens=24, temperature=0, stream=True) if chunk.choices)
        assert streamed == choice.message.content
        structured = client.chat.completions.create(
            model="small", messages=[{"role": "user", "content": "Give me a number."}], max_tokens=40,
            response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": {
                "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}})
        assert isinstance(json.loads(structured.choices[0].message.content)["n"], int)
    finally:
        server.stop()


# Embeddings: vLLM's pooling runner (AsyncLLM.encode), on the stand-in

class _StandInPoolingLLM(_StandInLLM):
    """An embedding model on vLLM's pooling runner: `encode` yields one final PoolingRequestOutput whose
    `outputs.data` is a tensor (here: [first id, length, 0, 0] scaled to unit length)."""

    def __init__(self, engine_args):
        super().__init__(engine_args)
        self.model_config = SimpleNamespace(max_model_len=512, runner_type="pooling", is_matryoshka=True,
                                            matryoshka_dimensions=[2, 4], get_hidden_size=lambda: 4)
        self.encoded = []

    async def encode(self, prompt, pooling_params, request_id):
        import torch

        self.encoded.append((prompt, pooling_params, request_id))
        await asyncio.sleep(0)
        ids = prompt["prompt_token_ids"]
        vector = torch.tensor([float(ids[0]), float(len(ids)), 0.0, 0.0])
        yield SimpleNamespace(outputs=SimpleNamespace(data=vector / vector.norm()), finished=True)


def test_stand_in_embedding_model_runs_on_the_pooling_runner(stand_in_vllm, monkeypatch):
    vllm = sys.modules["vllm"]
    monkeypatch.setattr(vllm, "AsyncLLMEngine", _StandInPoolingLLM)
    monkeypatch.setattr(vllm, "PoolingParams", lambda **kwargs: SimpleNamespace(**kwargs), raising=False)
    monkeypatch.setattr(_StandInLLM, "fail", None)
    engine = _stand_in_engine(task="embed")
    llm = _StandInLLM.last
    assert llm.engine_args.runner == "pooling"
    assert (engine.task, engine.embedding_dimensions, engine.matryoshka_dimensions) == ("embed", 4, (2, 4))
    vectors = asyncio.run(engine.embed([[3, 4, 5, 6], [1]]))
    assert np_close(vectors, [[0.6, 0.8, 0.0, 0.0], [1 / 2 ** 0.5, 1 / 2 ** 0.5, 0.0, 0.0]])
    assert [prompt["prompt_token_ids"] for prompt, _, _ in llm.encoded] == [[3, 4, 5, 6], [1]]
    assert all(params.task == "embed" for _, params, _ in llm.encoded)
    assert len({request_id for _, _, request_id in llm.encoded}) == 2


def test_task_flag_picks_vllms_runner():
    common = dict(max_model_len=None, tensor_parallel_size=1, pipeline_parallel_size=1, gpu_memory_utilization=None,
                  dtype="auto", extra={})
    assert "runner" not in engine_arg_kwargs("m", **common)
    assert engine_arg_kwargs("m", **common, task="embed")["runner"] == "pooling"
    assert engine_arg_kwargs("m", **common, task="generate")["runner"] == "generate"


def np_close(got, expected) -> bool:
    return all(abs(a - b) < 1e-6 for row, want in zip(got, expected) for a, b in zip(row, want))


# Reranking: vLLM's classify pooler (AsyncLLM.encode with PoolingParams(task="classify")), on the stand-in

class _StandInPairTokenizer(_StandInTokenizer):
    """A BERT-like pair tokenizer: <s> query </s> document </s>, token types 0 then 1."""

    def __call__(self, queries, documents):
        ids, types = [], []
        for query, document in zip(queries, documents):
            first, second = [1, *self.encode(query, False), 2], [*self.encode(document, False), 2]
            ids.append(first + second)
            types.append([0] * len(first) + [1] * len(second))
        return {"input_ids": ids, "token_type_ids": types}


class _StandInScoringLLM(_StandInPoolingLLM):
    """A cross-encoder on vLLM's pooling runner: its score is the pair's length / 100, as one-element data."""

    def __init__(self, engine_args):
        super().__init__(engine_args)
        self.model_config.hf_config = SimpleNamespace(architectures=["BertForSequenceClassification"])

    def get_tokenizer(self):
        return _StandInPairTokenizer()

    async def encode(self, prompt, pooling_params, request_id):
        import torch

        self.encoded.append((prompt, pooling_params, request_id))
        await asyncio.sleep(0)
        yield SimpleNamespace(outputs=SimpleNamespace(data=torch.tensor([len(prompt["prompt_token_ids"]) / 100])),
                              finished=True)


def test_stand_in_cross_encoder_is_scored_by_vllms_score_pooler(stand_in_vllm, monkeypatch):
    from rostra.engines.base import PairTooLong

    vllm = sys.modules["vllm"]
    monkeypatch.setattr(vllm, "AsyncLLMEngine", _StandInScoringLLM)
    monkeypatch.setattr(vllm, "PoolingParams", lambda **kwargs: SimpleNamespace(**kwargs), raising=False)
    monkeypatch.setattr(_StandInLLM, "fail", None)
    engine = _stand_in_engine(task="rerank")
    llm = _StandInLLM.last
    assert llm.engine_args.runner == "pooling" and engine.task == "rerank"
    scored = asyncio.run(engine.score_pairs([("hi", "there !"), ("hi there", "hi")]))
    assert scored.scores == pytest.approx([0.06, 0.06]) and scored.prompt_tokens == 12
    assert [prompt["prompt_token_ids"] for prompt, _, _ in llm.encoded] == [[1, 3, 2, 4, 5, 2], [1, 3, 4, 2, 3, 2]]
    assert llm.encoded[0][0]["token_type_ids"] == [0, 0, 0, 1, 1, 1]
    assert all(params.task == "classify" for _, params, _ in llm.encoded)
    with pytest.raises(PairTooLong) as refused:
        asyncio.run(engine.score_pairs([("hi", "hi"), ("hi", "hi " * 600)]))
    assert refused.value.index == 1
