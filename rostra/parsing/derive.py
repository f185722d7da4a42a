"""Derive a tool-call markup from what a chat template renders, for a template no parser of rostra reads.

The template renders an assistant turn that calls the probe tool twice (two sets of arguments), and, for
comparison, a turn that only answers. Where the call's name and arguments sit in the rendering says how
they are encoded (tools/derived.py: a name then a JSON object, a JSON object with name and arguments keys, or
XML-like key/value pairs); the text the two calls share before and after them is the call's prefix and suffix;
what the template writes before the first call and after the last that it does not write around a plain answer
is the section the calls sit in. The markup is kept only if the parser built from it reads both probe calls
back exactly.

How far this goes (README "Tool calling"): one call per block or a section of calls; a name and its arguments
as above; JSON arguments written with `tojson`, or XML values written raw. A template that writes calls as
Python code, a name the template rewrites, arguments that are a JSON string, or values that are all quoted is
not derived: the markers then decide, as before.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from rostra.parsing.events import Text, ToolCallArgs, ToolCallStart
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.derived import DerivedMarkup, derived_parser_class

log = logging.getLogger("rostra.server")

Render = Callable[[list[dict[str, Any]], list[dict[str, Any]], bool], str]

NAME = "get_weather"
FIRST = {"city": "Oslo", "days": 3}
SECOND = {"city": "Bergen", "days": 5}
TOOL = {"type": "function", "function": {
    "name": NAME, "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
SPEC = ToolSpec(NAME, TOOL["function"]["parameters"])  # type: ignore[index]
ASK = "What is the weather in Oslo and Bergen? (probe 3e8d)"
ANSWER = "It is sunny in both (probe 61fa)."
CLOSERS = ">]})"  # a markup token ends with one of these
SEPARATORS = ",;"


@dataclass(frozen=True)
class Span:
    """Where one call is in the rendering: [start, end); name/key positions for xml."""

    start: int
    end: int


def call_messages() -> list[dict[str, Any]]:
    calls = [{"id": f"call{n}abc{n}", "type": "function", "function": {"name": NAME, "arguments": dict(args)}}
             for n, args in enumerate((FIRST, SECOND))]
    results = [{"role": "tool", "tool_call_id": call["id"], "name": NAME, "content": f"result {n} (probe 2a7c)"}
               for n, call in enumerate(calls)]
    return [{"role": "user", "content": ASK}, {"role": "assistant", "content": "", "tool_calls": calls}, *results]


def model_output(render: Render, messages: list[dict[str, Any]], until: str) -> str | None:
    """What the model writes for the assistant turn: after the generation prompt, up to `until`."""
    text = render(messages, [TOOL], False)
    prompt = render(messages[:1], [TOOL], True)
    end = text.find(until, text.find(ASK) + len(ASK))
    if end < 0 or not text.startswith(prompt):
        return None
    return text[len(prompt): end]


def derive_markup(render: Render) -> DerivedMarkup | None:
    """The call markup the template writes, checked by reading its own probe calls back; None: not derivable."""
    try:
        calls = model_output(render, call_messages(), "result 0 (probe 2a7c)")
        plain = model_output(render, [{"role": "user", "content": ASK}, {"role": "assistant", "content": ANSWER},
                                      {"role": "user", "content": "Thanks (probe 0b9e)"}], "Thanks (probe 0b9e)")
    except Exception as exc:  # a template may refuse the probe any way it likes
        log.debug("the chat template cannot render the derivation probe: %s", exc)
        return None
    if not calls or not plain or ANSWER not in plain:
        return None
    for find in (keyed_spans, name_json_spans, xml_spans):
        found = find(calls)
        if found is None:
            continue
        markup = frame(calls, plain, *found)
        if markup is not None and reads_back(markup, calls):
            return markup
    return None


# -- the encodings: each finds the two calls' spans and the encoding's own markup -------------------------------

def json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every JSON object in `text` with where it starts and ends."""
    decoder, found = json.JSONDecoder(), []
    for at, char in enumerate(text):
        if char == "{":
            try:
                value, end = decoder.raw_decode(text, at)
            except ValueError:
                continue
            found.append((at, end, value))
    return found


def keyed_spans(text: str) -> tuple[list[Span], dict[str, Any]] | None:
    spans, keys = [], {}
    for args in (FIRST, SECOND):
        for start, end, value in json_objects(text):
            name_keys = [k for k, v in value.items() if v == NAME]
            args_keys = [k for k, v in value.items() if v == args]
            if len(value) == 2 and name_keys and args_keys:
                spans.append(Span(start, end))
                keys = {"encoding": "keyed_json", "name_key": name_keys[0], "arguments_key": args_keys[0]}
                break
    return (spans, keys) if len(spans) == 2 else None


def name_json_spans(text: str) -> tuple[list[Span], dict[str, Any]] | None:
    spans, seps = [], []
    for args in (FIRST, SECOND):
        found = [(start, end) for start, end, value in json_objects(text) if value == args]
        if not found:
            return None
        start, end = found[0]
        name_at = text.rfind(NAME, 0, start)
        sep = text[name_at + len(NAME): start] if name_at >= 0 else "\n" * 99
        if len(sep) > 16 or (sep.strip() and any(c.isspace() for c in sep.strip())):
            return None
        spans.append(Span(name_at, end))
        seps.append(sep)
    if seps[0] != seps[1]:
        return None
    return spans, {"encoding": "name_json", "name_sep": seps[0]}


def xml_spans(text: str) -> tuple[list[Span], dict[str, Any]] | None:
    spans, parts = [], []
    pos = 0
    for args in (FIRST, SECOND):
        name_at = text.find(NAME, pos)
        if name_at < 0:
            return None
        at, pieces = name_at + len(NAME), []
        for word in ("city", str(args["city"]), "days", str(args["days"])):
            found = text.find(word, at)
            if found < 0:
                return None
            pieces.append(text[at:found])
            at = found + len(word)
        spans.append(Span(name_at, at))
        parts.append(pieces)
        pos = at
    # pieces: name..city, city..Oslo (key close), Oslo..days (value close + key open), days..3 (key close)
    (lead, key_close, middle, key_close2) = parts[0]
    if parts[1] != parts[0] or key_close != key_close2 or not key_close.strip():
        return None
    split = next((at for at in range(1, len(middle)) if lead.endswith(middle[at:])
                  and (middle[at - 1] in CLOSERS or middle[at - 1].isspace())), None)
    if split is None:
        return None
    key_open, value_close = middle[split:], middle[:split]
    name_close = lead[: len(lead) - len(key_open)]
    if not key_open.strip() or not value_close.strip():
        return None
    newlines = key_close.endswith("\n") and value_close.startswith("\n")
    return spans, {"encoding": "xml", "name_close": name_close.strip(), "key_open": key_open.strip(),
                   "key_close": key_close.strip(), "value_close": value_close.strip(), "value_newlines": newlines}


# -- what frames the calls: prefix, suffix, section ------------------------------------------------------------

def frame(text: str, plain: str, spans: list[Span], fields: dict[str, Any]) -> DerivedMarkup | None:
    first, second = spans
    before, between, after = text[: first.start], text[first.end: second.start], text[second.end:]
    suffix = trim_to_close(common_prefix(between, after))
    rest = between[len(suffix):].lstrip()
    separator = rest[:1] if rest[:1] in SEPARATORS else ""
    prefix = rest[len(separator):].lstrip()
    if fields["encoding"] == "xml":
        # The calls' values close before the suffix: the suffix is what closes the call after that.
        if not suffix.lstrip().startswith(fields["value_close"]):
            return None
        suffix = suffix.lstrip()[len(fields["value_close"]):].strip()
    if not prefix.strip() or not before.endswith(prefix):
        return None
    answer_at = plain.find(ANSWER)
    lead, trail = plain[:answer_at], plain[answer_at + len(ANSWER):]
    section_start = before[len(common_prefix(before, lead)): len(before) - len(prefix)].strip()
    section_end = section_closing(after_suffix(after, fields, suffix), trail) if section_start else ""
    if section_end is None or (separator and not section_start):
        return None
    return DerivedMarkup(prefix=prefix, suffix=suffix, section_start=section_start, section_end=section_end,
                         separator=separator, **fields)


def after_suffix(after: str, fields: dict[str, Any], suffix: str) -> str:
    """What follows the last call's close."""
    rest = after.lstrip()
    if fields["encoding"] == "xml":
        rest = rest.removeprefix(fields["value_close"]).lstrip()
    return rest.removeprefix(suffix)


def section_closing(rest: str, trail: str) -> str | None:
    """The section's end: what follows the last call before the turn's end (the first markup a plain answer is
    followed by), else the markup tokens right after the last call; None if there are none."""
    rest, trail = rest.lstrip(), trail.lstrip()
    turn_end = first_token(trail)
    if not turn_end:
        return rest.strip() if rest.strip() and len(rest.strip()) <= 40 else ""
    at = rest.find(turn_end)
    if at >= 0:
        return rest[:at].strip()
    # The turn goes on after the calls (Apertus writes the results into the assistant's turn): the section ends
    # with the run of markup tokens that follows the last call.
    end = ""
    while (token := first_token(rest[len(end):])) and token[-1] in CLOSERS:
        end += token
    return end.strip() or None


def first_token(text: str) -> str:
    """The first markup token of `text`: up to a closer, or to whitespace."""
    for at, char in enumerate(text):
        if char in CLOSERS:
            return text[: at + 1]
        if char.isspace():
            return text[:at]
    return text


def common_prefix(a: str, b: str) -> str:
    size = 0
    while size < min(len(a), len(b)) and a[size] == b[size]:
        size += 1
    return a[:size]



def trim_to_close(text: str) -> str:
    """`text` cut back to its last whole markup token (ending in a closer)."""
    text = text.rstrip()
    while text and text[-1] not in CLOSERS:
        text = text[:-1].rstrip()
    return text


def reads_back(markup: DerivedMarkup, text: str) -> bool:
    """Whether the parser built from `markup` reads exactly the two probe calls from the rendering."""
    try:
        parser = derived_parser_class(markup)([SPEC])
        events = parser.feed([Text(text)]) + parser.finish()
    except Exception as exc:  # a derivation that trips its own parser is no derivation
        log.debug("derived markup %s does not read its probe: %s", markup.describe(), exc)
        return False
    names = [e.name for e in events if isinstance(e, ToolCallStart)]
    arguments: dict[int, str] = {}
    for event in events:
        if isinstance(event, ToolCallArgs):
            arguments[event.index] = arguments.get(event.index, "") + event.text
    try:
        return names == [NAME, NAME] and [json.loads(arguments[i]) for i in (0, 1)] == [FIRST, SECOND]
    except (ValueError, KeyError):
        return False
