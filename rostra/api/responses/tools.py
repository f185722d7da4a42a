"""The tools a Responses request offers, typed: one model per tool `type`, joined in one discriminated union.

Adding a tool type is adding its model here (how the response echoes it, what the chat template sees of it) and
naming it in `Tool`. MCP tools are routed by rostra/api/responses/mcp/tools.py: their tools are listed from the
server, so they add nothing to the chat request here. The tools a client runs reach the model as functions
(calls.py says how their calls become items); hosted tools rostra does not run are never offered (`HostedTool`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter

from rostra.api.responses.calls import LOCAL_SHELL, LOCAL_SHELL_PARAMETERS, Route, custom_parameters
from rostra.api.responses.typed import Tagged, members_by_tag, parse_tagged

REDACTED = "<redacted>"


class RequestTool(Tagged):
    def echo(self) -> dict[str, Any]:
        """The tool as the response object lists it (and the store keeps it)."""
        return self.stored()

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        """The functions the model is offered for this tool: what each stands for, and its Chat Completions
        `function` (its name is given by to_chat.offer, which keeps names unique); none if rostra routes the tool
        itself (MCP) or cannot run it (hosted tools)."""
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

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        function = {key: value for key, value in self.stored().items()
                    if key in ("name", "description", "parameters", "strict")}
        return [(Route("function", self.name), function)]


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


class NamespaceTool(RequestTool):
    """A group of function tools (Codex's multi_agent_v1): each is offered; a call names its namespace."""

    requirement = "a namespace tool needs a name and tools (function tools)"
    type: Literal["namespace"]
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    tools: list[FunctionTool]

    def echo(self) -> dict[str, Any]:
        return {**self.stored(), "tools": [tool.echo() for tool in self.tools]}

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        return [(Route("function", tool.name, self.name), function)
                for tool in self.tools for _, function in tool.offered()]


class CustomTool(RequestTool):
    """A tool of freeform input (Codex's apply_patch), with a grammar (Lark or regex) or none."""

    requirement = "a custom tool needs a name (and a format: text, or a grammar with syntax and definition)"
    field_messages = {"name": "a custom tool needs a name"}
    type: Literal["custom"]
    name: Annotated[str, Field(min_length=1)]
    description: str | None = None
    format: dict[str, Any] | None = None

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        return [(Route("custom", self.name), {"name": self.name, "description": self.description or "",
                                              "parameters": custom_parameters(self.format)})]

    def grammar(self) -> dict[str, str] | None:
        """The guided_* field that constrains a forced call's input to the tool's grammar: Lark through
        llguidance (which reads Lark; llama.cpp and transformers use it), a regex as guided_regex. None
        without a grammar."""
        spec = self.format or {}
        definition = spec.get("definition")
        if spec.get("type") != "grammar" or not isinstance(definition, str) or not definition.strip():
            return None
        if spec.get("syntax") == "regex":
            return {"guided_regex": definition}
        return {"guided_grammar": "%llguidance {}\n" + definition}


class LocalShellTool(RequestTool):
    requirement = "a local_shell tool has no other field"
    type: Literal["local_shell"]

    def offered(self) -> list[tuple[Route, dict[str, Any]]]:
        return [(Route("local_shell", LOCAL_SHELL), {
            "name": LOCAL_SHELL, "description": "Run a command on the user's machine and read its output.",
            "parameters": LOCAL_SHELL_PARAMETERS})]


class HostedTool(RequestTool):
    """A tool OpenAI runs on its own servers (web search, image generation...). rostra runs none of them: such a
    tool is never offered to the model (a model told it can search would call a search nobody runs); the
    response lists it in `ignored_tools` and the log says so. Codex sends web_search (and tool_search) by
    default, so refusing them would refuse Codex."""

    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
                  "image_generation", "file_search", "code_interpreter", "computer_use_preview", "computer",
                  "computer_use", "tool_search"]


Tool = Annotated[Union[FunctionTool, McpTool, NamespaceTool, CustomTool, LocalShellTool, HostedTool],
                 Field(discriminator="type")]
_ADAPTER: TypeAdapter[Tool] = TypeAdapter(Tool)
TOOL_KINDS = members_by_tag(Tool)


def parse_tools(raw: list[Any] | None) -> list[Tool]:
    return [parse_tagged(_ADAPTER, TOOL_KINDS, tool, f"tools[{index}]", "tool") for index, tool in enumerate(raw or [])]


IGNORED = "a hosted tool this server does not run"


def ignored_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """The tools never offered to the model, as the response's `ignored_tools` lists them (README, "Tool types")."""
    return [{"index": index, "type": tool.type, "reason": IGNORED}
            for index, tool in enumerate(tools) if isinstance(tool, HostedTool)]
