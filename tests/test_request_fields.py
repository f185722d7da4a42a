"""Every field of OpenAI's request schemas is known to rostra's models, and honoured or refused by name.

The spec's property lists (following allOf) are walked: a field OpenAI adds to the spec and rostra's
models lack fails here, instead of being answered with "Unrecognized request argument" by mistake.
"""

from __future__ import annotations

import json

import pytest

from rostra.api.responses.models import CreateResponseRequest
from rostra.errors import InvalidRequest
from rostra.http.request_body import check_fields
from rostra.protocol.chat import ChatCompletionRequest
from rostra.protocol.completions import CompletionRequest
from spec import SPEC_PATH

SCHEMAS = {"CreateChatCompletionRequest": ChatCompletionRequest, "CreateCompletionRequest": CompletionRequest,
           "CreateResponse": CreateResponseRequest}
MESSAGES = [{"role": "user", "content": "hi"}]
MINIMAL = {ChatCompletionRequest: {"model": "m", "messages": MESSAGES},
           CompletionRequest: {"model": "m", "prompt": "x"}, CreateResponseRequest: {"model": "m", "input": "x"}}


def spec_properties(name: str) -> set[str]:
    schemas = json.loads(SPEC_PATH.read_text())["components"]["schemas"]

    def walk(schema: dict) -> set[str]:
        names = set(schema.get("properties", {}))
        for part in schema.get("allOf", []):
            names |= walk(schemas[part["$ref"].rsplit("/", 1)[-1]] if "$ref" in part else part)
        return names

    return walk(schemas[name])


@pytest.mark.parametrize("schema,model", SCHEMAS.items())
def test_every_spec_property_is_a_field(schema, model):
    properties = spec_properties(schema)
    assert len(properties) > 15  # the walk found the lists (allOf followed)
    missing = properties - set(model.model_fields)
    assert not missing, f"{model.__name__} lacks {sorted(missing)} of the spec's {schema}"


def checked(model, **fields):
    body = model.model_validate({**MINIMAL[model], **fields})
    check_fields(body, "error")
    return body


def refusal(model, **fields) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        checked(model, **fields)
    return caught.value


@pytest.mark.parametrize("model,field", [
    (ChatCompletionRequest, "max_token"), (CompletionRequest, "bogus"), (CreateResponseRequest, "max_tokens"),
    (ChatCompletionRequest, "length_penalty")])
def test_unknown_fields_are_refused_by_name(model, field):
    error = refusal(model, **{field: 5})
    assert error.message == f"Unrecognized request argument supplied: {field}"
    assert error.param == field and error.error_type == "invalid_request_error"


def test_an_unknown_null_is_still_unknown():
    assert refusal(ChatCompletionRequest, max_token=None).param == "max_token"


def test_nested_unknown_fields_name_their_path():
    assert refusal(ChatCompletionRequest, stream_options={"include_usage": True, "colour": 1}).param == \
        "stream_options.colour"
    assert refusal(CreateResponseRequest, text={"format": {"type": "text"}, "size": 1}).param == "text.size"


def test_ignore_drops_unknown_fields_and_logs(caplog):
    body = ChatCompletionRequest.model_validate({**MINIMAL[ChatCompletionRequest], "max_token": 5,
                                                 "stream_options": {"x": 1}})
    check_fields(body, "ignore")
    assert body.unknown_fields() == []
    assert "max_token" not in body.model_dump() and "stream_options.x" in caplog.text and "max_token" in caplog.text


# What real clients send (openai SDK, LangChain ChatOpenAI, the Agents SDK) at their defaults.
CLIENT_DEFAULTS = [
    (ChatCompletionRequest, {"stream_options": {"include_usage": True, "include_obfuscation": False},
                             "parallel_tool_calls": True, "store": False, "metadata": {"k": "v"}, "user": "u",
                             "prompt_cache_key": "k", "prompt_cache_retention": "24h", "safety_identifier": "s",
                             "service_tier": "auto", "top_logprobs": 0, "logprobs": True, "verbosity": "medium",
                             "modalities": ["text"], "reasoning_effort": "low", "n": None, "seed": None}),
    (ChatCompletionRequest, {"service_tier": "default"}),
    (CreateResponseRequest, {"include": ["reasoning.encrypted_content", "message.output_text.logprobs"],
                             "truncation": "auto", "store": False, "parallel_tool_calls": True, "metadata": {},
                             "prompt_cache_key": "k", "service_tier": "auto", "top_logprobs": 2,
                             "text": {"format": {"type": "text"}, "verbosity": "medium"},
                             "reasoning": {"effort": "low", "summary": "auto"}, "max_tool_calls": 3,
                             "stream_options": {"include_obfuscation": False}, "safety_identifier": "s"}),
    (CompletionRequest, {"user": "u", "best_of": 1, "echo": False, "suffix": None, "stream_options": None}),
    # Codex CLI 0.169 (under an OpenAI model name), and the openai SDK's request-level image options.
    (CreateResponseRequest, {"client_metadata": {"x-codex-window-id": "w:0", "turn_id": "t"}, "stream": True,
                             "text": {"verbosity": "low"}, "tool_choice": "auto", "parallel_tool_calls": True,
                             "reasoning": {"effort": "medium"}, "store": False, "prompt_cache_key": "k",
                             "include": ["reasoning.encrypted_content"], "image": {"detail": "auto"}}),
]


@pytest.mark.parametrize("model,fields", CLIENT_DEFAULTS)
def test_client_defaults_are_accepted(model, fields):
    checked(model, **fields)


REFUSED = [
    (ChatCompletionRequest, {"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    (ChatCompletionRequest, {"modalities": ["text", "audio"]}, "modalities"),
    (ChatCompletionRequest, {"prediction": {"type": "content", "content": "x"}}, "prediction"),
    (ChatCompletionRequest, {"web_search_options": {}}, "web_search_options"),
    (ChatCompletionRequest, {"moderation": {"model": "omni-moderation-latest"}}, "moderation"),
    (ChatCompletionRequest, {"functions": [{"name": "f"}]}, "functions"),
    (ChatCompletionRequest, {"function_call": "auto"}, "function_call"),
    (ChatCompletionRequest, {"service_tier": "flex"}, "service_tier"),
    (ChatCompletionRequest, {"verbosity": "low"}, "verbosity"),
    (ChatCompletionRequest, {"min_tokens": 9, "max_completion_tokens": 4}, "min_tokens"),
    (CompletionRequest, {"min_tokens": 20, "max_tokens": 16}, "min_tokens"),
    (CompletionRequest, {"bad_words": [""]}, "bad_words"),
    (CreateResponseRequest, {"prompt": {"id": "pmpt_1"}}, "prompt"),
    (CreateResponseRequest, {"context_management": [{"type": "compaction"}]}, "context_management"),
    (CreateResponseRequest, {"service_tier": "priority"}, "service_tier"),
    (CreateResponseRequest, {"access_programs": {"cyber": "standard"}}, "access_programs"),
]


@pytest.mark.parametrize("model,fields,param", REFUSED)
def test_what_cannot_be_honoured_is_refused_by_name(model, fields, param):
    error = refusal(model, **fields)
    assert error.param == param and error.status_code == 400, error.message
