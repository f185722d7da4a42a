"""Bad input: always a 4xx in the OpenAI envelope, naming the parameter; the server keeps serving."""

import httpx
import pytest

from conftest import API_KEY
from wire import check, check_error, post

MODEL = "scripted"
USER = [{"role": "user", "content": "say hello"}]

BAD_CHAT = [
    ({"model": "no-such-model", "messages": USER}, 404, "model"),
    ({"model": MODEL}, 400, "messages"),
    ({"model": MODEL, "messages": []}, 400, "messages"),
    ({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ({"model": MODEL, "messages": USER, "temperature": "hot"}, 400, "temperature"),
    ({"model": MODEL, "messages": USER, "temperature": 3}, 400, "temperature"),
    ({"model": MODEL, "messages": USER, "n": 0}, 400, "n"),
    ({"model": MODEL, "messages": USER, "n": 100000}, 400, "n"),
    ({"model": MODEL, "messages": USER, "max_tokens": 0}, 400, "max_tokens"),
    ({"model": MODEL, "messages": USER, "max_tokens": 2**31}, 400, "max_tokens"),  # (beyond the context: fit)
    ({"model": MODEL, "messages": USER, "top_logprobs": 50, "logprobs": True}, 400, "top_logprobs"),
    ({"model": MODEL, "messages": USER, "top_logprobs": 2}, 400, "top_logprobs"),
    ({"model": MODEL, "messages": USER, "stop": [""]}, 400, "stop"),
    ({"model": MODEL, "messages": USER, "stop": ["x"] * 100}, 400, "stop"),
    ({"model": MODEL, "messages": USER, "logit_bias": {"abc": 1}}, 400, "logit_bias"),
    ({"model": MODEL, "messages": USER, "logit_bias": {"99999999": 1}}, 400, "logit_bias"),
    ({"model": MODEL, "messages": USER, "stop_token_ids": [-1]}, 400, "stop_token_ids"),
    ({"model": MODEL, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     400, "messages[0].content[0]"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "x " * 5000}]}, 400, "messages"),
    ({"model": MODEL, "messages": USER, "continue_final_message": True}, 400, "continue_final_message"),
    ({"model": MODEL, "messages": USER, "response_format": {"type": "json_schema",
                                                            "json_schema": {"name": "x", "schema": {"type": "bogus"}}}},
     400, "response_format.json_schema.schema"),
    ({"model": MODEL, "messages": USER, "response_format": {"type": "xml"}}, 400, "response_format.type"),
    ({"model": MODEL, "messages": USER, "guided_choice": []}, 400, "guided_choice"),
    ({"model": MODEL, "messages": USER, "guided_regex": "[unclosed"}, 400, "guided_regex"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": 12}}}]}, 400, "tools[0].function.parameters"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "retrieval"}]}, 400, "tools[0].type"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {"parameters": {}}}]},
     400, "tools[0].function.name"),
    ({"model": MODEL, "messages": USER, "tool_choice": "required"}, 400, "tool_choice"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, 400, "tool_choice.function.name"),
    ({"model": MODEL, "messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": "sometimes"}, 400, "tool_choice"),
    ({"model": MODEL, "messages": USER, "stream": "yes"}, 400, "stream"),
]


@pytest.mark.parametrize("body,status,param", BAD_CHAT)
def test_bad_chat_requests(scripted_server, body, status, param):
    check_error(post(scripted_server.base_url, "/v1/chat/completions", body), status, param)
    # ... and the server still answers the next request.
    ok = post(scripted_server.base_url, "/v1/chat/completions", {"model": MODEL, "messages": USER})
    assert ok.status_code == 200


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[]", b"null", b"\xff\xfe\xfd", '{"model": "\ud800"}'.encode("utf-8", "surrogatepass")])
def test_malformed_bodies(scripted_server, raw):
    check_error(post(scripted_server.base_url, "/v1/chat/completions", raw), 400)
    check_error(post(scripted_server.base_url, "/v1/completions", raw), 400)


BAD_COMPLETIONS = [
    ({"model": MODEL}, 400, "prompt"),
    ({"model": MODEL, "prompt": ""}, 400, "prompt"),
    ({"model": MODEL, "prompt": []}, 400, "prompt"),
    ({"model": MODEL, "prompt": [10**9]}, 400, "prompt"),
    ({"model": MODEL, "prompt": "x", "suffix": "y"}, 400, "suffix"),
    ({"model": MODEL, "prompt": "x", "logprobs": 6}, 400, "logprobs"),
    ({"model": MODEL, "prompt": "x", "best_of": 3}, 400, "best_of"),
    ({"model": MODEL, "prompt": "x " * 5000}, 400, "prompt"),
    ({"model": "gpt-nope", "prompt": "x"}, 404, "model"),
]


@pytest.mark.parametrize("body,status,param", BAD_COMPLETIONS)
def test_bad_completion_requests(scripted_server, body, status, param):
    check_error(post(scripted_server.base_url, "/v1/completions", body), status, param)


def test_unknown_route_and_method(scripted_server):
    check_error(httpx.get(f"{scripted_server.base_url}/v1/nothing"), 404)
    check_error(httpx.get(f"{scripted_server.base_url}/v1/chat/completions"), 405)
    check_error(httpx.get(f"{scripted_server.base_url}/v1/models/nope"), 404, "model")


def test_api_key_required_on_v1(auth_server):
    base = auth_server.base_url
    body = {"model": MODEL, "messages": USER}
    check_error(post(base, "/v1/chat/completions", body), 401)
    check_error(post(base, "/v1/chat/completions", body, headers={"authorization": "Bearer wrong"}), 401)
    check_error(httpx.get(f"{base}/v1/models"), 401)
    ok = post(base, "/v1/chat/completions", body, headers={"authorization": f"Bearer {API_KEY}"})
    check("chat", ok.json())
    assert httpx.get(f"{base}/health").status_code == 200  # health stays public
