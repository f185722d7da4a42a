"""MCP tools in the Responses API: which servers a request may use, their tools, approvals.

A request's `{"type": "mcp", ...}` tools name MCP servers: by `server_url` (only hosts in
`--mcp-allow`: remote MCP is opt-in) or by the label of a `--tool-server` configured on rostra.
Their tools are listed once per `previous_response_id` chain (a listing already in the
conversation is reused, as OpenAI does), offered to the model beside the function tools, and
the model's calls to them are run by rostra (see loop.py).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from rostra.errors import InvalidRequest
from rostra.api.responses.objects import new_id
from rostra.api.responses.mcp.client import McpServer, list_tools
from rostra.api.responses.tools import McpTool, Tool


@dataclass(frozen=True)
class McpPolicy:
    """What the operator allows (`rostra serve` flags)."""

    allow: tuple[str, ...] = ()  # hosts (or host:port, or *) a request's server_url may name
    tool_servers: dict[str, str] = field(default_factory=dict)  # --tool-server LABEL=URL
    timeout: float = 30.0
    max_output: int = 65536

    def allows(self, url: str) -> bool:
        """Whether a request's server_url may be used: an entry `*`; a host or HOST:PORT (any path, and any port
        for a bare host); or a whole URL, which allows that endpoint and the paths under it only, compared with
        `url` normalized (normalized_url), so a spelling never reaches a path or port the operator did not name."""
        target = normalized_url(url)
        if target is None:
            return False
        scheme, host, port, path = target
        for entry in self.allow:
            if entry == "*":
                return True
            if "://" in entry:
                allowed = normalized_url(entry)
                if allowed is not None and allowed[:3] == (scheme, host, port) and _under(path, allowed[3]):
                    return True
            elif entry.lower() in (host, f"{host}:{port}", f"[{host}]:{port}"):
                return True
        return False


def normalized_url(url: str) -> tuple[str, str, int, str] | None:
    """An http(s) URL as (scheme, host, port, path): scheme and host in lower case, the default port spelled out,
    `%2e` read as the dot it is and dot segments resolved (RFC 3986 5.2.4); None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port out of range, a bad IPv6 literal
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    path = re.sub("%2e", ".", parts.path, flags=re.IGNORECASE)
    segments: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            segments = segments[:-1]
        elif segment != ".":
            segments.append(segment)
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80), "/" + "/".join(segments)


def _under(path: str, allowed: str) -> bool:
    """`path` is `allowed` or below it, at a segment's boundary (/mcp allows /mcp/sse, not /mcpx)."""
    allowed = allowed.rstrip("/")
    return path.rstrip("/") == allowed or path.startswith(allowed + "/")


@dataclass
class McpRoute:
    """One MCP tool the model may call: where it runs and whether a person must approve each call."""

    server: McpServer
    name: str
    needs_approval: bool


@dataclass
class McpTools:
    """A request's MCP tools: the routes by tool name, and the listings this response adds to its output."""

    routes: dict[str, McpRoute] = field(default_factory=dict)
    listings: list[dict[str, Any]] = field(default_factory=list)  # new mcp_list_tools items
    chat_tools: list[dict[str, Any]] = field(default_factory=list)  # the tools as the chat template sees them

    def labels(self) -> dict[str, tuple[str, bool]]:
        """Tool name -> (server label, needs approval): what the response builder needs."""
        return {name: (route.server.label, route.needs_approval) for name, route in self.routes.items()}


def parse_tool_servers(specs: list[str]) -> dict[str, str]:
    """`--tool-server LABEL=URL` (repeatable, or comma-separated) -> {label: url}."""
    servers: dict[str, str] = {}
    for spec in (part.strip() for value in specs for part in value.split(",")):
        label, sep, url = spec.partition("=")
        if not sep or not label or not urlsplit(url).scheme.startswith("http"):
            raise ValueError(f"--tool-server: expected LABEL=URL (an http(s) MCP endpoint), got {spec!r}")
        servers[label] = url
    return servers


def requested_servers(tools: list[Tool], policy: McpPolicy) -> list[tuple[McpServer, McpTool]]:
    """The request's MCP servers and their tool specs; a 400 for one the policy refuses."""
    servers: list[tuple[McpServer, McpTool]] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, McpTool):
            continue
        param = f"tools[{index}]"
        label = tool.server_label
        if any(server.label == label for server, _ in servers):
            raise InvalidRequest(f"server_label {label!r} is used twice", param=f"{param}.server_label")
        url = tool.server_url
        if url is None and label in policy.tool_servers:
            url = policy.tool_servers[label]
        elif url is None:
            raise InvalidRequest(f"no server_url, and no tool server labelled {label!r} is configured "
                                 "(rostra serve --tool-server)", param=f"{param}.server_url")
        elif not policy.allows(url):
            raise InvalidRequest("this server_url's host is not allowed for MCP (the operator allows hosts with "
                                 "rostra serve --mcp-allow)", param=f"{param}.server_url")
        servers.append((McpServer(label, url, tool.request_headers(), policy.timeout, policy.max_output), tool))
    return servers


async def resolve(servers: list[tuple[McpServer, McpTool]], conversation: list[dict[str, Any]],
                  function_names: set[str]) -> McpTools:
    """List each server's tools (or reuse a listing already in the conversation) and route them."""
    cached = {item["server_label"]: item for item in conversation
              if item.get("type") == "mcp_list_tools" and not item.get("error")}
    fresh = [server for server, _ in servers if server.label not in cached]
    listed = await asyncio.gather(*(list_tools(server) for server in fresh))
    result = McpTools()
    for server, (tools, error) in zip(fresh, listed):
        result.listings.append({"id": new_id("mcpl"), "type": "mcp_list_tools", "server_label": server.label,
                                "tools": tools, "error": error})
    listing = {**cached, **{item["server_label"]: item for item in result.listings}}
    for server, spec in servers:
        for tool in listing[server.label]["tools"]:
            if not _matches(spec.allowed_tools, tool, default=True):
                continue
            if tool["name"] in function_names or tool["name"] in result.routes:
                raise InvalidRequest(f"tool name {tool['name']!r} is offered twice (MCP server "
                                     f"{server.label!r} and another tool)", param="tools")
            result.routes[tool["name"]] = McpRoute(server, tool["name"], _needs_approval(spec, tool))
            result.chat_tools.append({"type": "function", "function": {
                "name": tool["name"], "description": tool.get("description") or "",
                "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}})
    return result


def _matches(rule: Any, tool: dict[str, Any], default: bool) -> bool:
    """An allowed_tools / approval filter: a list of names, or {tool_names, read_only}; None: `default`."""
    if rule is None:
        return default
    if isinstance(rule, list):
        return tool["name"] in rule
    if isinstance(rule, dict):
        read_only = bool((tool.get("annotations") or {}).get("readOnlyHint"))
        return tool["name"] in (rule.get("tool_names") or []) or (rule.get("read_only") is True and read_only)
    return default


def _needs_approval(spec: McpTool, tool: dict[str, Any]) -> bool:
    """OpenAI's rule: approval is required unless `require_approval` says `never` for this tool."""
    rule = spec.require_approval
    if rule is None or rule == "always":
        return True
    if rule == "never":
        return False
    if isinstance(rule, dict):
        if _matches(rule.get("never"), tool, default=False):
            return False
        return True
    return True
