"""A parameter's raw text as the type the tool's JSON schema gives it.

The XML-like call formats (Qwen3-Coder, Seed-OSS, MiniMax-M2, GLM-4.5) write each parameter's value as raw
text, not JSON: a string exactly as written, anything else as JSON text (the templates render non-string
values with `tojson`). `convert` reads it back by the schema's type.
"""

from __future__ import annotations

import ast
import json
from typing import Any


def convert(value: str, schema: Any) -> Any:
    """The raw text of a parameter as the type its schema declares; the text itself when it
    does not fit (the model meant something, and a string loses nothing)."""
    types = schema_types(schema)
    if not types:
        return _json_or_text(value)
    text = value.strip()
    # Try the non-string types first: with ["integer", "string"], "3" is meant as 3.
    for kind in sorted(types, key=lambda t: t == "string"):
        if kind == "string":
            return value
        converted = _CONVERTERS.get(kind, _json_value)(text)
        if converted is not _NO:
            return converted
    return value


_NO = object()  # "does not convert" (None is a real value: JSON null)


def schema_types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    # anyOf / oneOf of typed alternatives (how optional parameters are often declared).
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return [t for option in schema[key] for t in schema_types(option)]
    return []


def _json_or_text(value: str) -> Any:
    converted = _json_value(value.strip())
    return value if converted is _NO else converted


def _json_value(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # not JSON; or nested too deep to decode
        return _NO


def _reject_constant(name: str) -> None:
    # NaN / Infinity parse in Python but are not JSON: the arguments we emit must be.
    raise ValueError(name)


def _number(text: str) -> Any:
    value = _json_value(text)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else _NO


def _integer(text: str) -> Any:
    value = _number(text)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # a fractional number is kept as a number, not lost to a string


def _boolean(text: str) -> Any:
    return {"true": True, "false": False}.get(text.lower(), _NO)


def _null(text: str) -> Any:
    return None if text.lower() in ("null", "none") else _NO


def _typed_json(kind: type) -> Any:
    def convert_json(text: str) -> Any:
        value = _json_value(text)
        if value is _NO:
            value = _python_literal(text)
        return value if isinstance(value, kind) else _NO
    return convert_json


PYTHON_LITERAL_LIMIT = 100_000  # longer text is not tried as a Python literal (parsing it costs memory)


def _python_literal(text: str) -> Any:
    """A dict or list in Python's spelling ({'a': True, 'b': None}): what Seed-OSS's template writes for a
    non-string value (Jinja's `string` filter), so what the model learnt to write. Only plain literals are
    read (ast.literal_eval), and only what is JSON as well."""
    if len(text) > PYTHON_LITERAL_LIMIT or not text.startswith(("{", "[")):
        return _NO
    try:
        value = ast.literal_eval(text)
        json.dumps(value, allow_nan=False)  # tuples pass as lists; sets, bytes, NaN do not pass
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO
    return json.loads(json.dumps(value))


_CONVERTERS = {"integer": _integer, "number": _number, "boolean": _boolean, "null": _null,
               "object": _typed_json(dict), "array": _typed_json(list)}
