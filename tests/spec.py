"""Validation against OpenAI's OpenAPI spec (tests/spec/openapi.json, vendored) and the SDK's types.

The spec is OAS 3.1 but still writes `nullable: true`; it is read here as "or null". One gap is filled
(`_usage_until_finished`): a Response's `usage` is null until it finishes, as OpenAI's own API sends it; its `user`
is null when not given (`_user_or_null`); and an echoed prompt's first token has no logprob (`_echo_first_null`).
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SPEC_PATH = Path(__file__).resolve().parent / "spec" / "openapi.json"
SPEC_URI = "urn:openai-openapi"


def _nullable_as_null(node):
    if isinstance(node, dict):
        node = {key: _nullable_as_null(value) for key, value in node.items()}
        if node.pop("nullable", False):
            if isinstance(node.get("type"), str):
                node["type"] = [node["type"], "null"]
                if "enum" in node:
                    node["enum"] = [*node["enum"], None]
            else:
                node = {"anyOf": [node, {"type": "null"}]}
        return node
    if isinstance(node, list):
        return [_nullable_as_null(item) for item in node]
    return node


def _usage_until_finished(spec: dict) -> dict:
    """The spec types a Response's `usage` as ResponseUsage only, but OpenAI's API (and the openai SDK's
    Response, whose usage is optional) has `"usage": null` in the snapshots of a response not yet finished."""
    for part in spec["components"]["schemas"]["Response"]["allOf"]:
        usage = part.get("properties", {}).get("usage")
        if usage is not None:
            part["properties"]["usage"] = {"anyOf": [usage, {"type": "null"}]}
    return spec


def _user_or_null(spec: dict) -> dict:
    """A Response's deprecated `user` is typed a string, but OpenAI's responses carry `"user": null` when none was
    given (its API reference's example objects), and Open Responses' schema requires the key, string or null."""
    user = spec["components"]["schemas"]["ModelResponseProperties"]["properties"]["user"]
    spec["components"]["schemas"]["ModelResponseProperties"]["properties"]["user"] = {
        "anyOf": [user, {"type": "null"}]}
    return spec


def spec_as_served() -> dict:
    """The vendored spec, read as this module reads it (nullable as null, usage null until finished, user null
    when not given, an echoed prompt's first logprob null)."""
    spec = _nullable_as_null(copy.deepcopy(json.loads(SPEC_PATH.read_text())))
    return _echo_first_null(_user_or_null(_usage_until_finished(spec)))


@lru_cache(maxsize=1)
def _registry() -> Registry:
    spec = spec_as_served()
    return Registry().with_resource(SPEC_URI, Resource.opaque(spec))


@lru_cache(maxsize=None)
def _validator(schema_name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"{SPEC_URI}#/components/schemas/{schema_name}"}, registry=_registry())


def validate(schema_name: str, obj: dict) -> None:
    """Raise if `obj` does not conform to the spec's component schema `schema_name`."""
    errors = sorted(_validator(schema_name).iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])
        raise AssertionError(f"{schema_name} does not match the spec: {details}")


def _echo_first_null(spec: dict) -> dict:
    """Completions with `echo` and `logprobs` score the prompt, and its first token follows nothing: OpenAI's
    completions API gave it `null` in `token_logprobs` and `top_logprobs` (as vLLM and the seeds do, and as the SDK's
    clients read it), where the spec types every entry a number or an object."""
    for choice in spec["components"]["schemas"]["CreateCompletionResponse"]["properties"]["choices"]["items"][
            "properties"]["logprobs"]["anyOf"]:
        for name in ("token_logprobs", "top_logprobs"):
            if name in choice.get("properties", {}):
                items = choice["properties"][name]["items"]
                choice["properties"][name]["items"] = {"anyOf": [items, {"type": "null"}]}
    return spec
