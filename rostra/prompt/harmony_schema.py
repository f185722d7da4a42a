"""A function tool's JSON schema as harmony writes it: the TypeScript-like declaration gpt-oss was trained to read
in its developer message (`type get_weather = (_: { city: string, ... }) => any;`).

The layout follows what OpenAI's `openai-harmony` renderer produces, oddities included (a nested object's
description written twice, only a description's first line commented), since that is what the model saw in
training; tests/test_harmony_render.py compares the two on the schemas clients send. Constructs the model was
not shown in a documented form (`anyOf`, `oneOf`, mixed enums) are written as `any`.
"""

from __future__ import annotations

import json
from typing import Any

_PRIMITIVES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def function_declaration(name: str, description: str, parameters: dict[str, Any] | None) -> str:
    """One tool of the `functions` namespace, with its description as `//` comment lines."""
    lines = "".join(f"// {line}\n" for line in description.splitlines()) if description else ""
    if parameters is None:
        return f"{lines}type {name} = () => any;\n"
    return f"{lines}type {name} = (_: {{\n{_properties(parameters, 0)}}}) => any;\n"


def _indent(depth: int) -> str:
    return "    " * depth


def _properties(schema: dict[str, Any], depth: int) -> str:
    required = set(schema.get("required") or ())
    out = []
    for name, field in (schema.get("properties") or {}).items():
        field = field if isinstance(field, dict) else {}
        description = field.get("description")
        head = f"{_indent(depth)}// {description}\n" if description else ""
        optional = "" if name in required else "?"
        out.append(f"{head}{_indent(depth)}{name}{optional}: {_described(field, depth)}{_type(field, depth)},"
                   f"{_default(field)}\n")
    return "".join(out)


def _described(field: dict[str, Any], depth: int) -> str:
    """An object's description stands again before its brace (as harmony renders it)."""
    description = field.get("description")
    if description and field.get("type") == "object" and "enum" not in field:
        return f"{_indent(depth + 1)}// {description}\n"
    return ""


def _type(field: dict[str, Any], depth: int) -> str:
    if "enum" in field:
        values = field["enum"]
        if values and all(isinstance(value, str) for value in values):
            return " | ".join(json.dumps(value, ensure_ascii=False) for value in values)
    kind = field.get("type")
    if isinstance(kind, list):
        return " | ".join(_single_type(part, field, depth) if part != "null" else "null" for part in kind)
    written = _single_type(kind, field, depth) if isinstance(kind, str) else "any"
    return f"{written} | null" if field.get("nullable") and written != "any" else written


def _single_type(kind: str, field: dict[str, Any], depth: int) -> str:
    if kind == "object":
        return f"{{\n{_properties(field, depth + 1)}{_indent(depth + 1)}}}"
    if kind == "array":
        items = field.get("items")
        return f"{_type(items, depth)}[]" if isinstance(items, dict) and items else "Array<any>"
    return _PRIMITIVES.get(kind, "any")


def _default(field: dict[str, Any]) -> str:
    if "default" not in field:
        return ""
    value = field["default"]
    if isinstance(value, str) and "enum" in field:  # an enum's default is written bare
        return f" // default: {value}"
    return f" // default: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}"
