"""Chat templates (sandboxed), GGUF metadata and the in-process tokenizer."""

import pytest

from rostra.embedded import embedded_model_path
from rostra.errors import InvalidRequest
from rostra.gguf_metadata import context_length, read_gguf_metadata
from rostra.prompt.chat_template import ChatTemplate
from rostra.tokenizer import gguf_token_bytes, tokenizer_from_gguf


@pytest.fixture(scope="module")
def metadata():
    return read_gguf_metadata(embedded_model_path())


def test_gguf_metadata(metadata):
    assert metadata["general.architecture"] == "llama"
    assert context_length(metadata) == 8192
    assert len(metadata["tokenizer.ggml.tokens"]) == 49152
    assert "<|im_start|>" in metadata["tokenizer.chat_template"]


@pytest.mark.parametrize("text", ["Hello there", "<|im_start|>user\nhi<|im_end|>", "Grüße 日本語 🎉", " x  y\n\tz", ""])
def test_tokenizer_round_trip(metadata, text):
    tokenizer = tokenizer_from_gguf(embedded_model_path(), metadata)
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    vocab_bytes = gguf_token_bytes(metadata)
    assert b"".join(vocab_bytes[i] for i in ids).decode() == text


def test_special_tokens_are_single_ids(metadata):
    tokenizer = tokenizer_from_gguf(embedded_model_path(), metadata)
    assert tokenizer.encode("<|im_start|>") == [1]
    assert tokenizer.encode("<|im_end|>") == [2]


def test_model_template_renders(metadata):
    template = ChatTemplate(metadata["tokenizer.chat_template"])
    text = template.render([{"role": "user", "content": "Hi"}])
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert "You are a helpful AI assistant named SmolLM" in text


def test_continue_final_message(metadata):
    template = ChatTemplate(metadata["tokenizer.chat_template"])
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, I"}]
    text = template.render(messages, add_generation_prompt=False, continue_final_message=True)
    assert text.endswith("<|im_start|>assistant\nHello, I")


def test_template_is_sandboxed():
    escape = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(Exception) as info:
        ChatTemplate(escape).render([{"role": "user", "content": "x"}])
    assert "unsafe" in str(info.value).lower() or "not safely" in str(info.value).lower() or \
        isinstance(info.value, InvalidRequest)


def test_raise_exception_is_a_client_error():
    template = ChatTemplate("{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}ok")
    assert template.render([{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(InvalidRequest, match="user first"):
        template.render([{"role": "assistant", "content": "x"}])


def test_tojson_keeps_unicode_and_tools():
    template = ChatTemplate("{{ tools | tojson }}")
    assert template.render([], tools=[{"name": "météo"}]) == '[{"name": "météo"}]'


def test_end_of_generation_ids(metadata):
    from rostra.tokenizer import end_of_generation_ids

    assert end_of_generation_ids(metadata) == {0, 2}  # <|endoftext|>, <|im_end|>


# Shaped like LFM2.5's template: the assistant turn sits in {% generation %} … {% endgeneration %}
# (transformers' return_assistant_tokens_mask convention), and the loop uses {% break %}.
LFM2_STYLE_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'stop' -%}{%- break -%}{%- endif -%}"
    "{%- if message['role'] == 'skip' -%}{%- continue -%}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{% generation %}{{- message['content'] + '<|im_end|>' -}}{% endgeneration %}"
    "{%- else -%}{{- message['content'] + '<|im_end|>' -}}{%- endif -%}"
    "{{- '\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


def test_generation_tag_and_loop_controls_are_accepted():
    """Issue 43: {% generation %} renders its body unchanged; {% break %} / {% continue %} work."""
    template = ChatTemplate(LFM2_STYLE_TEMPLATE, bos_token="<|startoftext|>")
    messages = [{"role": "user", "content": "Hi"}, {"role": "skip", "content": "no"},
                {"role": "assistant", "content": "Hello"}, {"role": "stop", "content": ""},
                {"role": "user", "content": "never"}]
    assert template.render(messages) == ("<|startoftext|><|im_start|>user\nHi<|im_end|>\n"
                                         "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>assistant\n")
