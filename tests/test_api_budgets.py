"""Output budgets that fit: a max_tokens longer than the room the prompt leaves generates to the end of the
context and ends `length` (Responses `incomplete`, Messages `model_context_window_exceeded`); the prompt alone too
long stays a 400; `--output-budget strict` restores OpenAI's 400. Over HTTP, with the openai and anthropic SDKs."""

import json

import anthropic
import httpx
import pytest
from openai import OpenAI

from servers import RunningServer
from wire import check, check_error, fold_chat_stream, post, stream

MODEL = "scripted"
CONTEXT = 256
LONG = " ".join(f"word{number}" for number in range(400))  # far more tokens than the context holds


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("budgets") / "script.jsonl"
    path.write_text(json.dumps({"match": "go on", "output": LONG}) + "\n")
    return path


def serve(script, *flags):
    return RunningServer(["--engine", "scripted", "--script", str(script), "--served-model-name", MODEL,
                          "--max-model-len", str(CONTEXT), *flags], log_level="info")


@pytest.fixture(scope="module")
def fitting(script):
    server = serve(script)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def strict(script):
    server = serve(script, "--output-budget", "strict")
    yield server
    server.stop()


ASK = [{"role": "user", "content": "go on"}]


def openai_client(server) -> OpenAI:
    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)


def test_chat_budget_beyond_the_context_generates_to_its_end(fitting):
    completion = openai_client(fitting).chat.completions.create(model=MODEL, messages=ASK, max_tokens=32000)
    usage = completion.usage
    assert completion.choices[0].finish_reason == "length"
    assert usage.prompt_tokens + usage.completion_tokens == CONTEXT  # every token the context had room for
    assert usage.model_extra["output_budget"] == {"requested": 32000, "granted": CONTEXT - usage.prompt_tokens}
    assert completion.choices[0].message.content and completion.choices[0].message.content in LONG
    chunks = stream(fitting.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": ASK, "max_completion_tokens": 16384,
                     "stream_options": {"include_usage": True}}, "chat_chunk")
    folded = fold_chat_stream(chunks)[0]
    assert folded["finish_reason"] == "length" and folded["content"] == completion.choices[0].message.content
    assert chunks[-1]["usage"]["output_budget"] == {"requested": 16384, "granted": CONTEXT - usage.prompt_tokens}
    assert "max_completion_tokens 16384 asked" in fitting.log_path.read_text()  # the operator sees the cut


def test_a_budget_that_fits_is_kept_and_not_reported(fitting):
    completion = check("chat", post(fitting.base_url, "/v1/chat/completions",
                                    {"model": MODEL, "messages": ASK, "max_tokens": 5}).json())
    assert completion["usage"]["completion_tokens"] == 5 and "output_budget" not in completion["usage"]


def test_completions_budget_beyond_the_context(fitting):
    completion = openai_client(fitting).completions.create(model=MODEL, prompt="go on", max_tokens=32000)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens == CONTEXT


def test_responses_budget_beyond_the_context_is_incomplete(fitting):
    response = openai_client(fitting).responses.create(model=MODEL, input="go on", max_output_tokens=32000,
                                                       store=False)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.input_tokens + response.usage.output_tokens == CONTEXT
    assert response.usage.model_extra["output_budget"]["requested"] == 32000


def test_messages_budget_beyond_the_context(fitting, strict):
    for server in (fitting, strict):  # Anthropic's newer models fit it too: Messages always does
        client = anthropic.Anthropic(base_url=server.base_url, api_key="unused", max_retries=0)
        with client.messages.stream(model=MODEL, max_tokens=32000, messages=ASK) as streamed:  # (SDK: 32000 streams)
            message = streamed.get_final_message()
        assert message.stop_reason == "model_context_window_exceeded"
        assert message.usage.input_tokens + message.usage.output_tokens == CONTEXT


def test_a_prompt_alone_too_long_stays_a_400(fitting):
    too_long = [{"role": "user", "content": LONG}]
    error = check_error(post(fitting.base_url, "/v1/chat/completions",
                             {"model": MODEL, "messages": too_long, "max_tokens": 32000}), 400, "messages")
    assert error["code"] == "context_length_exceeded"
    error = check_error(post(fitting.base_url, "/v1/completions",
                             {"model": MODEL, "prompt": LONG, "max_tokens": 10}), 400, "prompt")
    assert error["code"] == "context_length_exceeded"
    assert httpx.get(f"{fitting.base_url}/health").json()["status"] == "ok"


def test_strict_refuses_as_openai_does(strict):
    error = check_error(post(strict.base_url, "/v1/chat/completions",
                             {"model": MODEL, "messages": ASK, "max_tokens": 32000}), 400, "max_tokens")
    assert error["code"] == "context_length_exceeded"
    check_error(post(strict.base_url, "/v1/chat/completions",
                     {"model": MODEL, "messages": ASK, "max_completion_tokens": 32000}), 400, "max_completion_tokens")
    check_error(post(strict.base_url, "/v1/completions", {"model": MODEL, "prompt": "go on", "max_tokens": 32000}),
                400, "max_tokens")
    error = check_error(post(strict.base_url, "/v1/responses",
                             {"model": MODEL, "input": "go on", "max_output_tokens": 32000}), 400, "max_output_tokens")
    assert error["code"] == "context_length_exceeded"
    fits = post(strict.base_url, "/v1/chat/completions", {"model": MODEL, "messages": ASK, "max_tokens": 8})
    assert fits.json()["choices"][0]["finish_reason"] == "length"


def test_400s_name_the_parameter_as_the_client_spelled_it(fitting):
    def responses(**fields):
        return post(fitting.base_url, "/v1/responses", {"model": MODEL, "input": "go on", **fields})

    check_error(responses(max_output_tokens=2**40), 400, "max_output_tokens")
    bad_schema = {"format": {"type": "json_schema", "name": "x", "schema": {"type": "bogus"}}}
    assert check_error(responses(text=bad_schema), 400)["param"].startswith("text.format")
    bad_tool = [{"type": "function", "name": "f", "parameters": {"type": 12}}]
    assert check_error(responses(tools=bad_tool), 400)["param"].startswith("tools[0].parameters")
    error = check_error(responses(input=LONG), 400, "input")
    assert error["code"] == "context_length_exceeded"
    messages = post(fitting.base_url, "/v1/messages", {"model": MODEL, "max_tokens": 10, "messages": [
        {"role": "user", "content": "go on"}], "tools": [{"name": "f", "input_schema": {"type": 12}}]})
    assert messages.status_code == 400 and messages.json()["error"]["message"].startswith("tools[0].input_schema")
