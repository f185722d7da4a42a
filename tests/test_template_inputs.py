"""What a chat template sees besides the messages: the tokenizer's named special tokens (bos_token, unk_token,
pad_token, ...), and the content as a string or as a list of parts (chat_template_content_format).
In-process, the scripted engine over the embedded SmolLM2 tokenizer; the prompt read back through /tokenize."""

from __future__ import annotations

from harness import MODEL, served

from rostra.embedded import embedded_model_path
from rostra.gguf_metadata import read_gguf_metadata
from rostra.tokenizer import gguf_named_tokens

SMOLLM_TOKENS = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
                 "pad_token": "<|im_end|>"}


def rendered(http, messages: list[dict], **body) -> str:
    """The prompt text the server's template renders for `messages`."""
    tokens = http.post("/tokenize", json={"model": MODEL, "messages": messages, **body})
    assert tokens.status_code == 200, tokens.text
    text = http.post("/detokenize", json={"model": MODEL, "tokens": tokens.json()["tokens"]})
    assert text.status_code == 200, text.text
    return text.json()["prompt"]


def test_gguf_names_its_special_tokens():
    assert gguf_named_tokens(read_gguf_metadata(embedded_model_path())) == SMOLLM_TOKENS


def test_template_reads_every_named_token(tmp_path):
    template = "{{ unk_token }}|{{ pad_token }}|{{ bos_token }}|{{ eos_token }}|{{ messages[0]['content'] }}"
    with served(tmp_path, [], chat_template=template, trust_request_chat_template=True) as http:
        expected = "<|endoftext|>|<|im_end|>|<|im_start|>|<|im_end|>|hi"
        assert rendered(http, [{"role": "user", "content": "hi"}]) == expected
        # A request's own template (vLLM's chat_template) sees the same tokens.
        answer = http.post("/v1/chat/completions", json={
            "model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
            "chat_template": "{{ unk_token }}{{ messages[0]['content'] }}", "return_token_ids": True})
        assert answer.status_code == 200, answer.text
        prompt = http.post("/detokenize", json={"model": MODEL, "tokens": answer.json()["prompt_token_ids"]})
        assert prompt.json()["prompt"] == "<|endoftext|>hi"
