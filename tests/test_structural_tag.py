"""vLLM's structural tags (rostra/guided/structural_tag.py): accepted under vLLM's three names, checked (a 400
naming the part), compiled into an llguidance grammar that llama.cpp enforces (the embedded model), passed
to vLLM as the tag itself, refused by an engine that enforces no grammar."""

import json
import re

import pytest

from harness import InProcessServer
from rostra.core import SamplingParams
from rostra.engines.remote.engine import RemoteEngine
from rostra.engines.remote.upstream import UpstreamConfig
from rostra.engines.vllm import structured_output_spec
from rostra.errors import InvalidRequest
from rostra.guided.constraints import grammar_error
from wire import check, post

ARGS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TAG = {"type": "structural_tag", "triggers": ["<function="],
       "structures": [{"begin": "<function=get_weather>", "schema": ARGS, "end": "</function>"}]}
CALL = 'Let me look. <function=get_weather>{"city": "Oslo"}</function>'


class Recording:
    def __init__(self, engine):
        self.params = []
        generate = engine.generate

        def recorded(request_id, prompt, params):
            self.params.append(params)
            return generate(request_id, prompt, params)

        engine.generate = recorded


@pytest.mark.parametrize("fields", [
    {"response_format": TAG},
    {"structured_outputs": {"structural_tag": json.dumps(TAG)}},
    {"structural_tag": json.dumps({key: TAG[key] for key in ("triggers", "structures")})},
])
async def test_accepted_under_each_name_and_handed_to_the_engine(tmp_path, fields):
    async with InProcessServer(tmp_path, [{"match": "weather", "output": CALL}]) as server:
        engine = Recording(server.engine)
        body = {"model": "scripted", "messages": [{"role": "user", "content": "weather in Oslo"}], **fields}
        response = await server.client.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        check("chat", response.json())
        params = engine.params[0]
        assert params.structural_tag == {**TAG, "structures": [dict(TAG["structures"][0])]}
        assert params.grammar.startswith("%llguidance") and grammar_error(params.grammar) == ""
        assert structured_output_spec(params) == {"structural_tag": json.dumps(params.structural_tag)}


@pytest.mark.parametrize("tag,param", [
    ({**TAG, "triggers": []}, "response_format.triggers"),
    ({**TAG, "triggers": ["<tool>"]}, "response_format.structures[0].begin"),
    ({**TAG, "structures": [{"begin": "<function=f>", "schema": {"type": "nonsense"}, "end": ""}]},
     "response_format.structures[0].schema"),
    ({**TAG, "structures": [{"begin": "<function=f>", "schema": {"type": "array", "maxItems": 10**9}}]},
     "response_format.structures[0].schema.maxItems"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags"}}, "response_format.format"),
])
async def test_a_bad_tag_is_a_400_naming_the_part(tmp_path, tag, param):
    async with InProcessServer(tmp_path, []) as server:
        body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "response_format": tag}
        response = await server.client.post("/v1/chat/completions", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == param


async def test_an_engine_without_grammars_refuses_it_by_name():
    engine = RemoteEngine([UpstreamConfig(url="http://127.0.0.1:9")])
    with pytest.raises(InvalidRequest, match="remote engine") as raised:
        engine.check_params(SamplingParams(max_tokens=8, grammar="start: /x/", structural_tag=TAG))
    assert raised.value.param == "structural_tag"


def test_llama_cpp_enforces_it_after_each_trigger(real_server):
    """The embedded model writes " the" often: made the trigger, every one must be followed by JSON that obeys
    the schema and the end; between them the text is free."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    tag = {"type": "structural_tag", "triggers": [" the"], "structures": [{"begin": " the", "schema": schema,
                                                                          "end": "."}]}
    body = check("chat", post(real_server.base_url, "/v1/chat/completions", {
        "model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "Describe the sun and the moon."}],
        "max_tokens": 48, "temperature": 0, "response_format": tag}).json())
    text = body["choices"][0]["message"]["content"]
    parts = text.split(" the")
    assert len(parts) > 1, text  # it wrote the trigger
    for part in parts[1:-1] + ([parts[-1]] if body["choices"][0]["finish_reason"] == "stop" else []):
        match = re.match(r"(\{.*?\})\.", part, re.DOTALL)
        assert match, text
        assert set(json.loads(match.group(1))) == {"n"} and isinstance(json.loads(match.group(1))["n"], int)
