"""Decoding constraints from `response_format`, the guided_* extensions and forced tool choice.

A constraint is a JSON schema or a GBNF grammar; the llama.cpp engine enforces both while
sampling (its JSON-schema-to-grammar converter and GBNF sampler). Schemas are checked here
first, so an invalid one is a 400 naming the parameter, not an engine failure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from rostra.errors import InvalidRequest
from rostra.guided.bounds import check_grammar_bounds, check_regex, check_schema_bounds


@dataclass(frozen=True)
class Constraint:
    json_schema: dict[str, Any] | None = None
    grammar: str | None = None  # GBNF, or llguidance's grammar format (starting "%llguidance")
    # vLLM's structural tag, checked (guided/structural_tag.py): `grammar` enforces it; vLLM takes it as it is.
    structural_tag: dict[str, Any] | None = None


def tag_constraint(value: Any, param: str) -> Constraint:
    from rostra.guided.structural_tag import structural_tag, structural_tag_grammar  # it builds on this module

    tag = structural_tag(value, param)
    return Constraint(grammar=structural_tag_grammar(tag, param), structural_tag=tag)


def checked_schema(schema: Any, param: str, constrains: bool = True) -> dict[str, Any]:
    """A valid, bounded JSON schema; `constrains=False` for one that is only shown to the model (see
    check_schema_bounds)."""
    if not isinstance(schema, dict):
        raise InvalidRequest("a JSON schema must be an object", param=param)
    check_schema_bounds(schema, param, counts=constrains)  # first: the checker below recurses, and engines expand counts
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidRequest(f"invalid JSON schema: {exc.message}", param=param) from exc
    return schema


def _gbnf_literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # GBNF string literals escape like JSON


def choice_grammar(choices: list[str]) -> str:
    return "root ::= " + " | ".join(_gbnf_literal(choice) for choice in choices)


def response_constraint(response_format: dict[str, Any] | None, guided: dict[str, Any]) -> Constraint | None:
    """The constraint for the answer's content, or None."""
    if response_format:
        kind = response_format.get("type")
        if kind == "json_object":
            return Constraint(json_schema={"type": "object"})
        if kind == "json_schema":
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("name", ""), str):
                raise InvalidRequest("response_format.json_schema must be an object with a name and a schema",
                                     param="response_format.json_schema")
            schema = checked_schema(spec.get("schema", {"type": "object"}), "response_format.json_schema.schema")
            return Constraint(json_schema=strict_schema(schema) if spec.get("strict") is True else schema)
        if kind == "structural_tag":
            return tag_constraint(response_format, "response_format")
        if kind not in (None, "text"):
            raise InvalidRequest(f"unknown response_format type {kind!r}", param="response_format.type")
    if guided.get("guided_json") is not None:
        return Constraint(json_schema=checked_schema(guided["guided_json"], "guided_json"))
    if guided.get("guided_choice") is not None:
        choices = guided["guided_choice"]
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
            raise InvalidRequest("guided_choice must be a non-empty list of strings", param="guided_choice")
        return Constraint(grammar=choice_grammar(choices))
    if guided.get("guided_grammar") is not None:
        if not isinstance(guided["guided_grammar"], str) or not guided["guided_grammar"].strip():
            raise InvalidRequest("guided_grammar must be a GBNF grammar", param="guided_grammar")
        return Constraint(grammar=checked_grammar(guided["guided_grammar"], "guided_grammar"))
    if guided.get("guided_regex") is not None:
        return Constraint(grammar=regex_grammar(guided["guided_regex"]))
    if guided.get("structural_tag") is not None:
        return tag_constraint(guided["structural_tag"], "structural_tag")
    return None


def regex_grammar(pattern: Any) -> str:
    """A whole-output regex, as an llguidance grammar (llama.cpp takes these beside GBNF)."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidRequest("guided_regex must be a regular expression", param="guided_regex")
    check_regex(pattern, "guided_regex")
    escaped = re.sub(r"(?<!\\)/", r"\/", pattern).replace("\n", "\\n")
    grammar = f"%llguidance {{}}\nstart: /{escaped}/"
    error = grammar_error(grammar)  # what Python's re takes, llguidance may not (backreferences, lookarounds)
    if error:
        raise InvalidRequest(f"guided_regex: this regular expression cannot be enforced: {error}", param="guided_regex")
    return grammar


def checked_grammar(grammar: str, param: str) -> str:
    """A grammar that compiles (GBNF, or llguidance's lark format after "%llguidance"), with bounded
    counts: checked here with llguidance's own parser, so an invalid one is a 400 on every engine,
    whichever engine (or none, the scripted one) would have compiled it."""
    check_grammar_bounds(grammar, param)
    error = grammar_error(grammar)
    if error:
        raise InvalidRequest(f"{param}: invalid grammar: {error}", param=param)
    return grammar


def grammar_error(grammar: str) -> str:
    """What is wrong with a grammar, or "" (llguidance reads GBNF and its lark format; llama.cpp and
    the transformers engine compile with it or with a GBNF reader that takes the same language)."""
    import llguidance
    from llguidance.gbnf_to_lark import any_to_lark

    try:
        lark = any_to_lark(grammar)  # "%llguidance" text passes through as is
        return str(llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(lark)))
    except Exception as exc:  # the GBNF converter raises plain exceptions
        return str(exc) or type(exc).__name__


# Keywords whose value is one schema, or a list or a map of schemas, where objects may nest.
_ONE, _LIST, _MAP = ("items", "additionalItems", "not", "if", "then", "else", "contains"), \
    ("anyOf", "oneOf", "allOf", "prefixItems"), ("properties", "$defs", "definitions", "patternProperties")


def strict_schema(schema: Any) -> Any:
    """The schema with `additionalProperties: false` on every object that lists its properties
    and says nothing of others (OpenAI's strict mode: exactly the listed properties)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    for key in _ONE:
        if key in out:
            out[key] = strict_schema(out[key])
    for key in _LIST:
        if isinstance(out.get(key), list):
            out[key] = [strict_schema(item) for item in out[key]]
    for key in _MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: strict_schema(item) for name, item in out[key].items()}
    return out


def tool_call_schema(tools: dict[str, dict[str, Any]], parallel: bool) -> dict[str, Any]:
    """tool_choice "required": a JSON list of calls, each to one of `tools` with valid arguments."""
    call_schemas = [
        {"type": "object", "properties": {"name": {"const": name}, "arguments": parameters},
         "required": ["name", "arguments"], "additionalProperties": False}
        for name, parameters in tools.items()
    ]
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"anyOf": call_schemas}}
    if not parallel:
        schema["maxItems"] = 1
    return schema


def single_line(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its JSON laid out on one line, `{"a": 1, "b": [2, 3]}`: no free whitespace.

    A forced tool call is rostra's format, not the model's, and where a grammar lets whitespace
    repeat, a small model can take it forever at temperature 0: Qwen2.5-Coder-0.5B under
    tool_choice "required" wrote `[`, a newline and then only spaces until max_tokens in 2 of 48
    BFCL one-call cases. A bounded `whitespace_pattern` (e.g. at most 16 blanks) did not help: the
    llguidance built into llama.cpp lets whitespace runs follow each other. On one line the model
    always ends; what it costs: on BFCL's first 24 parallel cases it wrote 34 of the 59 expected calls
    instead of 40 (indented, it goes on to a second call a little more often; benchmarks/README.md). `x-guidance` is llguidance's layout option, read
    by the llama.cpp and transformers engines' constraint compiler; validators ignore it."""
    return {**schema, "x-guidance": {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}}


def schema_constraint(schema: Any, param: str, strict: bool = True) -> Constraint:
    """A JSON schema an answer must match (Messages' output_config.format, Responses' text.format), checked
    under the name its client gave it; `strict`: no properties the schema does not list."""
    checked = checked_schema(schema, param)
    return Constraint(json_schema=strict_schema(checked) if strict else checked)
