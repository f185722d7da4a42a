"""A chat template's own stop strings (tabbyAPI's template metadata: a top-level `{% set stop_strings = [...] %}`)
end every request it renders, on Chat, Messages and Responses; read from the template's syntax, never run.
In-process, scripted engine: its script writes past the template's end-of-turn text, as a checkpoint whose
tokenizer does not stop there would."""

from __future__ import annotations

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness import MODEL, served
from rostra.prompt.template_metadata import template_stop_strings

END = "<|end_of_turn|>"
TEMPLATE = ('{%- set stop_strings = ["' + END + '", "\\n### User"] -%}\n'
            "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant: {% endif %}")
SCRIPT = [{"match": "^say hello$", "output": f"Hello there{END}user: and the model goes on"}]


@pytest.mark.parametrize("source,expected", [
    (TEMPLATE, (END, "\n### User")),
    ('{% set stop_strings = "</s>" %}{{ messages }}', ("</s>",)),
    ("{{ messages }}", ()),
    ('{% set stop_strings = [eos_token] %}{{ messages }}', ()),  # not a literal: nothing is evaluated
    ('{% if x %}{% set stop_strings = ["a"] %}{% endif %}{{ messages }}', ()),  # top level only
    ('{% set stop_strings = ["", "b"] %}{{ messages }}', ()),  # an empty stop would end every answer at once
])
def test_stop_strings_read_from_the_templates_syntax(source, expected):
    assert template_stop_strings(ImmutableSandboxedEnvironment(), source) == expected


@pytest.fixture()
def http(tmp_path):
    template = tmp_path / "template.jinja"
    template.write_text(TEMPLATE)
    with served(tmp_path, SCRIPT, chat_template=str(template)) as client:
        yield client


def test_chat_stops_at_the_templates_stop_string(http):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "say hello"}]}
    choice = http.post("/v1/chat/completions", json=body).json()["choices"][0]
    assert choice["message"]["content"] == "Hello there"
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == END
    own = http.post("/v1/chat/completions", json={**body, "stop": ["there"]}).json()["choices"][0]
    assert own["message"]["content"] == "Hello " and own["stop_reason"] == "there"  # the client's stops still hold


def test_messages_ends_the_turn_at_it_as_end_turn(http):
    """A stop the client did not send is the model's end of turn on the Messages API, not a stop_sequence."""
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "say hello"}]}
    message = http.post("/v1/messages", json=body).json()
    assert message["content"][0]["text"] == "Hello there"
    assert message["stop_reason"] == "end_turn" and message["stop_sequence"] is None
    asked = http.post("/v1/messages", json={**body, "stop_sequences": ["there"]}).json()
    assert asked["stop_reason"] == "stop_sequence" and asked["stop_sequence"] == "there"


def test_responses_stops_at_it(http):
    response = http.post("/v1/responses", json={"model": MODEL, "input": "say hello", "store": False}).json()
    assert response["output"][-1]["content"][0]["text"] == "Hello there"
