"""ArgumentsWriter: model JSON in, in any pieces; canonical, always-completable JSON out."""

import json
import random

import pytest

from rostra.parsing.tools.arguments import ArgumentsWriter
from toolparse import splits

VALID = [
    '{"city": "Oslo", "days": 3}',
    "{ }",
    '{"a":[1,2,{"b":null}],"c":"x\\ny\\u00e9\\ud83d\\ude00 \\/"}',
    '{"a": 1.0e2, "b": -0, "c": true, "d": false, "e": -12.5E-3}',
    '{"code": "def f():\\n    return \\"x\\"\\t# done\\\\"}',
    '{"a": [], "b": {}, "c": [[]], "d": ""}',
    '{\n  "name": "日本",\n  "list": [ 1 , 2 ]\n}',
]


def write(pieces, allowed=None):
    writer = ArgumentsWriter(allowed)
    deltas = [writer.feed(piece) for piece in pieces]
    return "".join(deltas) + writer.close(), writer, deltas


@pytest.mark.parametrize("text", VALID)
def test_valid_objects_come_out_canonical_in_any_pieces(text):
    canonical = json.dumps(json.loads(text), ensure_ascii=False)
    assert write([text])[0] == canonical
    assert write(list(text))[0] == canonical
    rng = random.Random(text)
    for _ in range(50):
        assert write(splits(text, rng))[0] == canonical


@pytest.mark.parametrize("text", VALID)
def test_every_cut_closes_into_valid_json(text):
    for end in range(len(text) + 1):
        out, writer, deltas = write([text[:end]])
        value = json.loads(out)
        assert isinstance(value, dict)
        # What was streamed is never taken back: the closed output extends the deltas.
        assert out.startswith("".join(deltas))


def test_long_string_values_stream_as_written():
    text = '{"content": "' + "line\\n" * 50 + '"}'
    _, _, deltas = write([text[i:i + 7] for i in range(0, len(text), 7)])
    assert sum(1 for delta in deltas if delta) > 20


@pytest.mark.parametrize("text,expected", [
    ('{"a": NaN, "b": 2}', {}),
    ('{"b": 2, "a": Infinity}', {"b": 2}),
    ('{"b": 2, "a": -Infinity}', {"b": 2}),
    ('{"a": 1,}', {"a": 1}),
    ('{"a": "x", "b": [1,}', {"a": "x", "b": [1]}),
    ('{"a": tru}', {}),
    ('{"b": 1, "a": 1e400}', {"b": 1}),  # overflows to Infinity
    ('[1, 2]', {}),
    ('"text"', {}),
    ('{"a": 1} and then prose', {"a": 1}),
    ('{"a": "\\q"}', {"a": ""}),
])
def test_input_that_stops_being_json_is_cut_there(text, expected):
    out, writer, _ = write([text])
    assert json.loads(out) == expected
    assert writer.broken or writer.done


def test_raw_control_characters_in_strings_are_escaped():
    assert json.loads(write(['{"code": "a\nb\tc"}'])[0]) == {"code": "a\nb\tc"}


def test_strict_leaves_out_properties_outside_the_schema():
    out, writer, _ = write(['{"input": 3, "output_type": "magic_function", "extra": {"x": [1]}}'],
                           allowed=frozenset({"input"}))
    assert out == '{"input": 3}'
    assert writer.dropped == ["output_type", "extra"] and writer.seen == {"input", "output_type", "extra"}
    out, _, _ = write(['{"output_type": "x", "input": 3}'], allowed=frozenset({"input"}))
    assert out == '{"input": 3}'
    nested = write(['{"input": {"output_type": 1}}'], allowed=frozenset({"input"}))[0]
    assert json.loads(nested) == {"input": {"output_type": 1}}  # only the top level is the tool's schema


def test_lone_surrogates_become_replacement_characters():
    assert json.loads(write(['{"a": "\\ud83d x \\ude00"}'])[0]) == {"a": "\ufffd x \ufffd"}
