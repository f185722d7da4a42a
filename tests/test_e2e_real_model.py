"""End to end: the `openai` SDK over HTTP against `rostra serve` on the embedded model (llama.cpp)."""

import asyncio
import json

import httpx
import pytest
from openai import AsyncOpenAI, OpenAI

from wire import check, fold_chat_stream, post, stream

MODEL = "SmolLM2-135M-Instruct"
HELLO = [{"role": "user", "content": "Say hello in one short sentence."}]


@pytest.fixture(scope="module")
def client(real_server) -> OpenAI:
    return OpenAI(base_url=f"{real_server.base_url}/v1", api_key="unused", max_retries=0)


def test_models(client):
    assert [m.id for m in client.models.list()] == [MODEL]


def test_chat_non_stream(client):
    completion = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=16, temperature=0)
    choice = completion.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert 0 < completion.usage.completion_tokens <= 16


def test_chat_stream_helper_assembles_the_same_message(client):
    request = dict(model=MODEL, messages=HELLO, max_tokens=24, temperature=0, seed=7)
    whole = client.chat.completions.create(**request)
    with client.chat.completions.stream(**request) as events:
        for _ in events:
            pass
        final = events.get_final_completion()
    assert final.choices[0].message.content == whole.choices[0].message.content
    assert final.choices[0].finish_reason == whole.choices[0].finish_reason


def test_stream_and_non_stream_raw_agree(real_server):
    request = {"model": MODEL, "messages": HELLO, "max_tokens": 20, "temperature": 0, "logprobs": True,
               "top_logprobs": 3, "stream_options": {"include_usage": True}}
    whole = check("chat", post(real_server.base_url, "/v1/chat/completions", request).json())
    folded = fold_chat_stream(stream(real_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert folded[0]["content"] == whole["choices"][0]["message"]["content"]
    tokens = whole["choices"][0]["logprobs"]["content"]
    assert len(tokens) == whole["usage"]["completion_tokens"] or whole["choices"][0]["finish_reason"] == "stop"
    assert all(len(t["top_logprobs"]) == 3 and t["logprob"] <= 0 for t in tokens)


def test_same_seed_same_output(client):
    request = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=24,
                   temperature=1.0, seed=1234)
    first = [c.message.content for c in client.chat.completions.create(**request, n=2).choices]
    second = [c.message.content for c in client.chat.completions.create(**request, n=2).choices]
    assert first == second
    assert first[0] != first[1]  # each choice samples with its own seed (seed + index)


def test_stop_string_with_real_model(client):
    request = dict(model=MODEL, messages=[{"role": "user", "content": "Count from 1 to 20, separated by commas."}],
                   max_tokens=60, temperature=0)
    free = client.chat.completions.create(**request).choices[0].message.content
    assert len(free) > 12
    stop = free[8:11]  # a stop string the greedy answer is known to reach
    stopped = client.chat.completions.create(**request, stop=[stop]).choices[0]
    assert stopped.message.content == free[: free.index(stop)] and stopped.finish_reason == "stop"


def test_n_and_completions(client):
    completion = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=8, n=2)
    assert [c.index for c in completion.choices] == [0, 1]
    legacy = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0,
                                       logprobs=2, echo=False)
    assert legacy.choices[0].text and len(legacy.choices[0].logprobs.tokens) <= 8
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True) if c.choices)
    assert streamed == legacy.choices[0].text


def test_concurrent_streams_complete(real_server):
    client = AsyncOpenAI(base_url=f"{real_server.base_url}/v1", api_key="unused", max_retries=0)

    async def one(i: int) -> tuple[str, str]:
        text, reason = "", None
        response = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Write a sentence about the number {i}."}],
            max_tokens=32, temperature=0, stream=True)
        async for chunk in response:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                reason = choice.finish_reason or reason
        return text, reason

    async def run():
        sequential = [await one(i) for i in range(4)]
        concurrent = await asyncio.gather(*(one(i) for i in range(4)))
        return sequential, concurrent

    sequential, concurrent = asyncio.run(run())
    assert all(text and reason in ("stop", "length") for text, reason in concurrent)
    # Each stream carries its own answer: the texts differ from one another as the sequential ones do.
    assert len({t for t, _ in concurrent}) == len({t for t, _ in sequential})


def test_prompt_too_long_is_400(real_server):
    response = post(real_server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": [{"role": "user", "content": "word " * 3000}]})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    assert httpx.get(f"{real_server.base_url}/health").json()["status"] == "ok"


def test_a_budget_beyond_the_context_generates_to_its_end(client):
    """OpenCode's and Qwen Code's default (max_tokens 32000) on a 2048-token context: the prompt leaves room for a
    few tokens, which are generated; no 400."""
    long_prompt = [{"role": "user", "content": "Repeat after me: " + "blue " * 1950 + "and again."}]
    completion = client.chat.completions.create(model=MODEL, messages=long_prompt, max_tokens=32000, temperature=0)
    usage = completion.usage
    assert completion.choices[0].finish_reason in ("length", "stop")
    assert usage.prompt_tokens + usage.completion_tokens <= 2048
    assert usage.model_extra["output_budget"] == {"requested": 32000, "granted": 2048 - usage.prompt_tokens}
    short = client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=32000, temperature=0)
    assert short.choices[0].message.content and short.usage.completion_tokens <= 2048 - short.usage.prompt_tokens


def test_internal_llamacpp_listener_is_guarded(real_server):
    """xllamacpp opens llama.cpp's own HTTP listener; without its secret key it serves nothing."""
    import re

    found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", real_server.log_path.read_text(errors="replace"))
    assert found, "llama.cpp's listener address not in the log"
    internal = f"http://127.0.0.1:{found.group(1)}"
    for path, body in [("/v1/chat/completions", {"messages": HELLO}), ("/completion", {"prompt": "x"}),
                       ("/tokenize", {"content": "x"}), ("/v1/completions", {"prompt": "x"})]:
        assert httpx.post(internal + path, json=body).status_code == 401
    assert httpx.post(internal + "/v1/completions", json={"prompt": "x"},
                      headers={"authorization": "Bearer guess"}).status_code == 401


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_calls_are_valid(client, tool_choice):
    import jsonschema

    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
        tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=tool_choice, parallel_tool_calls=False,
        max_tokens=200, temperature=0)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER_TOOL, TIME_TOOL)}
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), tools[call.function.name])


def test_response_format_json_schema(client):
    import jsonschema

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Invent a person."}], max_tokens=100, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}})
    assert completion.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(completion.choices[0].message.content), schema)


def test_guided_choice(real_server):
    body = post(real_server.base_url, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "Is the sky blue?"}],
        "guided_choice": ["yes", "no"], "max_tokens": 5}).json()
    assert body["choices"][0]["message"]["content"] in ("yes", "no")


def test_control_tokens_reach_the_parsers_as_text(real_server):
    """llama.cpp leaves control tokens' text empty; tool markers often are control tokens, so
    rostra spells them from the vocabulary (end-of-generation tokens excepted). With no parser to
    read them, skip_special_tokens (default true, as in vLLM) leaves them out of the content."""
    request = {"model": MODEL, "messages": HELLO, "max_tokens": 2, "temperature": 0, "logit_bias": {"3": 100}}
    body = post(real_server.base_url, "/v1/chat/completions", {**request, "skip_special_tokens": False}).json()
    assert body["choices"][0]["message"]["content"] == "<repo_name><repo_name>"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = post(real_server.base_url, "/v1/chat/completions", {**request, "tools": tools}).json()
    assert body["choices"][0]["message"]["content"] == "<repo_name><repo_name>"  # a tool parser reads the output
    body = post(real_server.base_url, "/v1/chat/completions", request).json()
    assert body["choices"][0]["message"]["content"] == "" and body["usage"]["completion_tokens"] == 2


def test_guided_regex(real_server):
    import re

    pattern = r"[0-9]{3}-[a-z]{2,5}/ok"
    for path, body in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Give me a code"}]}),
                       ("/v1/completions", {"prompt": "Code:"})]:
        reply = post(real_server.base_url, path, {"model": MODEL, "guided_regex": pattern, "max_tokens": 20,
                                                  "temperature": 0, **body}).json()
        choice = reply["choices"][0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
        assert re.fullmatch(pattern, text), text


def test_constrained_json_comes_after_free_thinking(real_reasoning_server):
    """deepseek_r1 takes an output that opens no <think> for thinking (R1's template opens it). Under a JSON
    schema the model thinks freely first; the embedded model never closes its thinking, so at three quarters
    of the budget the end marker is written for it and the answer comes constrained: free text in the
    reasoning, JSON that obeys the schema in the content, streamed as it is whole."""
    import jsonschema

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
              "additionalProperties": False}
    request = {"model": MODEL, "messages": [{"role": "user", "content": "Name a city."}], "max_tokens": 40,
               "temperature": 0, "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}}
    body = check("chat", post(real_reasoning_server.base_url, "/v1/chat/completions", request).json())
    message = body["choices"][0]["message"]
    assert message["reasoning_content"].strip() and "</think>" not in message["reasoning_content"]
    jsonschema.validate(json.loads(message["content"]), schema)
    assert body["usage"]["completion_tokens"] <= 40
    folded = fold_chat_stream(stream(real_reasoning_server.base_url, "/v1/chat/completions", request, "chat_chunk"))
    assert (folded[0]["reasoning"], folded[0]["content"]) == (message["reasoning_content"], message["content"])
    free = post(real_reasoning_server.base_url, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "Name a city."}], "max_tokens": 8}).json()
    assert free["choices"][0]["message"]["reasoning_content"]  # unconstrained: never closed, all thinking


def test_thinking_past_its_share_is_closed_and_the_answer_still_constrained(real_reasoning_server):
    """A story is more than the thinking's share of 32 tokens (24, less the 5 of the end marker): cut there,
    closed for the model, and the answer is one of the choices; thinking, marker and answer fit the budget."""
    request = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a long story, then say yes or no."}],
               "max_tokens": 32, "temperature": 0, "guided_choice": ["yes", "no"]}
    body = check("chat", post(real_reasoning_server.base_url, "/v1/chat/completions", request).json())
    choice = body["choices"][0]
    assert choice["message"]["content"] in ("yes", "no") and choice["finish_reason"] == "stop"
    assert choice["message"]["reasoning_content"].strip()
    usage = body["usage"]
    # 19 thinking tokens and the 5 of the marker, written inside the thinking
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 24 and usage["completion_tokens"] <= 32


def test_responses_api_with_the_embedded_model(client):
    # Room to finish: the SDK's stream helper wants response.completed (not response.incomplete).
    created = client.responses.create(model=MODEL, input="Say hello.", max_output_tokens=200, temperature=0)
    assert created.status == "completed" and created.output_text
    with client.responses.stream(model=MODEL, input="Say hello.", max_output_tokens=200, temperature=0) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert final.output_text == created.output_text
    assert client.responses.retrieve(created.id).output_text == created.output_text
    assert [item.type for item in client.responses.input_items.list(created.id).data] == ["message"]
    follow_up = client.responses.create(model=MODEL, input="And again.", previous_response_id=created.id,
                                        max_output_tokens=8)
    assert follow_up.usage.input_tokens > created.usage.input_tokens  # the first turn is in the prompt
    background = client.responses.create(model=MODEL, input="Tell me a long story.", background=True,
                                         max_output_tokens=400)
    assert client.responses.cancel(background.id).status in ("cancelled", "completed", "incomplete")
    client.responses.delete(created.id)


def test_forced_call_arguments_stream_on_the_real_model(client):
    """A named call's arguments arrive in several deltas as the model writes them, and fold into
    exactly the non-streamed arguments (greedy decoding: the same tokens both times)."""
    request = dict(model=MODEL, messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
                   tools=[WEATHER_TOOL], tool_choice={"type": "function", "function": {"name": "get_weather"}},
                   max_tokens=60, temperature=0)
    whole = client.chat.completions.create(**request).choices[0].message.tool_calls[0].function.arguments
    deltas = [call.function.arguments for chunk in client.chat.completions.create(**request, stream=True)
              for choice in chunk.choices for call in choice.delta.tool_calls or () if call.function.arguments]
    assert len(deltas) > 2
    assert "".join(deltas) == whole
    assert set(json.loads(whole)) <= {"city", "unit"}


def readme_example_prompts() -> list[str]:
    """The user prompts of the README's "Use it" examples, as a newcomer copies them."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Use it", 1)[1].split("\n## ", 1)[0]
    return list(dict.fromkeys(re.findall(r'"role": "user", "content": "([^"]+)"', section)))


def test_readme_examples_get_answers_in_words(client):
    """A newcomer's first sight: the README's prompts, at the server's default sampling and a few seeds, answer in
    sentences (mostly letters, no phrase looping), not a row of emoji or "a sailor, a sailor, a sailor"."""
    prompts = readme_example_prompts()
    assert len(prompts) >= 2
    for prompt in prompts:
        for seed in (0, 1, 2):
            reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                                   max_tokens=120, seed=seed)
            text = reply.choices[0].message.content
            words = text.lower().split()
            trigrams = list(zip(words, words[1:], words[2:]))
            assert sum(ch.isalpha() for ch in text) > 0.6 * len(text) and len(words) >= 5, (prompt, seed, text)
            assert len(set(trigrams)) > 0.8 * len(trigrams), (prompt, seed, text)
