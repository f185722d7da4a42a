"""rostra as a gateway: real upstreams (`rostra serve` scripted processes on loopback) behind
`rostra serve --engine remote`, driven over HTTP with the openai SDK and raw checks."""

import json
import time

import httpx
import pytest
from openai import OpenAI

from conftest import scripted
from rostra.embedded import embedded_model_path
from servers import RunningServer
from test_api_responses import TOOLS as RESPONSE_TOOLS
from test_api_responses import check_response, raw_stream
from test_api_tools import TOOLS, fold_tool_calls
from wire import check, check_error, fold_chat_stream, post, stream

UPSTREAM_KEY = "upstream-secret-7f3a"


def gateway(*upstreams: str, flags: tuple[str, ...] = (), env: dict | None = None) -> RunningServer:
    args = ["--engine", "remote", "--health-check-interval", "0.5", *flags]
    for upstream in upstreams:
        args += ["--upstream", upstream]
    return RunningServer(args, env=env, log_level="info")


@pytest.fixture(scope="module")
def tools_upstream():
    server = RunningServer(list(scripted("tools.jsonl", "--tool-call-parser", "hermes", "--served-model-name",
                                         "alpha", "--api-key", UPSTREAM_KEY)))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def reasoning_upstream():
    server = RunningServer(list(scripted("reasoning.jsonl", "--reasoning-parser", "qwen3", "--tool-call-parser",
                                         "hermes", "--served-model-name", "beta")))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def two_model_gateway(tools_upstream, reasoning_upstream):
    """Two upstreams, one model each; the first needs a key, given through the environment."""
    server = gateway(f"{tools_upstream.v1},api_key_env=ALPHA_KEY", reasoning_upstream.v1,
                     env={"ALPHA_KEY": UPSTREAM_KEY})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def raw_gateway(tools_upstream):
    """The tools upstream asked for raw completions; rostra parses the hermes markup itself."""
    server = gateway(f"{tools_upstream.v1},mode=raw", flags=("--tokenizer", str(embedded_model_path()),
                                                             "--tool-call-parser", "hermes"),
                     env={"ROSTRA_UPSTREAM_API_KEY": UPSTREAM_KEY})
    yield server
    server.stop()


def client(server) -> OpenAI:
    return OpenAI(base_url=server.v1, api_key="unused", max_retries=0)


def ask(model, content, **extra):
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def test_models_are_the_union_and_requests_are_routed_by_name(two_model_gateway):
    models = client(two_model_gateway).models.list()
    assert sorted(model.id for model in models.data) == ["alpha", "beta"]
    alpha = check("chat", post(two_model_gateway.base_url, "/v1/chat/completions",
                               ask("alpha", "weather in Oslo", tools=TOOLS)).json())
    assert alpha["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    beta = check("chat", post(two_model_gateway.base_url, "/v1/chat/completions",
                              ask("beta", "think then answer")).json())
    assert beta["choices"][0]["message"]["content"] == "2 + 2 = 4."
    assert beta["choices"][0]["message"]["reasoning_content"] == "\nI should add two and two.\n"
    missing = post(two_model_gateway.base_url, "/v1/chat/completions", ask("gamma", "hi"))
    assert check_error(missing, 404, "model")["code"] == "model_not_found"


def test_passthrough_stream_and_non_stream_agree(two_model_gateway):
    body = ask("alpha", "two cities", tools=TOOLS, stream_options={"include_usage": True})
    chunks = stream(two_model_gateway.base_url, "/v1/chat/completions", body, "chat_chunk")
    whole = check("chat", post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "two cities",
                                                                                      tools=TOOLS)).json())
    streamed_calls = fold_tool_calls(chunks)
    calls = whole["choices"][0]["message"]["tool_calls"]
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed_calls] == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Oslo", "days": 2}), ("get_weather", {"city": 'Zürich "Nord"'})]
    assert fold_chat_stream(chunks)[0]["finish_reason"] == whole["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == {key: whole["usage"][key] for key in chunks[-1]["usage"]}
    assert whole["usage"]["prompt_tokens"] > 0 and whole["usage"]["completion_tokens"] > 0


def test_sdk_streams_reasoning_through_the_gateway(two_model_gateway):
    pieces = {"reasoning": "", "content": ""}
    with client(two_model_gateway).chat.completions.create(
            model="beta", messages=[{"role": "user", "content": "think then answer"}], stream=True) as response:
        for chunk in response:
            delta = chunk.choices[0].delta if chunk.choices else None
            if delta is not None:
                pieces["reasoning"] += getattr(delta, "reasoning_content", None) or ""
                pieces["content"] += delta.content or ""
    assert pieces == {"reasoning": "\nI should add two and two.\n", "content": "2 + 2 = 4."}


def test_completions_pass_through_with_logprobs(two_model_gateway):
    body = {"model": "alpha", "prompt": "weather in Oslo", "logprobs": 1, "max_tokens": 50}
    whole = check("completion", post(two_model_gateway.base_url, "/v1/completions", body).json())
    chunks = stream(two_model_gateway.base_url, "/v1/completions", body, "completion_chunk")
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == whole["choices"][0]["text"]
    assert whole["choices"][0]["text"].startswith("Let me check.<tool_call>")
    logprobs = whole["choices"][0]["logprobs"]
    assert "".join(logprobs["tokens"]) == whole["choices"][0]["text"]
    assert len(logprobs["tokens"]) == whole["usage"]["completion_tokens"]


def test_vllm_extensions_go_upstream_and_answer_fields_are_refused(two_model_gateway, tools_upstream):
    body = {"model": "alpha", "prompt": "weather in Oslo", "max_tokens": 50, "stop": ["check"]}
    cut = post(two_model_gateway.base_url, "/v1/completions", {**body, "include_stop_str_in_output": True}).json()
    assert cut["choices"][0]["text"] == "Let me check"  # the upstream honoured it
    assert post(two_model_gateway.base_url, "/v1/completions", body).json()["choices"][0]["text"] == "Let me "
    check_error(post(two_model_gateway.base_url, "/v1/completions", {**body, "return_token_ids": True}), 400,
                "return_token_ids")
    # prompt_logprobs: the upstream's, as it sent them (this upstream is rostra's scripted engine).
    scored = post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "hi", prompt_logprobs=1))
    direct = post(tools_upstream.base_url, "/v1/chat/completions", ask("alpha", "hi", prompt_logprobs=1),
                  headers={"Authorization": f"Bearer {UPSTREAM_KEY}"})
    assert scored.status_code == direct.status_code == 200, (scored.text, direct.text)
    assert scored.json()["prompt_logprobs"] == direct.json()["prompt_logprobs"] and direct.json()["prompt_logprobs"]
    check_error(post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "hi", max_token=3)),
                400, "max_token")


def test_upstream_errors_are_relayed_in_the_envelope(two_model_gateway):
    # The gateway does not know alpha's context length; the upstream refuses, and says why.
    too_long = post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "hi " * 20000))
    assert check_error(too_long, 400, "messages")["code"] == "context_length_exceeded"
    streamed = httpx.post(f"{two_model_gateway.v1}/chat/completions", timeout=30,
                          json=ask("alpha", "hi " * 20000, stream=True))
    check_error(streamed, 400, "messages")  # a status, not an in-band error: the stream never began
    # A budget beyond the context is the upstream's to fit: the gateway passes its `length` through.
    fitted = post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "hi", max_tokens=10**6))
    assert fitted.status_code == 200 and fitted.json()["choices"][0]["message"]["content"]
    assert client(two_model_gateway).chat.completions.create(
        model="alpha", messages=[{"role": "user", "content": "still serving?"}]).choices[0].message.content


def test_upstream_key_from_the_environment_is_never_logged(two_model_gateway, tools_upstream):
    assert post(tools_upstream.base_url, "/v1/chat/completions", ask("alpha", "hi")).status_code == 401
    assert post(two_model_gateway.base_url, "/v1/chat/completions", ask("alpha", "hi")).status_code == 200
    health = httpx.get(f"{two_model_gateway.base_url}/health").text
    assert UPSTREAM_KEY not in health and UPSTREAM_KEY not in two_model_gateway.log_path.read_text()


def test_a_wrong_upstream_key_is_a_bad_gateway_not_the_clients_401(tools_upstream):
    server = gateway(f"{tools_upstream.v1},model=alpha", env={"ROSTRA_UPSTREAM_API_KEY": "wrong"})
    try:
        error = check_error(post(server.base_url, "/v1/chat/completions", ask("alpha", "hi")), 502)
        assert "credentials" in error["message"] and "wrong" not in error["message"]
    finally:
        server.stop()


def test_responses_api_in_front_of_a_chat_only_upstream(two_model_gateway):
    sdk = client(two_model_gateway)
    first = sdk.responses.create(model="alpha", input="two cities", tools=RESPONSE_TOOLS)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Oslo", 'Zürich "Nord"']
    check_response(httpx.get(f"{two_model_gateway.v1}/responses/{first.id}").json())
    second = sdk.responses.create(model="alpha", previous_response_id=first.id, tools=RESPONSE_TOOLS, input=[
        {"type": "function_call_output", "call_id": c.call_id, "output": '{"sky": "sunny"}'} for c in calls])
    assert second.output_text == "It is sunny in Oslo."
    events = raw_stream(two_model_gateway.base_url, {"model": "beta", "input": "think then answer"})
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message"]
    assert final["output"][1]["content"][0]["text"] == "2 + 2 = 4."


def test_counting_a_relayed_models_prompt_starts_no_upstream_generation(two_model_gateway, tools_upstream):
    """The gateway has no tokenizer for an upstream's model: a count is refused (501), and never asked of the
    upstream as a generation (a Responses count once prepared, and so opened, a relayed generation)."""
    served = _requests_served(tools_upstream)
    responses = post(two_model_gateway.base_url, "/v1/responses/input_tokens", {"model": "alpha", "input": "Hi"})
    messages = post(two_model_gateway.base_url, "/v1/messages/count_tokens",
                    {"model": "alpha", "messages": [{"role": "user", "content": "Hi"}]})
    assert responses.status_code == 501 and responses.json()["error"]["code"] == "count_not_supported"
    assert messages.status_code == 501 and messages.json()["type"] == "error"
    assert _requests_served(tools_upstream) == served


def test_raw_mode_parses_tool_calls_with_rostras_own_parser(raw_gateway):
    whole = check("chat", post(raw_gateway.base_url, "/v1/chat/completions",
                               ask("alpha", "weather in Oslo", tools=TOOLS)).json())
    message = whole["choices"][0]["message"]
    assert message["content"] == "Let me check."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]] == [
        ("get_weather", {"city": "Oslo"})]
    chunks = stream(raw_gateway.base_url, "/v1/chat/completions",
                    ask("alpha", "weather in Oslo", tools=TOOLS, stream_options={"include_usage": True}), "chat_chunk")
    assert [(c["name"], json.loads(c["arguments"])) for c in fold_tool_calls(chunks)] == [
        ("get_weather", {"city": "Oslo"})]
    # Usage is the upstream's count of the tokens it generated, and the prompt rostra rendered.
    assert chunks[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"] > 5
    assert chunks[-1]["usage"]["prompt_tokens"] == whole["usage"]["prompt_tokens"] > 5


def test_raw_mode_holds_back_stop_strings_and_stops_the_upstream(raw_gateway):
    whole = post(raw_gateway.base_url, "/v1/chat/completions", ask("alpha", "weather in Oslo", stop=["<tool_call>"]))
    assert check("chat", whole.json())["choices"][0]["message"]["content"] == "Let me check."


def test_load_balancing_retries_and_ejection_of_a_dead_upstream():
    first, second = (RunningServer(list(scripted("script.jsonl"))) for _ in range(2))
    server = gateway(first.v1, second.v1)
    try:
        sdk = client(server)
        for _ in range(6):
            assert sdk.chat.completions.create(model="scripted", messages=[
                {"role": "user", "content": "say hello"}]).choices[0].message.content == "Hello! How can I help you today?"
        served = [_requests_served(upstream) for upstream in (first, second)]
        assert all(count >= 2 for count in served), served  # both took a share
        first.kill()
        for _ in range(6):  # connection refused: retried on the live upstream, the client never sees it
            assert sdk.chat.completions.create(model="scripted", messages=[
                {"role": "user", "content": "say hello"}]).choices[0].message.content
        states = {state["url"]: state for state in httpx.get(f"{server.base_url}/health").json()["upstreams"]}
        assert states[first.v1]["healthy"] is False and states[second.v1]["healthy"] is True
        # Back on the same port: the next health check brings it back into rotation.
        revived = RunningServer(list(scripted("script.jsonl")), port=first.port)
        try:
            deadline = time.monotonic() + 10
            while not _healthy(server, first.v1) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert _healthy(server, first.v1)
        finally:
            revived.stop()
    finally:
        for process in (server, first, second):
            process.stop()


def test_every_upstream_down_is_a_503_and_the_gateway_keeps_serving():
    upstream = RunningServer(list(scripted("script.jsonl")))
    server = gateway(upstream.v1)
    try:
        upstream.kill()
        check_error(post(server.base_url, "/v1/chat/completions", ask("scripted", "say hello")), 503)
        assert httpx.get(f"{server.base_url}/health").status_code == 200
    finally:
        server.stop()
        upstream.stop()


def test_client_disconnect_aborts_the_upstream_generation(tools_upstream):
    slow = RunningServer(list(scripted("script.jsonl")))
    server = gateway(slow.v1)
    try:
        with httpx.stream("POST", f"{server.v1}/chat/completions", timeout=30,
                          json=ask("scripted", "slow story", stream=True)) as response:
            lines = response.iter_lines()
            while "slow" not in next(lines):
                pass
            assert httpx.get(f"{slow.base_url}/health").json()["running"] == 1
        deadline = time.monotonic() + 5
        while httpx.get(f"{slow.base_url}/health").json()["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx.get(f"{slow.base_url}/health").json()["running"] == 0
    finally:
        server.stop()
        slow.stop()


def _requests_served(upstream: RunningServer) -> int:
    metrics = httpx.get(f"{upstream.base_url}/metrics").text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("vllm:request_success_total")))


def _healthy(server: RunningServer, url: str) -> bool:
    states = httpx.get(f"{server.base_url}/health").json()["upstreams"]
    return any(state["url"] == url and state["healthy"] for state in states)


def test_raw_mode_sends_vllms_sampling_extensions_upstream():
    from rostra.core import Prompt, SamplingParams
    from rostra.engines.remote.engine import completion_body

    body = completion_body(Prompt([1, 2], model="alpha"), SamplingParams(
        max_tokens=9, min_tokens=3, stop_token_ids=(7,), bad_words=("drat",), bad_words_ids=((5,),),
        allowed_token_ids=(1, 2, 3)))
    assert (body["min_tokens"], body["stop_token_ids"], body["bad_words"], body["allowed_token_ids"]) == \
        (3, [7], ["drat"], [1, 2, 3])
    plain = completion_body(Prompt([1, 2], model="alpha"), SamplingParams(max_tokens=9, stop_token_ids=(7,)))
    assert not {"min_tokens", "bad_words", "allowed_token_ids"} & set(plain)
    assert plain["stop_token_ids"] == [7]  # the upstream's text pieces carry no ids: it matches them itself
