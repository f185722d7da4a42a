"""Which tool-call and reasoning parsers a model speaks, read from what its chat template renders.

A marker in the template's source can fool: GLM's template contains `<tool_call>` (it is not hermes), Seed-OSS's
contains `<function=` (it is not qwen3_coder). So the template renders a probe conversation (a user message,
an assistant turn that thinks and calls a probe tool with known arguments, the tool's result) and each
registered tool parser reads the assistant's part of the rendering: the parser that recovers exactly the probe
call is the model's. The family's reasoning parser (the tool parser's `reasoning`) goes with it when the
template writes the probe's thinking between that parser's markers.

Where no parser reads the probe back, or only the lenient `json` one does (it would leave the template's markup in
the content), the call markup is derived from what the template renders (parsing/derive.py) and a parser built
from it (tools/derived.py). Where that fails too (the template cannot render a call, or fails on the probe) the
markers in the source decide, most specific first (tools.detect_tool_parser), and then the lenient `json` parser.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from rostra.parsing.derive import derive_markup
from rostra.parsing.events import Text, ToolCallArgs, ToolCallStart
from rostra.parsing.reasoning import reasoning_parser_class
from rostra.parsing.tools import _TEMPLATE_MARKERS, REGISTRY, detect_tool_parser, tool_parser_class
from rostra.parsing.tools.base import ToolSpec
from rostra.parsing.tools.derived import DerivedMarkup

log = logging.getLogger("rostra.server")

# Renders messages with these tools into prompt text, with the generation prompt or not.
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]], bool], str]

PROBE_NAME = "get_weather"  # a plain name: templates that check or rewrite names leave it alone
PROBE_ARGUMENTS = {"city": "Oslo", "days": 3}
PROBE_TOOL = {"type": "function", "function": {
    "name": PROBE_NAME, "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
PROBE_SPEC = ToolSpec(PROBE_NAME, PROBE_TOOL["function"]["parameters"])  # type: ignore[index]
USER_TEXT = "What is the weather in Oslo? (probe 7f3a)"
RESULT_TEXT = "Sunny, 21 degrees (probe 9c1e)"
THOUGHT_TEXT = "The user wants the weather (probe 5b2d)."
# Call ids as the families write them: nine letters and digits (Mistral's templates insist), and Kimi K2's
# `functions.NAME:IDX` (its template writes the id where the name goes).
CALL_IDS = ("call0abc1", f"functions.{PROBE_NAME}:0")
# Generic recognisers last: a format's own parser wins where both read the probe.
GENERIC = ("llama3_json", "pythonic", "json")


@dataclass(frozen=True)
class Dialect:
    tool_parser: str
    reasoning_parser: str | None
    reason: str  # why: for the log line and /v1/models
    derived: DerivedMarkup | None = None  # tool_parser "derived": the markup its parser is built from


def probe_messages(call_id: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": PROBE_NAME, "arguments": dict(PROBE_ARGUMENTS)}}
    return [{"role": "user", "content": USER_TEXT},
            {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_content": THOUGHT_TEXT},
            {"role": "tool", "tool_call_id": call_id, "name": PROBE_NAME, "content": RESULT_TEXT}]


@dataclass(frozen=True)
class ProbeRendering:
    output: str  # what the model would have written: after the generation prompt, up to the tool's result
    turn: str  # from the end of the user's message to the tool's result (the generation prompt included)


def render_probe(render: Render, call_id: str) -> ProbeRendering | None:
    """The probe conversation as the template writes it; None: it cannot."""
    try:
        text = render(probe_messages(call_id), [PROBE_TOOL], False)
        prompt = render(probe_messages(call_id)[:1], [PROBE_TOOL], True)
    except Exception as exc:  # a template may refuse the probe any way it likes: then markers decide
        log.debug("the chat template cannot render the tool-call probe: %s", exc)
        return None
    start, end = text.find(USER_TEXT), text.rfind(RESULT_TEXT)
    if start < 0 or end < start:
        return None
    turn = text[start + len(USER_TEXT): end]
    # The model's own output follows the generation prompt; a template whose history does not extend its prompt
    # (one that rewrites earlier turns) gives the whole turn.
    output = text[len(prompt): end] if text.startswith(prompt) and len(prompt) <= end else turn
    return ProbeRendering(output, turn)


def reads_probe(parser_name: str, text: str) -> bool:
    """Whether the parser recovers exactly the probe call from `text`."""
    try:
        parser = tool_parser_class(parser_name)([PROBE_SPEC])
        events = parser.feed([Text(text)]) + parser.finish()
    except Exception as exc:  # a parser that trips on foreign markup simply does not read it
        log.debug("tool-call parser %s failed on the probe: %s", parser_name, exc)
        return False
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    arguments = "".join(e.text for e in events if isinstance(e, ToolCallArgs))
    try:
        return [e.name for e in starts] == [PROBE_NAME] and json.loads(arguments) == PROBE_ARGUMENTS
    except ValueError:
        return False


def marker_length(parser_name: str, text: str) -> int:
    """How specific the parser's own markup in `text` is: the longest of its markers there (0: none)."""
    markers = [marker for marker, name in _TEMPLATE_MARKERS if name == parser_name]
    start = getattr(tool_parser_class(parser_name), "start", None)
    markers += [start] if isinstance(start, str) else []
    return max((len(marker) for marker in markers if marker and marker in text), default=0)


def family_length(parser_name: str, source: str) -> int:
    """How much of the parser's family turn markup (ToolParser.family_markers) the template's source has."""
    return sum(len(marker) for marker in tool_parser_class(parser_name).family_markers if marker in source)


def probed_tool_parser(render: Render, source: str = "") -> tuple[str, ProbeRendering] | None:
    """The parser that reads the probe call back, and the rendering it read; None if none does. Where several
    do (a lenient parser also reads another's markup), the one whose family's turn markup the template has wins
    (Jamba's and Hunyuan's calls read alike), then the one whose own markers the rendering shows, then
    the one whose markers the template's source shows (a bare JSON list is Granite's and xLAM's alike: xLAM's
    template says "make calls in a single JSON array"), then a format's parser over the generic recognisers."""
    order = sorted(name for name in REGISTRY if name not in GENERIC and tool_parser_class(name).probed)
    order += [name for name in GENERIC if name in REGISTRY]
    for call_id in CALL_IDS:
        rendering = render_probe(render, call_id)
        if rendering is None:
            continue
        readers = [name for name in order if reads_probe(name, rendering.output)]
        if readers:
            best = max(readers, key=lambda name: (family_length(name, source), marker_length(name, rendering.output),
                                                  marker_length(name, source), -order.index(name)))
            return best, rendering
    return None


def family_reasoning(tool_parser: str, rendering: ProbeRendering | None, source: str) -> str | None:
    """The reasoning parser of the tool parser's family, where the template shows its markers: around the probe's
    thinking when the template renders it, else anywhere in the template."""
    name = tool_parser_class(tool_parser).reasoning
    if name is None:
        return None
    parser = reasoning_parser_class(name)
    start, end = getattr(parser, "start", None), getattr(parser, "end", None)
    if not (isinstance(start, str) and isinstance(end, str)):
        return None
    if rendering is not None and THOUGHT_TEXT in rendering.turn:
        before, _, after = rendering.turn.partition(THOUGHT_TEXT)
        return name if start in before and end in after else None
    return name if start in source else None


def detect_dialect(render: Render, source: str) -> Dialect:
    """The parsers the template speaks, and why."""
    probed = probed_tool_parser(render, source)
    marked = detect_tool_parser(source)
    if probed is not None and probed[0] in GENERIC and marked not in (probed[0], "json"):
        # Only a generic recogniser reads the history's calls, and the template teaches a format of its own (vLLM's
        # Phi-4-mini template writes past calls as bare JSON and asks for functools[…]): the format it teaches.
        tool_parser, rendering = marked, None
        reason = f"only {probed[0]} reads the chat template's probe tool call; its markup names {marked}"
    elif (markup := derive_markup(render) if probed is None or probed[0] == "json" else None) is not None:
        return Dialect("derived", None, f"derived from the template: its calls are written {markup.describe()}",
                       derived=markup)
    elif probed is not None:
        tool_parser, rendering = probed
        reason = f"the chat template renders a probe tool call that {tool_parser} reads back"
    else:
        tool_parser, rendering = detect_tool_parser(source), None
        reason = ("no parser reads the chat template's probe tool call; " +
                  (f"its markup names {tool_parser}" if tool_parser != "json" else "the lenient json parser"))
    reasoning = family_reasoning(tool_parser, rendering, source)
    if reasoning:
        reason += f"; it writes {tool_parser}'s thinking markers, so reasoning parser {reasoning}"
    return Dialect(tool_parser, reasoning, reason)
