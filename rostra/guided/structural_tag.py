"""vLLM's structural tags: free text, in which each trigger starts a tagged, schema-constrained part.

The shape (vLLM's `response_format: {"type": "structural_tag", ...}`, its `structured_outputs.structural_tag`
and the older top-level `structural_tag`, as an object or its JSON text):

    {"type": "structural_tag",
     "structures": [{"begin": "<function=get_weather>", "schema": {...}, "end": "</function>"}, ...],
     "triggers": ["<function="]}

The model writes what it likes until it writes a trigger; from there it must complete one of the structures
whose `begin` starts with that trigger: the rest of `begin`, JSON that obeys its `schema`, then `end`; then it
is free again. llama.cpp and the transformers engine enforce it as an llguidance grammar with lazy triggers
(llguidance's StructTag builds it), vLLM gets the tag itself (its xgrammar backend reads it).
"""

from __future__ import annotations

import json
from typing import Any

from rostra.errors import InvalidRequest
from rostra.guided.constraints import checked_schema, grammar_error

MAX_STRUCTURES = 128
MAX_TAG_TEXT = 256  # characters of one begin, end or trigger


def structural_tag(value: Any, param: str) -> dict[str, Any]:
    """The tag, checked: an object (or its JSON text) with `structures` and `triggers`; a 400 naming `param`."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"{param}: not JSON: {exc.msg}", param=param) from None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{param} must be an object with structures and triggers", param=param)
    if "format" in value and "structures" not in value:
        raise InvalidRequest(f"{param}: the `format` form of structural tags is not served; give `structures` "
                             "(begin, schema, end) and `triggers`", param=f"{param}.format")
    triggers, structures = value.get("triggers"), value.get("structures")
    if not isinstance(triggers, list) or not triggers or not all(_text(t) and t for t in triggers):
        raise InvalidRequest(f"{param}.triggers must be a non-empty list of non-empty strings",
                             param=f"{param}.triggers")
    if not isinstance(structures, list) or not 0 < len(structures) <= MAX_STRUCTURES:
        raise InvalidRequest(f"{param}.structures must be a list of 1 to {MAX_STRUCTURES} structures",
                             param=f"{param}.structures")
    checked = [_structure(item, triggers, f"{param}.structures[{index}]") for index, item in enumerate(structures)]
    return {"type": "structural_tag", "structures": checked, "triggers": list(triggers)}


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TAG_TEXT


def _structure(item: Any, triggers: list[str], param: str) -> dict[str, Any]:
    if not isinstance(item, dict) or not _text(item.get("begin")) or not _text(item.get("end", "")):
        raise InvalidRequest(f"{param} must be an object with begin and end strings (at most {MAX_TAG_TEXT} "
                             "characters) and a schema", param=param)
    if not any(item["begin"].startswith(trigger) for trigger in triggers):
        raise InvalidRequest(f"{param}.begin must start with one of the triggers", param=f"{param}.begin")
    schema = checked_schema(item.get("schema", {"type": "object"}), f"{param}.schema")
    return {"begin": item["begin"], "schema": schema, "end": item.get("end", "")}


def structural_tag_grammar(tag: dict[str, Any], param: str) -> str:
    """The tag as an llguidance grammar: free text with lazy triggers, each completing one structure."""
    import llguidance

    tags = [llguidance.StructTag(trigger=_trigger(structure["begin"], tag["triggers"]), begin=structure["begin"],
                                 grammar=structure["schema"], end=structure["end"])
            for structure in tag["structures"]]
    # assume_special=False: a trigger such as "<function=" is text the model writes, not one special token.
    grammar = llguidance.StructTag.to_grammar(tags, assume_special=False)
    error = grammar_error(grammar)
    if error:
        raise InvalidRequest(f"{param}: cannot be enforced: {error}", param=param)
    return grammar


def _trigger(begin: str, triggers: list[str]) -> str:
    """The longest trigger `begin` starts with (checked to exist)."""
    return max((trigger for trigger in triggers if begin.startswith(trigger)), key=len)
