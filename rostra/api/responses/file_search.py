"""The hosted `file_search` tool: the request's vector stores searched by rostra itself (the vector stores API's
searcher, given to the Responses service by the composition root as a `FileSearcher`), run in the server-side tool
loop the way web_search runs on a tool server (builtin_tools.py).

The model is offered a function `file_search(query)`; each call is a `file_search_call` item (its events:
rendered by builtin_render.py) whose results (with `include: ["file_search_call.results"]`) are the passages
found. The model reads them as sources tagged with their file names; the answer's `output_text` carries a
`file_citation` annotation for each file it names, at the end of the mention (or, when it names none, for each
file the search found, at the end of the text).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rostra.api.responses.calls import Route
from rostra.api.responses.builtin_tools import HostedRoute, ServedHostedTool
from rostra.api.responses.mcp.client import CallResult
from rostra.api.responses.tools import HostedTool, Tool
from rostra.store.tenancy import Tenant

FUNCTION = "file_search"
_PARAMETERS = {"type": "object", "properties": {"query": {"type": "string", "description": "What to look for"}},
               "required": ["query"]}
_DESCRIPTION = ("Search the user's uploaded files. Returns the most relevant passages, each tagged with its file "
                "name; name the file in square brackets, like [notes.md], where you use a passage.")
# The passages of one search, as the item's `results` shows them: file_id, filename, score, text, attributes.
SearchRun = Callable[[list[str]], Awaitable[list[dict[str, Any]]]]


class FileSearcher(Protocol):
    async def file_search_run(self, tool: dict[str, Any], tenant: Tenant, param: str) -> SearchRun:
        """The search a `file_search` tool stands for (its stores visible to `tenant`, its options checked: a
        4xx naming `param`'s fields otherwise)."""


@dataclass
class FileSearchResult(CallResult):
    results: list[dict[str, Any]] = field(default_factory=list)


async def serve_file_search(tools: list[Tool], searcher: FileSearcher | None, tenant: Tenant
                            ) -> tuple[list[Tool], dict[str, HostedRoute]]:
    """The request's tools with its (first) file_search tool served, and the route of the function it offers.
    Without a searcher (a server without vector stores) it stays a hosted tool nobody runs (`ignored_tools`)."""
    served: list[Tool] = []
    routes: dict[str, HostedRoute] = {}
    for index, tool in enumerate(tools):
        if searcher is None or routes or not isinstance(tool, HostedTool) or tool.type != "file_search":
            served.append(tool)
            continue
        run = await searcher.file_search_run(tool.stored(), tenant, f"tools[{index}]")
        routes[FUNCTION] = HostedRoute("file_search", None, FUNCTION, search=_called(run))
        replacement = ServedHostedTool.model_validate(tool.stored())
        replacement._functions.append((Route("function", FUNCTION), {
            "name": FUNCTION, "description": _DESCRIPTION, "parameters": _PARAMETERS}))
        served.append(replacement)  # type: ignore[arg-type]  # (a RequestTool outside the parsed union)
    return served, routes


def _called(run: SearchRun) -> Callable[[str], Awaitable[CallResult]]:
    async def call(arguments: str) -> CallResult:
        query = _query(arguments)
        if not query:
            return CallResult(error={"type": "invalid_arguments", "message": "file_search needs a query"})
        results = await run([query])
        return FileSearchResult(output=sources(results), results=results)
    return call


def _query(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments.strip()
    query = value.get("query") if isinstance(value, dict) else None
    return query.strip() if isinstance(query, str) else ""


def sources(results: list[dict[str, Any]]) -> str:
    """The passages as the model reads them."""
    if not results:
        return "No passage of the files matches."
    return "\n\n".join(f"[{result['filename']}] (score {result['score']:.2f})\n{result['text']}" for result in results)


def citations(text: str, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`file_citation` annotations: one per file the answer names (by file name or id), at the end of its first
    mention; none named: each file found, at the end of the text."""
    files: dict[str, str] = {}
    for result in results:
        files.setdefault(result["file_id"], result["filename"])
    cited = []
    for file_id, filename in files.items():
        named = next((name for name in (f"[{filename}]", filename, file_id) if name and name in text), None)
        if named is not None:  # the bracketed name where the model wrote it so, as it was asked to
            cited.append((text.index(named) + len(named), file_id, filename))
    if not cited:
        cited = [(len(text), file_id, filename) for file_id, filename in files.items()]
    return [{"type": "file_citation", "file_id": file_id, "filename": filename, "index": index}
            for index, file_id, filename in sorted(cited)]
