"""gpt-oss recognised from the model: a scripted model whose tokenizer directory says `model_type: gpt_oss`
(tests/gpt_oss_tokenizer.py) gets harmony prompts and the harmony output parser without any flag."""

from __future__ import annotations

import httpx
import pytest

from gpt_oss_tokenizer import gpt_oss_tokenizer
from servers import DATA, RunningServer
from wire import check, fold_chat_stream, post, stream

MODEL = "gpt-oss-scripted"


@pytest.fixture(scope="module")
def gpt_oss_server():
    server = RunningServer(["--engine", "scripted", "--script", str(DATA / "harmony.jsonl"), "--tokenizer",
                            str(gpt_oss_tokenizer()), "--served-model-name", MODEL])
    yield server
    server.stop()


def rendered_prompt(server, messages) -> str:
    tokens = httpx.post(f"{server.base_url}/tokenize", json={"model": MODEL, "messages": messages}).json()["tokens"]
    return httpx.post(f"{server.base_url}/detokenize", json={"model": MODEL, "tokens": tokens}).json()["prompt"]


def test_the_prompt_is_harmony(gpt_oss_server):
    prompt = rendered_prompt(gpt_oss_server, [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "hello"}])
    assert prompt.startswith("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.")
    assert "Reasoning: medium" in prompt
    assert "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>" in prompt
    assert prompt.endswith("<|start|>user<|message|>hello<|end|><|start|>assistant")


def test_the_output_is_parsed_as_harmony_without_a_flag(gpt_oss_server):
    request = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "reasoning_effort": "high"}
    message = check("chat", post(gpt_oss_server.base_url, "/v1/chat/completions", request).json())
    assert (message["choices"][0]["message"]["reasoning_content"],
            message["choices"][0]["message"]["content"]) == ("Greet.", "Hello there!")
    chunks = stream(gpt_oss_server.base_url, "/v1/chat/completions", request, "chat_chunk")
    folded = fold_chat_stream(chunks)[0]
    assert (folded["reasoning"], folded["content"]) == ("Greet.", "Hello there!")


def test_an_effort_harmony_lacks_is_a_400(gpt_oss_server):
    response = post(gpt_oss_server.base_url, "/v1/chat/completions",
                    {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "reasoning_effort": "max"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "reasoning_effort"


def test_return_and_call_end_the_turn(gpt_oss_server):
    """<|return|> and <|call|> are stop tokens of every gpt-oss request: what a model would write past them
    is never read (the scripted output goes on after <|return|>)."""
    request = {"model": MODEL, "messages": [{"role": "user", "content": "stop here"}]}
    body = check("chat", post(gpt_oss_server.base_url, "/v1/chat/completions", request).json())
    assert body["choices"][0]["message"]["content"] == "Done."
    assert body["choices"][0]["finish_reason"] == "stop"
