"""Admission limits, body size, auth on every route, CORS, /tokenize and /detokenize."""

import threading
import time

import httpx
import pytest

from servers import DATA, RunningServer
from wire import check_error

KEY = "limits-key"
AUTH = {"authorization": f"Bearer {KEY}"}
MODEL = "scripted"


@pytest.fixture(scope="module")
def server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "script.jsonl"), "--api-key", KEY,
                            "--admin-key", "admin-key",
                            "--max-concurrency", "1", "--max-queue", "0", "--max-body-bytes", "100000",
                            "--allowed-origins", "http://app.example"])
    yield server
    server.stop()


def chat(base, content, **kwargs):
    return httpx.post(f"{base}/v1/chat/completions", headers=AUTH, timeout=30,
                      json={"model": MODEL, "messages": [{"role": "user", "content": content}]}, **kwargs)


def test_over_capacity_is_429_with_retry_after(server):
    holding = threading.Thread(target=chat, args=(server.base_url, "slow story"))
    holding.start()
    time.sleep(0.5)  # the slow story holds the only slot for ~3 s
    refused = chat(server.base_url, "say hello")
    check_error(refused, 429)
    assert refused.headers["retry-after"] == "1"
    holding.join()
    assert chat(server.base_url, "say hello").status_code == 200  # the slot is free again


def test_body_too_large_is_413(server):
    huge = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 200_000}]}
    check_error(httpx.post(f"{server.base_url}/v1/chat/completions", json=huge, headers=AUTH), 413)

    def chunks():  # no content-length: counted as it arrives
        yield b'{"model": "scripted", "messages": [{"role": "user", "content": "'
        for _ in range(30):
            yield b"y" * 10_000
        yield b'"}]}'

    check_error(httpx.post(f"{server.base_url}/v1/chat/completions", content=chunks(),
                           headers={**AUTH, "content-type": "application/json"}), 413)
    assert chat(server.base_url, "say hello").status_code == 200


def test_body_too_large_on_messages_is_413_in_anthropics_envelope(server):
    huge = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x" * 200_000}]}

    def chunks():  # no content-length: refused where the route reads its body
        yield b'{"model": "scripted", "max_tokens": 8, "messages": [{"role": "user", "content": "'
        yield b"y" * 200_000
        yield b'"}]}'

    for sent in ({"json": huge}, {"content": chunks(), "headers": {**AUTH, "content-type": "application/json"}}):
        reply = httpx.post(f"{server.base_url}/v1/messages", **{"headers": AUTH, **sent})
        assert reply.status_code == 413
        body = reply.json()
        assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
        assert "larger than 100000 bytes" in body["error"]["message"]


@pytest.mark.parametrize("method,path", [("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                                         ("POST", "/v1/completions"), ("POST", "/v1/responses"),
                                         ("GET", "/v1/responses/resp_x"), ("POST", "/tokenize"),
                                         ("POST", "/detokenize")])
def test_every_route_but_the_public_ones_needs_the_key(server, method, path):
    check_error(httpx.request(method, f"{server.base_url}{path}", json={}), 401)


def test_public_routes(server):
    assert httpx.get(f"{server.base_url}/health").status_code == 200
    assert httpx.get(f"{server.base_url}/version").status_code == 200


def test_cors(server):
    preflight = httpx.options(f"{server.base_url}/v1/chat/completions", headers={
        "origin": "http://app.example", "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://app.example"
    other = httpx.options(f"{server.base_url}/v1/chat/completions", headers={
        "origin": "http://evil.example", "access-control-request-method": "POST"})
    assert other.headers.get("access-control-allow-origin") != "http://evil.example"


def test_tokenize_detokenize(server):
    tokens = httpx.post(f"{server.base_url}/tokenize", headers=AUTH,
                        json={"model": MODEL, "prompt": "Hello there"}).json()
    assert tokens["count"] == len(tokens["tokens"]) > 0 and tokens["max_model_len"] > 0
    text = httpx.post(f"{server.base_url}/detokenize", headers=AUTH, json={"model": MODEL, "tokens": tokens["tokens"]})
    assert text.json() == {"prompt": "Hello there"}
    chat_tokens = httpx.post(f"{server.base_url}/tokenize", headers=AUTH, json={
        "model": MODEL, "messages": [{"role": "user", "content": "Hello there"}]}).json()
    assert chat_tokens["count"] > tokens["count"]  # the chat template's markup
    check_error(httpx.post(f"{server.base_url}/detokenize", headers=AUTH, json={"tokens": [10**9]}), 400, "tokens")
    check_error(httpx.post(f"{server.base_url}/tokenize", headers=AUTH, json={"model": "nope", "prompt": "x"}), 404)


def test_metrics(server):
    check_error(httpx.get(f"{server.base_url}/metrics"), 401)  # not public unless --public-metrics
    assert chat(server.base_url, "count to ten").status_code == 200
    text = httpx.get(f"{server.base_url}/metrics", headers=AUTH).text

    def value(line_start: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))

    assert value('vllm:prompt_tokens_total{model_name="scripted"}') > 0
    assert value('vllm:generation_tokens_total{model_name="scripted"}') >= 10
    assert value('vllm:time_to_first_token_seconds_count{model_name="scripted"}') >= 1
    assert value('vllm:e2e_request_latency_seconds_count{model_name="scripted"}') >= 1
    assert value('vllm:request_success_total{finished_reason="stop",model_name="scripted"}') >= 1
    assert value('rostra_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}') >= 1
    assert value('rostra_http_requests_total{method="POST",route="/v1/chat/completions",status="429"}') >= 1
    assert 'vllm:num_requests_running{model_name="scripted"}' in text
    assert 'rostra_engine_running_generations{model_name="scripted"} 0.0' in text


def test_admin_routes_need_the_admin_key(server, scripted_server):
    check_error(httpx.delete(f"{server.base_url}/admin/responses?older_than_days=0", headers=AUTH), 401)
    created = httpx.post(f"{server.base_url}/v1/responses", headers=AUTH,
                         json={"model": MODEL, "input": "say hello"}).json()
    time.sleep(1.1)  # created_at has one-second resolution
    purged = httpx.delete(f"{server.base_url}/admin/responses?older_than_days=0",
                          headers={"authorization": "Bearer admin-key"})
    assert purged.status_code == 200 and purged.json()["deleted"] >= 1
    check_error(httpx.get(f"{server.base_url}/v1/responses/{created['id']}", headers=AUTH), 404)
    # A server without an admin key has no admin routes at all.
    check_error(httpx.delete(f"{scripted_server.base_url}/admin/responses?older_than_days=0"), 401)
