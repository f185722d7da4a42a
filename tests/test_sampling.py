"""The turn's sampling (rostra/sampling.py): a type of its own that each API builds under its own names, checked
there (a 400 names the parameter its client wrote), and sent to an upstream as the Chat fields it amounts to."""

import pytest

from rostra.errors import InvalidRequest
from rostra.protocol.chat import ChatCompletionRequest
from rostra.sampling import Sampling
from rostra.serving.upstream_body import upstream_chat_body
from rostra.turn import Turn, TurnMessage


@pytest.mark.parametrize("sampling, names, param", [
    (Sampling(top_p=0.0), {}, "top_p"),  # Anthropic's top_p range starts at 0: sampling from no token is none
    (Sampling(temperature=2.5), {}, "temperature"),
    (Sampling(stop=("",)), {"stop": "stop_sequences"}, "stop_sequences"),  # Messages' name for the stops
    (Sampling(stop=tuple("abcdefghijklmnopq")), {"stop": "stop_sequences"}, "stop_sequences"),  # 17: over 16
    (Sampling(top_k=2**31), {}, "top_k"),  # engines read it as a 32-bit integer
    (Sampling(n=0), {}, "n"),
])
def test_a_value_out_of_range_names_the_apis_own_parameter(sampling, names, param):
    with pytest.raises(InvalidRequest) as refused:
        sampling.checked(names)
    assert refused.value.param == param


def test_values_in_range_pass():
    sampling = Sampling(temperature=0.0, top_p=1.0, top_k=-1, min_p=0.0, stop=("END",), n=2)
    assert sampling.checked() is sampling


def test_chat_request_becomes_the_turns_sampling():
    request = ChatCompletionRequest.model_validate({
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.3, "stop": "END",
        "logit_bias": {"42": -100}, "stop_token_ids": [7], "mirostat_mode": 2, "banned_strings": ["bad"], "n": 3})
    sampling = request.sampling()
    assert (sampling.temperature, sampling.stop, sampling.stop_token_ids, sampling.n) == (0.3, ("END",), (7,), 3)
    assert dict(sampling.logit_bias) == {42: -100.0}  # token ids as numbers, once
    assert sampling.samplers.mirostat == 2 and sampling.bad_words == ("bad",)  # tabby's names folded
    assert sampling.top_p is None  # unset: the server's default fills it


def test_an_upstream_is_sent_only_what_the_client_set_under_chats_names():
    turn = Turn(model="m", messages=(TurnMessage("user", "hi", "messages[0]"),),
                sampling=Sampling(temperature=0.5, top_k=20, stop=("END",), logit_bias={5: 1.0}), user="u-1")
    body = upstream_chat_body(turn, {})
    assert {key: value for key, value in body.items() if key not in ("model", "messages")} == {
        "temperature": 0.5, "top_k": 20, "stop": ["END"], "logit_bias": {"5": 1.0}, "user": "u-1"}
