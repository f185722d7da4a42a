"""OpenAI's hosted `web_search` and `code_interpreter` tools, served through MCP servers the operator configures.

`rostra serve --tool-server browser=URL` (or `web_search=URL`) names an MCP server with the tools `search`
(`query`, optional `topn`), and optionally `open` and `find`; `--tool-server python=URL` (or
`code_interpreter=URL`) one with the tool `python` (`code`): the browser and python tools of gpt-oss's reference
tool servers. A request's hosted tool of such a type is then served instead of being listed in `ignored_tools`:

- gpt-oss is offered its own built-in tools (harmony's `browser` and `python`, declared in its system message by
  rostra/prompt/harmony.py, which recognises them by their reserved function names);
- any other model is offered a function, `web_search(query)` or `code_interpreter(code)`.

rostra runs each call on the MCP server and the response shows it as OpenAI's item: a `web_search_call` or a
`code_interpreter_call` (HostedRenderer, builtin_render.py). Chat Completions refuses such tools (serving/tools.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import PrivateAttr

from rostra.api.responses.calls import Route
from rostra.api.responses.mcp.client import CallResult, McpServer
from rostra.api.responses.mcp.tools import McpPolicy
from rostra.api.responses.tools import HostedTool, RequestTool, Tool
from rostra.errors import InvalidRequest
from rostra.prompt.harmony import HarmonyTemplate
from rostra.prompt.harmony_builtin import MARKER
from rostra.serving.chat import ChatService

HostedKind = Literal["web_search", "code_interpreter", "file_search"]
WEB_SEARCH_TYPES = frozenset({"web_search", "web_search_preview", "web_search_preview_2025_03_11",
                              "web_search_2025_08_26"})
# The --tool-server labels that serve each kind, in order of preference.
LABELS: dict[HostedKind, tuple[str, ...]] = {"web_search": ("browser", "web_search"),
                                             "code_interpreter": ("python", "code_interpreter")}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_QUERY = _object({"query": {"type": "string", "description": "What to search the web for"},
                  "topn": {"type": "integer", "description": "How many results (default 10)"}}, ["query"])
_CODE = _object({"code": {"type": "string", "description": "The Python code to run"}}, ["code"])
# name the model calls -> (MCP tool it runs, function offered). gpt-oss knows its own (harmony's names); other
# models get one function per hosted tool.
_HARMONY: dict[HostedKind, dict[str, tuple[str, dict[str, Any]]]] = {
    "web_search": {
        "browser.search": ("search", {"description": "Search the web", "parameters": _QUERY}),
        "browser.open": ("open", {"description": "Open a link of a result page",
                                  "parameters": _object({"id": {"type": ["integer", "string"]},
                                                         "cursor": {"type": "integer"}}, [])}),
        "browser.find": ("find", {"description": "Find a pattern in a page",
                                  "parameters": _object({"pattern": {"type": "string"},
                                                         "cursor": {"type": "integer"}}, ["pattern"])})},
    "code_interpreter": {"python": ("python", {"description": "Run Python code", "parameters": _CODE})}}
_GENERIC: dict[HostedKind, dict[str, tuple[str, dict[str, Any]]]] = {
    "web_search": {"web_search": ("search", {"description": "Search the web; the results come back as text.",
                                             "parameters": _QUERY})},
    "code_interpreter": {"code_interpreter": ("python", {
        "description": "Run Python code in a stateful notebook; its output comes back as text.",
        "parameters": _CODE})}}


@dataclass(frozen=True)
class HostedRoute:
    """A function the model calls that stands for a hosted tool: the MCP server and tool that run it, or the
    search rostra runs itself (file_search: file_search.py)."""

    kind: HostedKind
    server: McpServer | None
    tool: str
    container_id: str = ""  # code_interpreter: what its items name as their container
    search: Callable[[str], Awaitable[CallResult]] | None = None  # file_search: its arguments -> its result


class ServedHostedTool(RequestTool):
    """A hosted tool a tool server serves: echoed as sent, offered to the model as its functions."""

    type: str
    _functions: list[tuple[Route, dict[str, Any]]] = PrivateAttr(default_factory=list)

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        return self._functions


def hosted_kind(tool: Tool) -> HostedKind | None:
    if not isinstance(tool, HostedTool):
        return None
    if tool.type in WEB_SEARCH_TYPES:
        return "web_search"
    if tool.type == "file_search":
        return "file_search"
    return "code_interpreter" if tool.type == "code_interpreter" else None


def serve_hosted_tools(tools: list[Tool], policy: McpPolicy, harmony: bool
                       ) -> tuple[list[Tool], dict[str, HostedRoute]]:
    """The request's tools with each hosted tool a tool server serves made a ServedHostedTool, and the routes of
    the functions they offer (by the name the model calls). Without a tool server for it, a hosted tool stays
    as it was: never offered, listed in `ignored_tools`."""
    served: list[Tool] = []
    routes: dict[str, HostedRoute] = {}
    for index, tool in enumerate(tools):
        kind = hosted_kind(tool)
        if kind == "file_search":  # not a tool server's: served by file_search.py
            kind = None
        label = next((name for name in LABELS[kind] if name in policy.tool_servers), None) if kind else None
        if kind is None or label is None or any(route.kind == kind for route in routes.values()):
            served.append(tool)
            continue
        if kind == "code_interpreter":
            check_container(tool.stored().get("container"), f"tools[{index}].container")
        server = McpServer(label, policy.tool_servers[label], {}, policy.timeout, policy.max_output)
        replacement = ServedHostedTool.model_validate(tool.stored())
        for name, (mcp_tool, function) in ((_HARMONY if harmony else _GENERIC)[kind]).items():
            routes[name] = HostedRoute(kind, server, mcp_tool, f"cntr_{label}" if kind == "code_interpreter" else "")
            marked = {MARKER: True} if harmony else {}  # what the harmony renderer declares as built in
            replacement._functions.append((Route("function", name), {"name": name, **function, **marked}))
        served.append(replacement)  # type: ignore[arg-type]  # (a RequestTool outside the parsed union)
    return served, routes


def check_container(container: Any, param: str) -> None:
    """The code runs in the tool server's own notebook: only an automatic container, with no files, is served."""
    if container is None:
        return
    if isinstance(container, str):
        raise InvalidRequest(f"container {container!r}: this server runs code on its python tool server and has "
                             "no containers to choose from; give {\"type\": \"auto\"}", param=param)
    if not isinstance(container, dict) or container.get("type") != "auto":
        raise InvalidRequest("container must be {\"type\": \"auto\"} (the python tool server's own notebook)",
                             param=param)
    if container.get("file_ids"):
        raise InvalidRequest("container.file_ids: files cannot be mounted in the python tool server's notebook",
                             param=f"{param}.file_ids")
    if container.get("memory_limit") is not None:
        raise InvalidRequest("container.memory_limit: the python tool server sets its own limits",
                             param=f"{param}.memory_limit")


def speaks_harmony_prompts(chat: ChatService) -> bool:
    """Whether the model's prompts are rendered in harmony (gpt-oss): then it is offered its own built-in tools."""
    return isinstance(chat.template, HarmonyTemplate)
