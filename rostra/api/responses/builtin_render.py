"""The items and events of hosted tools rostra runs (builtin_tools.py), rendered by a part the McpRenderer holds.

A call to `web_search` (or gpt-oss's `browser.*`) is a `web_search_call` item: output_item.added,
response.web_search_call.in_progress, then, once its arguments are whole, .searching; once the tool server has
answered, .completed and output_item.done with the action it took. A call to `code_interpreter` (gpt-oss's
`python`) is a `code_interpreter_call` item: output_item.added, response.code_interpreter_call.in_progress, the code
(response.code_interpreter_call_code.delta/.done) once it is whole, .interpreting, then .completed and
output_item.done with the logs it printed. A call to `file_search` (file_search.py) is a `file_search_call` item:
output_item.added, response.file_search_call.in_progress, .searching once its query is whole, then .completed
and output_item.done with its queries (and its results, when `include` asks for file_search_call.results). A
call the server failed is `failed` (its error is what the model reads).

The results are what the model reads in its next turn; OpenAI's items have no field for a search's results, so
they are kept here, by item id, for the rest of the response (`replayable`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rostra.api.responses.builtin_tools import HostedRoute
from rostra.api.responses.file_search import FileSearchResult, citations
from rostra.api.responses.mcp.client import CallResult, error_text
from rostra.api.responses.objects import new_id, snapshot
from rostra.parsing.events import ToolCallStart

if TYPE_CHECKING:
    from rostra.api.responses.mcp.render import OutputWriter

HOSTED_ITEM_TYPES = frozenset({"web_search_call", "code_interpreter_call", "file_search_call"})


@dataclass
class Invocation:
    """What the model called for one hosted item: the name it called, its arguments, and (once run) the result."""

    name: str
    arguments: str = ""
    result: str | None = None
    found: list[dict[str, Any]] | None = None  # file_search: the passages found


class HostedRenderer:
    def __init__(self, writer: OutputWriter):
        self.writer = writer
        self.routes: dict[str, HostedRoute] = {}  # by the name the model calls
        self.invocations: dict[str, Invocation] = {}  # by item id
        self.include_results = False  # include: ["file_search_call.results"]

    def open(self, event: ToolCallStart) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        route = self.routes[event.name]
        if route.kind == "web_search":
            item: dict[str, Any] = {"id": new_id("ws"), "type": "web_search_call", "status": "in_progress",
                                    "action": {"type": "search"}}
        elif route.kind == "file_search":
            item = {"id": new_id("fs"), "type": "file_search_call", "status": "in_progress", "queries": [],
                    "results": None}
        else:
            item = {"id": new_id("ci"), "type": "code_interpreter_call", "status": "in_progress",
                    "container_id": route.container_id, "code": "", "outputs": None}
        self.invocations[item["id"]] = Invocation(event.name)
        out = self.writer.open_item(item)
        return item, out + [self._event(item, "in_progress")]

    def arguments(self, item: dict[str, Any], text: str) -> None:
        self.invocations[item["id"]].arguments += text

    def close(self, item: dict[str, Any], status: str) -> tuple[list[dict[str, Any]], bool]:
        """The events of a call whose arguments are whole, and whether it is to be run (not when cut off)."""
        invocation = self.invocations[item["id"]]
        arguments = _arguments(invocation.arguments)
        out: list[dict[str, Any]] = []
        if item["type"] == "web_search_call":
            item["action"] = _action(invocation.name, arguments)
            if status == "completed":
                item["status"] = "searching"
                out.append(self._event(item, "searching"))
        elif item["type"] == "file_search_call":
            query = arguments.get("query")
            item["queries"] = [query] if isinstance(query, str) else []
            if status == "completed":
                item["status"] = "searching"
                out.append(self._event(item, "searching"))
        else:
            code = arguments.get("code")
            item["code"] = code if isinstance(code, str) else invocation.arguments
            index = self._index(item)
            out += [self.writer.event("response.code_interpreter_call_code.delta", item_id=item["id"],
                                      output_index=index, delta=item["code"]),
                    self.writer.event("response.code_interpreter_call_code.done", item_id=item["id"],
                                      output_index=index, code=item["code"])]
            if status == "completed":
                item["status"] = "interpreting"
                out.append(self._event(item, "interpreting"))
        if status != "completed":  # the response ended before the call could run
            item["status"] = "incomplete" if item["type"] == "code_interpreter_call" else "failed"
            out.append(self.writer.event("response.output_item.done", output_index=self._index(item),
                                         item=snapshot(item)))
        return out, status == "completed"

    def call_done(self, item: dict[str, Any], result: CallResult) -> list[dict[str, Any]]:
        text = result.output if result.error is None else error_text(result.error)
        self.invocations[item["id"]].result = text or ""
        if item["type"] == "code_interpreter_call":
            item["outputs"] = [{"type": "logs", "logs": text or ""}]
        if isinstance(result, FileSearchResult):
            self.invocations[item["id"]].found = result.results
            if self.include_results:
                item["results"] = result.results
        item["status"] = "failed" if result.error else "completed"
        out = [] if result.error else [self._event(item, "completed")]
        return out + [self.writer.event("response.output_item.done", output_index=self._index(item),
                                        item=snapshot(item))]

    def citations(self, text: str) -> list[dict[str, Any]]:
        """The file_citation annotations of an answer written after file searches (none without)."""
        found = [result for invocation in self.invocations.values() for result in invocation.found or []]
        return citations(text, found) if found else []

    def replayable(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items as the model's next turn reads them: each hosted call it made as a function call and the
        result it gave."""
        out = []
        for item in items:
            invocation = self.invocations.get(item.get("id", ""))
            if invocation is None or item.get("type") not in HOSTED_ITEM_TYPES:
                out.append(item)
                continue
            out += [{"type": "function_call", "call_id": item["id"], "name": invocation.name,
                     "arguments": invocation.arguments or "{}"},
                    {"type": "function_call_output", "call_id": item["id"],
                     "output": invocation.result if invocation.result is not None else "Error: not run"}]
        return out

    def _event(self, item: dict[str, Any], stage: str) -> dict[str, Any]:
        return self.writer.event(f"response.{item['type']}.{stage}", item_id=item["id"], output_index=self._index(item))

    def _index(self, item: dict[str, Any]) -> int:
        output: list[dict[str, Any]] = self.writer.response.output
        return output.index(item)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _action(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a web search call did, as OpenAI's items say it: a search, or opening a page."""
    if name.endswith("open"):
        target = arguments.get("id")
        return {"type": "open_page", "url": target if isinstance(target, str) else None}
    query = arguments.get("query") if not name.endswith("find") else arguments.get("pattern")
    return {"type": "search", "query": str(query or ""), "queries": [str(query or "")]}
