"""The tools a client runs besides plain functions, between the Responses API and a model that only knows functions.

Every model rostra serves calls tools in its chat template's function format, so each client-run tool is offered
to it as a function, and the model's call is turned into the item OpenAI's clients expect for that tool (and, when
the client sends the item back, into a function call in the chat history again):

- `namespace` (a group of functions, e.g. Codex's multi_agent_v1): its functions are offered under their own names
  (`namespace.name` only where two names would clash); a call is a `function_call` item with the bare `name` and
  the `namespace`, as OpenAI's items carry them.
- `custom` (freeform input, e.g. Codex's apply_patch): offered as a function of one string argument, `input`, whose
  description carries the tool's grammar when it has one; a call is a `custom_tool_call` item with that `input`.
- `local_shell`: offered as a function `local_shell` taking the `exec` action's fields; a call is a
  `local_shell_call` item with that action.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["function", "custom", "local_shell"]
LOCAL_SHELL = "local_shell"

LOCAL_SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "description": "The command and its arguments"},
        "working_directory": {"type": "string"},
        "timeout_ms": {"type": "integer"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["command"],
}


def custom_parameters(tool_format: dict[str, Any] | None) -> dict[str, Any]:
    """A custom tool's input as a function's one string argument; its grammar, if any, is told to the model."""
    description = "The tool's input, as free text (not JSON)."
    if isinstance(tool_format, dict) and tool_format.get("type") == "grammar":
        description += (f" It must match this {tool_format.get('syntax', 'lark')} grammar:\n"
                        f"{tool_format.get('definition', '')}")
    return {"type": "object", "properties": {"input": {"type": "string", "description": description}},
            "required": ["input"]}


@dataclass(frozen=True)
class Route:
    """What a function the model sees stands for."""

    kind: Kind
    name: str  # the tool's own name
    namespace: str | None = None


class ToolRoutes:
    """The functions offered to the model, by the name the model calls them by."""

    def __init__(self) -> None:
        self.by_model_name: dict[str, Route] = {}

    def add(self, route: Route, taken: set[str]) -> str:
        """Give `route` a name the model calls it by: its own, else (clashing with one of `taken`, the names of
        every tool offered) qualified by its namespace."""
        name = route.name
        if route.namespace is not None and (name in taken or name in self.by_model_name):
            name = f"{route.namespace}.{route.name}"
        self.by_model_name[name] = route
        return name

    def route(self, model_name: str) -> Route | None:
        return self.by_model_name.get(model_name)

    def model_name(self, name: str, namespace: str | None = None) -> str:
        """The name the model knows a tool by (for calls in the history)."""
        for model_name, route in self.by_model_name.items():
            if route.name == name and route.namespace == namespace:
                return model_name
        return name if namespace is None or namespace == "functions" else f"{namespace}.{name}"


def call_item(route: Route | None, call_id: str, arguments: str) -> dict[str, Any]:
    """The output item of one finished call (without id and status), by what the function stands for."""
    if route is not None and route.kind == "custom":
        return {"type": "custom_tool_call", "call_id": call_id, "name": route.name, "input": custom_input(arguments)}
    if route is not None and route.kind == "local_shell":
        return {"type": "local_shell_call", "call_id": call_id, "action": shell_action(arguments)}
    item = {"type": "function_call", "call_id": call_id, "name": route.name if route else "", "arguments": arguments}
    if route is not None and route.namespace is not None:
        item["namespace"] = route.namespace
    return item


def custom_input(arguments: str) -> str:
    """The freeform input of a custom tool's call: its `input` argument (else the arguments as written)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    text = value.get("input") if isinstance(value, dict) else None
    return text if isinstance(text, str) else arguments


def shell_action(arguments: str) -> dict[str, Any]:
    """A local_shell call's `exec` action, from the arguments the model wrote."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = {}
    value = value if isinstance(value, dict) else {}
    command = value.get("command")
    if isinstance(command, str):
        command = ["bash", "-lc", command]
    env = value.get("env")
    return {"type": "exec", "command": [str(part) for part in command] if isinstance(command, list) else [],
            "env": {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
            "timeout_ms": value.get("timeout_ms") if isinstance(value.get("timeout_ms"), int) else None,
            "user": None,
            "working_directory": value.get("working_directory") if isinstance(value.get("working_directory"),
                                                                               str) else None}


def chat_call(item: dict[str, Any], routes: ToolRoutes) -> dict[str, Any] | None:
    """A call item of the conversation as the chat history's tool call; None for items that are not calls."""
    kind = item.get("type")
    if kind == "function_call":
        name, arguments = routes.model_name(item["name"], item.get("namespace")), item["arguments"]
    elif kind == "custom_tool_call":
        name, arguments = routes.model_name(item["name"], item.get("namespace")), json.dumps({"input": item["input"]})
    elif kind == "local_shell_call":
        action = {key: value for key, value in (item.get("action") or {}).items() if key != "type" and value}
        name, arguments = routes.model_name(LOCAL_SHELL), json.dumps(action)
    else:
        return None
    return {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": arguments}}


CALL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def output_text(output: Any) -> str:
    """A call's output as the tool message's text: a string as it is, content parts' text joined, else JSON."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(part, dict) for part in output):
        texts = [part["text"] for part in output if isinstance(part.get("text"), str)]
        if len(texts) == len(output):
            return "".join(texts)
    return json.dumps(output)


def orphan_output(items: list[dict[str, Any]], conversation: list[dict[str, Any]]) -> str | None:
    """The call_id of the first of the request's `items` that is a function_call_output no call of the
    `conversation` (the stored history, then the items) made, as OpenAI refuses it; None when each has its call.
    Stateless clients send the call beside its output, so the items' own calls count. An output after a
    compaction item is let be: the call it answers may be in the summary."""
    made: set[str] = set()
    for item in conversation:
        if item.get("type") == "compaction":
            return None
        if item.get("type") in ("function_call", "custom_tool_call", "local_shell_call") and item.get("call_id"):
            made.add(str(item["call_id"]))
    for item in items:
        if item.get("type") == "function_call_output" and str(item.get("call_id")) not in made:
            return str(item.get("call_id"))
    return None
