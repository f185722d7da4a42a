"""Operations: a config file equivalent to flags, request timeouts, structured request logs."""

import json
import time

import httpx
import pytest

from servers import DATA, RunningServer
from wire import check_error


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    config = tmp_path_factory.mktemp("config") / "rostra.yaml"
    config.write_text(f"engine: scripted\nscript: {DATA / 'script.jsonl'}\nserved-model-name: [configured]\n"
                      "request_timeout: 1.0\n")
    server = RunningServer(["--config", str(config)], log_level="info")
    yield server
    server.stop()


def ask(content, **extra):
    return {"model": "configured", "messages": [{"role": "user", "content": content}], **extra}


def test_config_file_settings_apply(server):
    assert [m["id"] for m in httpx.get(f"{server.base_url}/v1/models").json()["data"]] == ["configured"]


def test_request_timeout(server):
    check_error(httpx.post(f"{server.base_url}/v1/chat/completions", json=ask("slow story"), timeout=30), 504)
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json=ask("slow story", stream=True),
                      timeout=30) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    error = json.loads(lines[-2][len("data: "):])  # the in-band error, then [DONE]
    assert error["error"]["type"] == "timeout_error" and lines[-1] == "data: [DONE]"
    assert httpx.post(f"{server.base_url}/v1/chat/completions", json=ask("say hello")).status_code == 200


def test_structured_request_log(server):
    httpx.post(f"{server.base_url}/v1/chat/completions", json=ask("say hello"), headers={"x-request-id": "log-me"})
    time.sleep(0.2)
    records = [json.loads(line[line.index("{"):]) for line in server.log_path.read_text().splitlines()
               if "rostra.requests" in line and "log-me" in line]
    assert records, "no access-log line for the request"
    record = records[-1]
    assert record["route"] == "/v1/chat/completions" and record["status"] == 200
    assert record["model"] == "configured" and record["completion_tokens"] > 0 and "ttft_ms" in record
    assert "say hello" not in server.log_path.read_text()  # prompts stay out of the log by default


def generation_tokens(server) -> float:
    text = httpx.get(f"{server.base_url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('vllm:generation_tokens_total{model_name="configured"}'))


def test_abandoned_stream_logs_the_tokens_it_generated(server):
    """Issue 42: a client that hangs up mid-stream is logged with what was generated, not 0; and counted so in
    the metrics (vllm:generation_tokens, which counted finished choices' tokens only)."""
    before = generation_tokens(server)
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json=ask("slow story", stream=True),
                      headers={"x-request-id": "abandon-me"}, timeout=30) as response:
        contents = 0
        for line in response.iter_lines():
            contents += '"content"' in line and '"content":""' not in line
            if contents >= 3:
                break  # hang up: well before the 1 s request timeout
    deadline = time.monotonic() + 5
    records: list = []
    while not records and time.monotonic() < deadline:
        time.sleep(0.1)
        records = [json.loads(line[line.index("{"):]) for line in server.log_path.read_text().splitlines()
                   if "rostra.requests" in line and "abandon-me" in line]
    assert records, "no access-log line for the abandoned request"
    assert records[-1]["completion_tokens"] >= 3
    assert records[-1]["total_tokens"] == records[-1]["prompt_tokens"] + records[-1]["completion_tokens"]
    assert generation_tokens(server) - before == records[-1]["completion_tokens"]
