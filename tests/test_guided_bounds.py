"""Bounds on constraints (rostra/guided/bounds.py), as data: what is accepted, what is refused and
with which `param`. Real schemas, regexes and grammars stay far below every limit."""

from __future__ import annotations

import pytest

from rostra.errors import InvalidRequest
from rostra.guided.bounds import MAX_REPEAT, MAX_SCHEMA_DEPTH
from rostra.guided.constraints import checked_grammar, checked_schema, regex_grammar


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


ACCEPTED_SCHEMAS = [
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": MAX_REPEAT},
    {"type": "string", "minLength": 3, "maxLength": 280, "pattern": "^[a-z]{3,20}$"},
    {"type": "object", "properties": {"id": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}},
     "maxProperties": 50, "patternProperties": {"^x-[a-z]+$": {"type": "string"}}},
    {"type": "number", "minimum": -1e308, "maximum": 1e308, "multipleOf": 0.5},
    nested(MAX_SCHEMA_DEPTH // 2 - 1),
    {"enum": ["a", 1, 2.5, None, True]},
]

REFUSED_SCHEMAS = [
    ({"type": "array", "maxItems": 10**12}, "s.maxItems"),
    ({"type": "array", "minItems": MAX_REPEAT + 1}, "s.minItems"),
    ({"type": "string", "maxLength": 1e15}, "s.maxLength"),
    ({"type": "object", "maxProperties": 10**10}, "s.maxProperties"),
    ({"type": "array", "contains": {"type": "integer"}, "maxContains": 10**9}, "s.maxContains"),
    ({"type": "object", "properties": {"a": {"type": "array", "maxItems": 10**7}}}, "s.properties.a.maxItems"),
    ({"type": "integer", "maximum": 2**70}, "s.maximum"),
    ({"enum": [1, 2**64]}, "s.enum[1]"),
    ({"type": "string", "pattern": "^a{0,99999999999}$"}, "s.pattern"),
    ({"type": "string", "pattern": "(a{0,1000}){0,1000}"}, "s.pattern"),
    ({"type": "string", "pattern": "("}, "s.pattern"),
    ({"type": "object", "patternProperties": {"a{99999999}": {}}}, None),
    (nested(MAX_SCHEMA_DEPTH), None),
    ({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(10_001)}}, "s"),
    ({"anyOf": [{"type": "wizard"}]}, "s"),
]


@pytest.mark.parametrize("schema", ACCEPTED_SCHEMAS)
def test_real_schemas_pass(schema):
    assert checked_schema(schema, "s") is schema


@pytest.mark.parametrize("schema, param", REFUSED_SCHEMAS)
def test_unbounded_or_invalid_schemas_are_refused_naming_the_field(schema, param):
    with pytest.raises(InvalidRequest) as refused:
        checked_schema(schema, "s")
    assert refused.value.param == param if param else refused.value.param.startswith("s")


def test_a_very_deep_schema_is_refused_without_exhausting_the_stack():
    with pytest.raises(InvalidRequest, match="deeper"):
        checked_schema(nested(100_000), "s")


@pytest.mark.parametrize("pattern", [r"\d{3}-\d{4}", "[A-Z][a-z]{0,30}", "(ab|cd){2,5}x?", "a{10000}", "(a{100}){1000}"])
def test_real_regexes_pass(pattern):
    assert regex_grammar(pattern).startswith("%llguidance")


@pytest.mark.parametrize("pattern", ["a{10001}", "a{0,99999999999}", "((a{100}){100}){100}", "(", r"(a)\1",
                                     "(?<=a)b", "a" * 10_001])
def test_unbounded_or_unenforceable_regexes_are_refused(pattern):
    with pytest.raises(InvalidRequest) as refused:
        regex_grammar(pattern)
    assert refused.value.param == "guided_regex"


@pytest.mark.parametrize("grammar", ['root ::= "yes" | "no"', 'root ::= [0-9]{1,10000} "."',
                                     'root ::= item{2,5}\nitem ::= [a-z]+ " "  # a comment {99999999}',
                                     'root ::= "{99999999}"', "%llguidance {}\nstart: /[a-z]{0,100}/"])
def test_real_grammars_pass(grammar):
    assert checked_grammar(grammar, "guided_grammar") == grammar


@pytest.mark.parametrize("grammar", ['root ::= "a"{0,1000000000}', 'root ::= "a"{' + "9" * 30 + "}",
                                     "%llguidance {}\nstart: /a{0,100000000}/", "root ::= (", "root ::= missing",
                                     "not a grammar", "%llguidance {}\nstart: /a+", 'root ::= "' + "a" * 100_001 + '"'])
def test_unbounded_or_invalid_grammars_are_refused(grammar):
    with pytest.raises(InvalidRequest) as refused:
        checked_grammar(grammar, "guided_grammar")
    assert refused.value.param == "guided_grammar"
