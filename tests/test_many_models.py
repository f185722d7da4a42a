"""Many models in one server (rostra/models/): `--models-dir DIR --models-config FILE`, the app in-process
(tests/harness.py) driven by the openai SDK; the gateway-among-models test runs a real `rostra serve`. The embedded SmolLM2 GGUF is served three ways (from the directory, and under
two configurations of the config file: another template, other defaults), next to the MiniLM embedding checkpoint
and a broken GGUF. The memory budget holds one model at a time, so every switch evicts; `smol-b` has a short TTL.

The tests share the server and leave it in no particular state: each brings the models it needs where it
needs them (a request, or the admin routes) and checks what follows.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
from openai import NotFoundError, OpenAI

from rostra.embedded import embedded_model_path
from harness import BASE_URL, served
from rostra.models.specs import estimated_size
from servers import DATA, RunningServer
from spec import validate

API_KEY, ADMIN_KEY = "many-models-key", "many-models-admin"
API = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TTL = 3.0
# Not SmolLM2's own template: no default system prompt, so the same messages are fewer tokens.
PLAIN_CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, minilm_checkpoint) -> Path:
    directory = tmp_path_factory.mktemp("models")
    (directory / "smol.gguf").symlink_to(embedded_model_path())
    (directory / "minilm").symlink_to(minilm_checkpoint, target_is_directory=True)
    (directory / "broken.gguf").write_bytes(b"this is not a GGUF file\n" * 64)
    return directory


@pytest.fixture(scope="module")
def server(models_dir, tmp_path_factory):
    config = tmp_path_factory.mktemp("config") / "models.yaml"
    config.write_text(f"""
models:
  - name: smol-a
    model: {embedded_model_path()}
    parallel: 2
    max_model_len: 1024
    override_generation_config: {{temperature: 0, max_tokens: 6}}
  - name: smol-b
    served_model_name: [smol-b, smol-b-alias]
    model: {embedded_model_path()}
    parallel: 2
    max_model_len: 1024
    chat_template: {PLAIN_CHATML!r}
    override_generation_config: {{temperature: 0, max_tokens: 4}}
    ttl: {TTL}
""")
    budget = estimated_size(str(embedded_model_path()), "llamacpp") * 3 // 2  # one model at a time
    with served(tmp_path_factory.mktemp("many-models"), [], models_dir=str(models_dir), models_config=str(config),
                memory_budget=budget, preload=["smol-a"], api_keys=[API_KEY], admin_keys=[ADMIN_KEY],
                threads=1) as http:
        yield http


@pytest.fixture(scope="module")
def client(server) -> OpenAI:
    return OpenAI(base_url=f"{BASE_URL}/v1", api_key=API_KEY, max_retries=0, http_client=server)


def states(server) -> dict[str, str]:
    listed = server.get("/v1/models", headers=API).json()
    validate("ListModelsResponse", listed)
    return {card["id"]: card["state"] for card in listed["data"]}


def admin(server, action: str, model: str, key: str = ADMIN_KEY) -> httpx.Response:
    return server.post(f"/admin/models/{action}", json={"model": model}, headers={"Authorization": f"Bearer {key}"})


def loads(server, model: str) -> float:
    text = server.get("/metrics", headers=API).text
    found = re.search(rf'^rostra_model_load_seconds_count{{model_name="{re.escape(model)}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def ask(client: OpenAI, model: str, text: str = "Say hi.", **fields):
    """A short answer: smol-a and smol-b have a default max_tokens; the others get one here."""
    if model not in ("smol-a", "smol-b", "smol-b-alias"):
        fields.setdefault("max_tokens", 6)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **fields)


def test_every_model_is_listed_with_its_state_and_defaults(server):
    listed = server.get("/v1/models", headers=API).json()
    cards = {card["id"]: card for card in listed["data"]}
    assert {"smol-a", "smol-b", "smol-b-alias", "smol", "minilm", "broken"} <= set(cards)
    assert cards["smol-a"]["state"] in ("loaded", "unloaded")  # preloaded, unless evicted by an earlier test
    assert cards["smol-b"]["generation_defaults"] == {"temperature": 0, "max_tokens": 4}
    assert all(card["state"] in ("loaded", "loading", "unloading", "unloaded") for card in cards.values())


def test_each_model_answers_with_its_own_configuration(client):
    a, b = ask(client, "smol-a"), ask(client, "smol-b-alias")
    assert a.model == "smol-a" and b.model == "smol-b-alias"
    assert a.usage.completion_tokens <= 6 and b.usage.completion_tokens <= 4  # their own default max_tokens
    # smol-a renders SmolLM2's template (a default system prompt), smol-b the plain one: fewer tokens.
    assert a.usage.prompt_tokens > b.usage.prompt_tokens
    embedded = client.embeddings.create(model="minilm", input=["a cat", "a dog"])
    assert len(embedded.data) == 2 and len(embedded.data[0].embedding) == 384
    assert ask(client, "smol").choices[0].message.content is not None  # the directory's own GGUF


def test_a_model_is_loaded_when_a_request_names_it_and_evicts_the_least_recently_used(server, client):
    assert admin(server, "load", "smol-a").json()["state"] == "loaded"
    assert ask(client, "smol").usage.completion_tokens > 0  # loaded by the request
    after = states(server)
    assert after["smol"] == "loaded" and after["smol-a"] == "unloaded"  # the budget holds one model


def test_concurrent_first_requests_load_the_model_once(server, client):
    admin(server, "unload", "smol-b").raise_for_status()
    before = loads(server, "smol-b")
    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(ask(client, "smol-b").usage.completion_tokens))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(answers) == 4
    assert loads(server, "smol-b") == before + 1


def test_an_idle_model_is_unloaded_after_its_ttl(server, client):
    ask(client, "smol-b")
    deadline = time.monotonic() + TTL + 10
    while states(server)["smol-b"] != "unloaded":
        assert time.monotonic() < deadline, "smol-b was not unloaded after its TTL"
        time.sleep(0.3)


def test_a_request_during_an_unload_still_answers(server, client):
    admin(server, "load", "smol-a").raise_for_status()
    unloading = threading.Thread(target=admin, args=(server, "unload", "smol-a"))
    unloading.start()
    answer = ask(client, "smol-a")  # while the unload runs, or after it: it loads again either way
    unloading.join(timeout=60)
    assert answer.choices[0].finish_reason in ("stop", "length")


def test_a_broken_model_fails_only_its_own_requests(server, client, caplog):
    caplog.set_level(logging.INFO)
    broken = server.post("/v1/chat/completions", headers=API,
                         json={"model": "broken", "messages": [{"role": "user", "content": "hi"}]})
    assert broken.status_code == 503
    error = broken.json()["error"]
    assert error["code"] == "model_load_failed" and "the model 'broken' could not be loaded" in error["message"]
    assert "load_error" in next(card for card in server.get("/v1/models", headers=API).json()["data"]
                                if card["id"] == "broken")
    assert ask(client, "smol-a").choices[0].message is not None  # the others keep serving
    assert "model broken failed to load" in caplog.text


def test_a_conversation_may_switch_model(client):
    first = client.responses.create(model="smol-a", input="My name is Ada.", max_output_tokens=16)
    second = client.responses.create(model="smol-b", input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=16)
    assert first.model == "smol-a" and second.model == "smol-b" and second.status in ("completed", "incomplete")
    assert second.usage.input_tokens > first.usage.input_tokens  # it read the first turn
    conversation = client.conversations.create()
    for model in ("smol-b", "smol-a"):
        turn = client.responses.create(model=model, input="Hello.", conversation=conversation.id,
                                       max_output_tokens=8)
        assert turn.model == model
    items = client.conversations.items.list(conversation.id)
    assert len(items.data) >= 4  # two inputs and two answers


def test_wrong_model_names_and_apis_are_refused(client):
    with pytest.raises(NotFoundError) as missing:
        ask(client, "no-such-model")
    assert missing.value.body["code"] == "model_not_found"
    with pytest.raises(Exception) as embedding:
        ask(client, "minilm")
    assert getattr(embedding.value, "status_code", None) == 400


def test_admin_routes_need_the_admin_key(server):
    assert admin(server, "load", "minilm", key=API_KEY).status_code == 401
    assert admin(server, "unload", "no-such-model").status_code == 404
    status = admin(server, "load", "minilm").json()
    assert status["id"] == "minilm" and status["state"] == "loaded"


def test_metrics_are_per_model(server, client):
    ask(client, "smol-a")
    text = server.get("/metrics", headers=API).text
    assert re.search(r'^vllm:prompt_tokens_total\{model_name="smol-a"\} [1-9]', text, re.M)
    assert 'rostra_model_loaded{model_name="broken"} 0.0' in text


def test_a_model_added_to_the_directory_is_found(server, models_dir):
    shutil.copyfile(models_dir / "broken.gguf", models_dir / "added.gguf")
    assert states(server)["added"] == "unloaded"


@pytest.fixture(scope="module")
def local_and_gateway(scripted_server, tmp_path_factory):
    """A local model and a gateway behind one server: the gateway's upstream serves `scripted`."""
    config = tmp_path_factory.mktemp("gateway") / "models.yaml"
    config.write_text(f"""
models:
  - name: local
    engine: scripted
    script: {DATA / "script.jsonl"}
  - name: cloud
    engine: remote
    upstream: ["{scripted_server.v1}"]
""")
    running = RunningServer(["--models-config", str(config)])
    yield running
    running.stop()


def test_a_gateway_is_one_model_among_them(local_and_gateway):
    client = OpenAI(base_url=local_and_gateway.v1, api_key="unused", max_retries=0)
    listed = {card["id"]: card["state"] for card in httpx.get(f"{local_and_gateway.v1}/models").json()["data"]}
    assert listed == {"local": "unloaded", "scripted": "loaded"}  # the gateway starts with the server
    for model in ("local", "scripted"):
        answer = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "say hello"}])
        assert answer.model == model and answer.choices[0].message.content == "Hello! How can I help you today?"
    assert httpx.get(f"{local_and_gateway.v1}/models").json()["data"][0]["state"] == "loaded"
