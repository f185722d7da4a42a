"""`rostra serve --engine vllm`, end to end with the openai SDK, beside vLLM's own OpenAI server on the same
checkpoint and settings (started in this module): chat, streams, forced tool calls, JSON schema, Responses,
embeddings (all-MiniLM-L6-v2 on vLLM's pooling runner), a client's disconnect aborting vLLM's request, vLLM's
gauges on /metrics, and at temperature 0 the same answers and logprobs as vLLM's server.

Runs where tests/vllm_env.py says (.ci/run's vLLM step: ROSTRA_TEST_VLLM=cpu); skips elsewhere.
"""

from __future__ import annotations

import math
import threading
import time

import httpx
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from servers import RunningServer
from vllm_env import SERVE_FLAGS, VLLM_SERVER_FLAGS, real, test_model  # noqa: F401 (a fixture)
from vllm_server import STARTUP, VllmServer

pytestmark = real
MODEL = "smollm2"


@pytest.fixture(scope="module")
def rostra(test_model):
    server = RunningServer(["--engine", "vllm", test_model, "--served-model-name", MODEL, "--max-model-len", "2048",
                            "--public-metrics", *SERVE_FLAGS], startup_timeout=STARTUP)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def vllm_server(test_model, rostra):  # after rostra's: the two engines never load at once on 2 cores
    server = VllmServer(test_model, "--served-model-name", MODEL, "--max-model-len", "2048", *VLLM_SERVER_FLAGS)
    yield server
    server.stop()


def client(base_url: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


def test_chat_and_its_stream(rostra):
    openai = client(rostra.base_url)
    assert [m.id for m in openai.models.list()] == [MODEL]
    whole = openai.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=24, temperature=0)
    choice = whole.choices[0]
    assert choice.message.content.strip() and choice.finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0
    chunks = list(openai.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=24, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == choice.message.content
    assert chunks[-1].usage == whole.usage


def test_forced_tool_call(rostra):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    whole = client(rostra.base_url).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=60, temperature=0)
    call = whole.choices[0].message.tool_calls[0]
    import json

    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)


def test_json_schema(rostra):
    import json

    import jsonschema

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    whole = client(rostra.base_url).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Give me a number."}], max_tokens=40,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(whole.choices[0].message.content), schema)


def test_responses(rostra):
    response = client(rostra.base_url).responses.create(model=MODEL, input="Say hello.", max_output_tokens=16,
                                                        temperature=0)
    assert response.status in ("completed", "incomplete") and response.output_text.strip()
    assert response.usage.output_tokens > 0


def gauges(base_url: str) -> dict[str, float]:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    return {family.name: family.samples[0].value for family in text_string_to_metric_families(text)
            if family.name.startswith(("vllm:num_requests", "vllm:kv_cache")) and family.samples}


def test_disconnect_aborts_vllms_request_and_the_gauges_follow(rostra):
    openai = client(rostra.base_url)
    stream = openai.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=1500, temperature=0,
                                            stream=True, extra_body={"ignore_eos": True})
    for number, _ in enumerate(stream):
        if number == 3:
            break
    during = gauges(rostra.base_url)
    assert during["vllm:num_requests_running"] == 1 and 0 < during["vllm:kv_cache_usage_perc"] <= 1
    stream.close()  # the client hangs up
    closed = time.monotonic()
    while gauges(rostra.base_url)["vllm:num_requests_running"] and time.monotonic() - closed < 5:
        time.sleep(0.05)
    assert time.monotonic() - closed < 1.0, "vLLM still ran the request a second after the client left"
    assert gauges(rostra.base_url)["vllm:num_requests_waiting"] == 0


CHATS = ["Say hello in one short sentence.", "What is the capital of France?", "Count from one to five.",
         "Name a colour.", "Write a haiku about the sea.", "What is 2 + 2?", "Give me a fruit.",
         "Describe a cat in five words."]
PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,"]


END_TEXTS = {"<|im_end|>", "<|endoftext|>"}  # the end tokens of SmolLM2's (and Qwen's) vocabulary


def spelled(steps, ours: bool) -> list[tuple[str, list[str]]]:
    """Each step's token and its top tokens, the end token written "<end>": rostra's is silent text (""), as on
    every engine, where vLLM spells it."""

    def end(token: str) -> str:
        return "<end>" if (token == "" if ours else token in END_TEXTS) else token

    return [(end(step.token), [end(top.token) for top in step.top_logprobs]) for step in steps]


def same_logprobs(ours: list[float], theirs: list[float]) -> bool:
    return len(ours) == len(theirs) and all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(ours, theirs))


def test_temperature_zero_answers_and_logprobs_are_vllms_own(rostra, vllm_server):
    ours, theirs = client(rostra.base_url), client(vllm_server.base_url)
    for content in CHATS:
        request = dict(model=MODEL, messages=[{"role": "user", "content": content}], max_tokens=24, temperature=0,
                       logprobs=True, top_logprobs=2)
        a, b = (api.chat.completions.create(**request).choices[0] for api in (ours, theirs))
        assert a.message.content == b.message.content and a.finish_reason == b.finish_reason, content
        assert same_logprobs([t.logprob for t in a.logprobs.content], [t.logprob for t in b.logprobs.content])
        assert spelled(a.logprobs.content, ours=True) == spelled(b.logprobs.content, ours=False)
    for prompt in PROMPTS:
        request = dict(model=MODEL, prompt=prompt, max_tokens=16, temperature=0, logprobs=2)
        a, b = (api.completions.create(**request).choices[0] for api in (ours, theirs))
        assert a.text == b.text, prompt
        assert a.logprobs.tokens == b.logprobs.tokens
        assert same_logprobs(a.logprobs.token_logprobs, b.logprobs.token_logprobs)


def test_echo_without_generation_scores_the_prompt_as_vllm_does(rostra, vllm_server):
    request = dict(model=MODEL, prompt="The capital of France is Paris.", max_tokens=0, echo=True, logprobs=1)
    a, b = (client(url).completions.create(**request).choices[0] for url in (rostra.base_url, vllm_server.base_url))
    assert a.text == b.text == request["prompt"] and a.logprobs.tokens == b.logprobs.tokens
    assert a.logprobs.token_logprobs[0] is None and b.logprobs.token_logprobs[0] is None
    assert same_logprobs(a.logprobs.token_logprobs[1:], b.logprobs.token_logprobs[1:])


@pytest.fixture(scope="module")
def minilm(vllm_server, minilm_checkpoint):  # after the generation servers are up: one load at a time
    server = RunningServer(["--engine", "vllm", str(minilm_checkpoint), "--served-model-name", "minilm",
                            "--task", "embed", *SERVE_FLAGS], startup_timeout=STARTUP)
    yield server
    server.stop()


def test_embeddings_on_vllms_pooling_runner(minilm):
    texts = ["A cat sits on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue rose by 4%."]
    vectors = [item.embedding for item in client(minilm.base_url).embeddings.create(model="minilm", input=texts).data]
    assert [len(v) for v in vectors] == [384] * 3
    assert all(math.isclose(sum(x * x for x in v), 1.0, abs_tol=1e-3) for v in vectors)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.2


def test_concurrent_requests_all_finish(rostra):
    # Eight at once: vLLM batches them; each gets a whole answer.
    results: list[str] = []

    def ask(number: int) -> None:
        answer = client(rostra.base_url).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Say the number {number}."}], max_tokens=12,
            temperature=0)
        results.append(answer.choices[0].message.content)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(results) == 8 and all(results)


def test_prompts_reach_vllm_in_its_current_input_form(rostra):
    # vLLM warns once per process when it is handed a raw TokensPrompt (deprecated); rostra's log has vLLM's.
    log = rostra.log_path.read_text(errors="replace")
    assert "EngineCore" in log and "Passing raw prompts" not in log
