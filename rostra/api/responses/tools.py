"""The tools a Responses request offers, typed: one model per tool `type`, joined in one discriminated union.

Adding a tool type is adding its model here (how the response echoes it, what the chat template sees of it) and
naming it in `Tool`. MCP tools are routed by rostra/api/responses/mcp/tools.py: their tools are listed from the
server, so they add nothing to the chat request here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from rostra.api.responses.typed import Tagged, members_by_tag, parse_tagged

REDACTED = "<redacted>"


class RequestTool(Tagged):
    def echo(self) -> dict[str, Any]:
        """The tool as the response object lists it (and the store keeps it)."""
        return self.stored()

    def chat_tools(self) -> list[dict[str, Any]]:
        """The tool as the chat template sees it (Chat Completions' shape); none if rostra routes it itself."""
        return []


class FunctionTool(RequestTool):
    requirement = "a function tool needs a name (and parameters as a JSON schema object)"
    field_messages = {"name": "a function tool needs a name"}
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    def echo(self) -> dict[str, Any]:
        # strict and parameters are always present in a response's function tools
        return {**self.stored(), "parameters": self.parameters or {"type": "object", "properties": {}},
                "strict": bool(self.strict)}

    def chat_tools(self) -> list[dict[str, Any]]:
        function = {key: value for key, value in self.stored().items()
                    if key in ("name", "description", "parameters", "strict")}
        return [{"type": "function", "function": function}]


class McpTool(RequestTool):
    requirement = "an mcp tool needs a server_label, and a server_url or a configured tool server"
    field_messages = {"server_label": "an mcp tool needs a server_label",
                      "server_url": "server_url must be the URL of an MCP server",
                      "headers": "headers must map names to strings",
                      "authorization": "authorization must be a string (the bearer token)"}
    type: Literal["mcp"]
    server_label: Annotated[str, Field(min_length=1)]
    server_url: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None  # a bearer token: sent to the server, never echoed nor stored
    allowed_tools: list[str] | dict[str, Any] | None = None
    require_approval: str | dict[str, Any] | None = None

    def echo(self) -> dict[str, Any]:
        """No header value, no token in clear."""
        out = {key: value for key, value in self.stored().items() if key != "authorization"}
        if isinstance(out.get("headers"), dict):
            out["headers"] = {name: REDACTED for name in out["headers"]}
        return out

    def request_headers(self) -> dict[str, str]:
        headers = dict(self.headers or {})
        if self.authorization is not None:
            headers["Authorization"] = f"Bearer {self.authorization}"
        return headers


Tool = Annotated[Union[FunctionTool, McpTool], Field(discriminator="type")]
_ADAPTER: TypeAdapter[Tool] = TypeAdapter(Tool)
TOOL_KINDS = members_by_tag(Tool)


def parse_tools(raw: list[Any] | None) -> list[Tool]:
    return [parse_tagged(_ADAPTER, TOOL_KINDS, tool, f"tools[{index}]", "tool") for index, tool in enumerate(raw or [])]
