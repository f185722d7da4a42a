"""Attribute filters, OpenAI's shape: a comparison `{"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key",
"value"}` or a compound `{"type": "and"|"or", "filters": [...]}`, nested. A file without the key matches no
comparison but `ne` and `nin`; an order comparison between a number and a string matches nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from rostra.errors import InvalidRequest
from rostra.store.vector_objects import Attributes

COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
MAX_DEPTH = 8


@dataclass(frozen=True)
class Comparison:
    op: str
    key: str
    value: Any

    def matches(self, attributes: Attributes | None) -> bool:
        present = attributes is not None and self.key in attributes
        have = attributes.get(self.key) if attributes is not None else None
        if self.op in ("in", "nin"):
            inside = present and any(_equal(have, item) for item in self.value)
            return inside if self.op == "in" else not inside
        if self.op in ("eq", "ne"):
            equal = present and _equal(have, self.value)
            return equal if self.op == "eq" else not equal
        if not present or isinstance(have, bool) != isinstance(self.value, bool) or \
                isinstance(have, str) != isinstance(self.value, str):
            return False
        return bool({"gt": have > self.value, "gte": have >= self.value, "lt": have < self.value,
                     "lte": have <= self.value}[self.op])


@dataclass(frozen=True)
class Compound:
    op: str
    filters: tuple[Filter, ...]

    def matches(self, attributes: Attributes | None) -> bool:
        results = (part.matches(attributes) for part in self.filters)
        return all(results) if self.op == "and" else any(results)


Filter = Union[Comparison, Compound]


def _equal(have: Any, want: Any) -> bool:
    if isinstance(have, bool) or isinstance(want, bool):
        return isinstance(have, bool) and isinstance(want, bool) and have == want
    return bool(have == want)


def parse_filter(value: Any, param: str, depth: int = 0) -> Filter:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise InvalidRequest("a filter is an object with a type", param=param)
    if depth > MAX_DEPTH:
        raise InvalidRequest(f"filters nest at most {MAX_DEPTH} deep", param=param)
    kind = value["type"]
    if kind in ("and", "or"):
        parts = value.get("filters")
        if set(value) != {"type", "filters"} or not isinstance(parts, list):
            raise InvalidRequest(f"an {kind!r} filter has a list `filters` and nothing else", param=param)
        return Compound(kind, tuple(parse_filter(part, f"{param}.filters[{index}]", depth + 1)
                                    for index, part in enumerate(parts)))
    if kind not in COMPARISONS:
        raise InvalidRequest(f"filter type must be one of {', '.join(COMPARISONS)}, and or or, not {kind!r}",
                             param=f"{param}.type")
    if set(value) != {"type", "key", "value"} or not isinstance(value["key"], str):
        raise InvalidRequest("a comparison filter has a string `key`, a `value` and nothing else", param=param)
    operand = value["value"]
    if kind in ("in", "nin"):
        if not isinstance(operand, list) or not all(isinstance(item, (str, int, float)) for item in operand):
            raise InvalidRequest(f"an {kind!r} filter's value is a list of strings or numbers",
                                 param=f"{param}.value")
    elif not isinstance(operand, (str, int, float, bool)):
        raise InvalidRequest("a comparison's value is a string, number or boolean", param=f"{param}.value")
    return Comparison(kind, value["key"], operand)
