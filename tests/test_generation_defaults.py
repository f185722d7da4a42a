"""Generation defaults: the model's recommendation, --generation-config and --override-generation-config,
applied only to the fields a request leaves out (Chat, Completions, Responses)."""

import json
import re
import subprocess
import sys

import httpx
import pytest
from openai import OpenAI

from rostra.engines.scripted import ScriptLine, pick_output
from rostra.generation_defaults import (
    EMBEDDED_DEFAULTS,
    GenerationConfigError,
    from_checkpoint_config,
    from_gguf_metadata,
    resolve,
)
from servers import DATA, RunningServer

MODEL = "scripted"
COUNT = "count to ten"  # scripted: "one two three ... ten", 10 tokens and more


def test_gguf_sampling_keys_become_request_fields():
    # Key names and types as llama.cpp's converter writes them (gguf-py Keys.General.SAMPLING_*).
    metadata = {"general.sampling.temp": 0.6, "general.sampling.top_k": 20, "general.sampling.top_p": 0.95,
                "general.sampling.min_p": 0.0, "general.sampling.penalty_repeat": 1.05,
                "general.sampling.mirostat": 0, "general.sampling.sequence": "penalties;top_k;top_p;temp",
                "general.name": "x"}
    assert from_gguf_metadata(metadata) == {"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.0,
                                            "repetition_penalty": 1.05}
    assert from_gguf_metadata({"general.name": "no sampling"}) == {}


def test_checkpoint_config_keys_become_request_fields():
    config = {"bos_token_id": 1, "do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20,
              "repetition_penalty": 1.05, "max_new_tokens": 2048, "min_p": None, "transformers_version": "4.51"}
    assert from_checkpoint_config(config) == {"temperature": 0.7, "top_p": 0.8, "top_k": 20,
                                              "repetition_penalty": 1.05, "max_tokens": 2048}


def test_transformers_engine_reads_only_what_the_file_sets(tmp_path):
    """The engine maps GenerationConfig.to_diff_dict(): transformers' own defaults (top_k 50) stay out."""
    from transformers import GenerationConfig

    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "eos_token_id": 2, "max_new_tokens": 1024}))
    diff = GenerationConfig.from_pretrained(tmp_path).to_diff_dict()
    assert from_checkpoint_config(diff) == {"temperature": 0.6, "top_p": 0.95, "max_tokens": 1024}


def test_vllm_engine_takes_what_vllm_reads_from_the_checkpoint():
    from types import SimpleNamespace

    from rostra.engines.vllm import _recommended_sampling

    # vLLM's ModelConfig.get_diff_sampling_param() already names the fields as requests do.
    config = SimpleNamespace(get_diff_sampling_param=lambda: {"temperature": 0.7, "top_k": 20, "max_tokens": 2048,
                                                               "repetition_penalty": 1.05})
    assert _recommended_sampling(config) == {"temperature": 0.7, "top_k": 20, "max_tokens": 2048,
                                             "repetition_penalty": 1.05}
    assert _recommended_sampling(SimpleNamespace()) == {}


def test_resolution_order(tmp_path):
    model = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 512}
    assert resolve("auto", model).values == model
    assert resolve("openai", model).values == {}
    assert resolve("auto", model, '{"temperature": 0.5, "max_tokens": 64}').values == \
        {"temperature": 0.5, "top_p": 0.9, "max_tokens": 64}
    assert resolve("openai", model, {"top_k": 40}).values == {"top_k": 40}  # a mapping, from a YAML config
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.95}))
    assert resolve(str(tmp_path), model).values == {"temperature": 0.6, "top_p": 0.95}  # a directory
    assert resolve(str(tmp_path / "generation_config.json"), model).values == {"temperature": 0.6, "top_p": 0.95}


@pytest.mark.parametrize("mode,override", [
    ("auto", '{"temprature": 0.5}'),  # unknown field
    ("auto", '{"temperature": 3}'),  # out of range
    ("auto", '{"max_tokens": 0}'),
    ("auto", '{"top_p": 0}'),
    ("auto", '{"top_k": 2.5}'),
    ("auto", '{"temperature": "hot"}'),
    ("auto", "[1, 2]"),
    ("auto", "{not json"),
    ("/no/such/generation_config.json", None),
])
def test_bad_settings_are_refused(mode, override):
    with pytest.raises(GenerationConfigError):
        resolve(mode, {}, override)


def test_a_bad_override_stops_the_server_with_a_message():
    done = subprocess.run([sys.executable, "-m", "rostra.cli", "serve", "--engine", "scripted",
                           "--override-generation-config", '{"temperature": 9}', "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "temperature=9 is out of range" in done.stderr


def test_scripted_lines_that_obey_a_constraint_come_first():
    script = [ScriptLine(re.compile("hi"), "Hello there"), ScriptLine(re.compile("hi"), '{"answer": "hello"}')]
    schema = {"type": "object", "required": ["answer"]}
    assert pick_output(script, "hi", "user") == ("Hello there", 0.0)
    assert pick_output(script, "hi", "user", schema) == ('{"answer": "hello"}', 0.0)
    assert pick_output(script, "hi", "user", {"type": "array"}) == ("Hello there", 0.0)  # none obeys: the first


@pytest.fixture(scope="module")
def server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"),
                            "--override-generation-config", '{"temperature": 0.3, "top_p": 0.8, "max_tokens": 4}'],
                           log_level="info")
    yield server
    server.stop()


def test_models_show_the_defaults_and_the_log_names_them(server):
    card = httpx.get(f"{server.v1}/models/{MODEL}").json()
    assert card["generation_defaults"] == {"temperature": 0.3, "top_p": 0.8, "max_tokens": 4}
    assert httpx.get(f"{server.v1}/models").json()["data"][0]["generation_defaults"] == card["generation_defaults"]
    log = server.log_path.read_text()
    assert "generation defaults: max_tokens=4, temperature=0.3, top_p=0.8 (from openai + --override" in log


def test_default_length_applies_only_when_the_request_sets_none(server):
    client = OpenAI(base_url=server.v1, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": COUNT}]
    cut = client.chat.completions.create(model=MODEL, messages=messages)
    assert cut.usage.completion_tokens == 4 and cut.choices[0].finish_reason == "length"
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=100)
    assert whole.choices[0].message.content == "one two three four five six seven eight nine ten"
    assert whole.choices[0].finish_reason == "stop"
    assert client.completions.create(model=MODEL, prompt=COUNT).usage.completion_tokens == 4
    assert client.completions.create(model=MODEL, prompt=COUNT, max_tokens=6).usage.completion_tokens == 6
    response = client.responses.create(model=MODEL, input=COUNT)
    assert response.status == "incomplete" and response.usage.output_tokens == 4
    assert (response.temperature, response.top_p) == (0.3, 0.8)  # the sampling in force, echoed
    chosen = client.responses.create(model=MODEL, input=COUNT, temperature=0.0, max_output_tokens=50)
    assert chosen.status == "completed" and (chosen.temperature, chosen.top_p) == (0.0, 0.8)


def test_openai_defaults_without_configuration(scripted_server):
    """The scripted engine recommends nothing: OpenAI's defaults (Completions: 16 tokens)."""
    card = httpx.get(f"{scripted_server.v1}/models/{MODEL}").json()
    assert card["generation_defaults"] == {} and card["generation_defaults_from"] == "openai"
    client = OpenAI(base_url=scripted_server.v1, api_key="x", max_retries=0)
    reply = client.responses.create(model=MODEL, input="say hello")
    assert (reply.temperature, reply.top_p) == (1.0, 1.0)


def test_the_embedded_model_gets_its_model_cards_sampling(real_server):
    card = httpx.get(f"{real_server.v1}/models").json()["data"][0]
    assert card["generation_defaults"] == EMBEDDED_DEFAULTS and card["generation_defaults_from"] == "its model card"
