"""gpt-oss's prompt in OpenAI's harmony format, rendered by rostra rather than by the model's Jinja template.

    <|start|>system<|message|>identity, knowledge cutoff, date, `Reasoning: high`, built-in tools, channels<|end|>
    <|start|>developer<|message|># Instructions ... # Tools (the request's functions)<|end|>
    <|start|>user<|message|>...<|end|>
    <|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>{...}<|call|>
    <|start|>functions.f to=assistant<|channel|>commentary<|message|>result<|end|>
    <|start|>assistant<|channel|>final<|message|>answer<|end|>
    <|start|>assistant

The chat's system and developer messages become the developer message's instructions (as vLLM does); the
request's `reasoning_effort` (Responses: `reasoning.effort`) the system message's `Reasoning:` line; earlier
thinking (an assistant message's reasoning_content) its analysis message, dropped once a final answer follows
it, as harmony specifies. The text equals what OpenAI's `openai-harmony` library renders for the same
conversation (tests/test_harmony_render.py); rostra does not call the library at serving time because it
downloads its vocabulary from the internet on first use, and rostra's engines tokenize the text themselves.

`HarmonyTemplate` has ChatTemplate's `render` signature, so the chat service renders with either.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from typing import Any, Collection, Iterable

from rostra.errors import InvalidRequest
from rostra.prompt.harmony_builtin import BUILTIN_FUNCTIONS, DECLARATIONS, MARKER, ORDER, BuiltinTool
from rostra.prompt.harmony_schema import function_declaration

IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
KNOWLEDGE_CUTOFF = "2024-06"
CHANNELS = "# Valid channels: analysis, commentary, final. Channel must be included for every message."
FUNCTIONS_CHANNEL = "Calls to these tools must go to the commentary channel: 'functions'."
# The ends of the model's turn that are not `<|end|>`: a tool call waits for its result, an answer is done.
STOP_TEXTS = ("<|call|>", "<|return|>")
# An assistant message's `phase` (OpenAI's label, which rostra gives gpt-oss's messages by their channel) -> its channel.
PHASE_CHANNELS = {"commentary": "commentary", "final_answer": "final"}
# OpenAI's effort names onto the three harmony knows.
EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}


def speaks_harmony(architecture: str, template: str | None) -> bool:
    """gpt-oss, by its checkpoint's architecture (GGUF `gpt-oss`, Hugging Face `gpt_oss`) or its chat template."""
    if architecture.replace("_", "-").lower() == "gpt-oss":
        return True
    markers = ("<|channel|>", "<|message|>", "<|start|>")
    return template is not None and all(marker in template for marker in markers)


@dataclass(frozen=True)
class HarmonyMessage:
    author: str  # system, developer, user, assistant, or a tool's name (functions.get_weather, python)
    content: str
    channel: str = ""
    recipient: str = ""
    content_type: str = ""  # `<|constrain|>json` for JSON arguments, `code` for python

    def render(self, closed: bool = True) -> str:
        header = self.author + (f" to={self.recipient}" if self.recipient else "")
        header += f"<|channel|>{self.channel}" if self.channel else ""
        header += f" {self.content_type}" if self.content_type else ""
        end = "<|call|>" if self.author == "assistant" and self.recipient else "<|end|>"
        return f"<|start|>{header}<|message|>{self.content}{end if closed else ''}"


def system_message(effort: str, builtin_tools: Iterable[BuiltinTool] = (), functions: bool = False,
                   today: date | None = None) -> HarmonyMessage:
    lines = [IDENTITY, f"Knowledge cutoff: {KNOWLEDGE_CUTOFF}"]
    if today is not None:
        lines.append(f"Current date: {today.isoformat()}")
    text = "\n".join(lines) + f"\n\nReasoning: {effort}\n\n"
    declared = [DECLARATIONS[tool] for tool in builtin_tools]
    if declared:
        text += "# Tools\n\n" + "\n\n".join(declared) + "\n\n"
    text += CHANNELS + (f"\n{FUNCTIONS_CHANNEL}" if functions else "")
    return HarmonyMessage("system", text)


def developer_message(instructions: list[str], tools: list[dict[str, Any]]) -> HarmonyMessage | None:
    sections = []
    if instructions:
        sections.append("# Instructions\n\n" + "\n\n".join(instructions))
    if tools:
        declarations = "".join(_declaration(tool) + "\n" for tool in tools)
        sections.append(f"# Tools\n\n## functions\n\nnamespace functions {{\n\n{declarations}}} // namespace functions")
    return HarmonyMessage("developer", "\n\n".join(sections)) if sections else None


def _declaration(tool: dict[str, Any]) -> str:
    function = tool.get("function") or {}
    return function_declaration(function.get("name", ""), function.get("description") or "",
                                function.get("parameters"))


def harmony_effort(value: str | None) -> str:
    if value is None:
        return "medium"
    if value not in EFFORTS:
        raise InvalidRequest(f"reasoning_effort {value!r}: gpt-oss reasons at low, medium or high effort",
                             param="reasoning_effort")
    return EFFORTS[value]


def conversation(messages: list[dict[str, Any]], builtin: Collection[str] = ()) -> list[HarmonyMessage]:
    """The chat's turns (template dicts) as harmony messages, system and developer ones left out; `builtin`: the
    names of the built-in tools offered (their calls and results are written as harmony writes built-in ones)."""
    out: list[HarmonyMessage] = []
    call_names: dict[str, str] = {}  # tool_call_id -> the function it called, for the result's author
    for message in messages:
        role = message["role"]
        if role == "user":
            out.append(HarmonyMessage("user", message["content"]))
        elif role == "assistant":
            out += _assistant(message, call_names, builtin)
        elif role == "tool":
            name = message.get("name") or call_names.get(message.get("tool_call_id") or "", "")
            if name in builtin:  # a built-in tool's result, on the analysis channel as its call
                out.append(HarmonyMessage(name, message["content"], "analysis", "assistant"))
            else:
                out.append(HarmonyMessage(f"functions.{name}", message["content"], "commentary", "assistant"))
    return _drop_answered_analysis(out)


def _assistant(message: dict[str, Any], call_names: dict[str, str], builtin: Collection[str]) -> list[HarmonyMessage]:
    out = []
    if message.get("reasoning_content"):
        out.append(HarmonyMessage("assistant", message["reasoning_content"], "analysis"))
    calls = message.get("tool_calls") or []
    if message["content"]:  # as its client labelled it (`phase`), else: beside calls a preamble, alone the answer
        channel = PHASE_CHANNELS.get(message.get("phase") or "", "commentary" if calls else "final")
        out.append(HarmonyMessage("assistant", message["content"], channel))
    for call in calls:
        function = call.get("function") or {}
        name = function.get("name", "")
        call_names[call.get("id", "")] = name
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
        if name in builtin:
            out.append(HarmonyMessage("assistant", _builtin_body(name, arguments, text), "analysis", name, "code"))
        else:
            out.append(HarmonyMessage("assistant", text, "commentary", f"functions.{name}", "<|constrain|>json"))
    return out


def _builtin_body(name: str, arguments: Any, text: str) -> str:
    """A built-in call as the model wrote it: python's code itself, the browser's JSON arguments."""
    if name == "python" and isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if name == "python" and isinstance(arguments, dict) and isinstance(arguments.get("code"), str):
        return arguments["code"]
    return text


def _drop_answered_analysis(messages: list[HarmonyMessage]) -> list[HarmonyMessage]:
    """Thinking before the last final answer is not shown to the model again (harmony's rule)."""
    finals = [index for index, message in enumerate(messages) if message.channel == "final"]
    if not finals:
        return messages
    return [message for index, message in enumerate(messages) if index > finals[-1] or message.channel != "analysis"]


class HarmonyTemplate:
    """Renders a chat as harmony text; `source` is the model's own template (read for its markers elsewhere).

    The built-in tools are offered as functions marked `"harmony_builtin": true` (harmony_builtin.py).
    chat_template_kwargs it reads: `current_date` (ISO date; default today, as vLLM writes it)."""

    stop_texts = STOP_TEXTS

    def __init__(self, source: str | None = None):
        self.source = source or ""

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
               continue_final_message: bool = False, tools: list[dict[str, Any]] | None = None,
               reasoning_effort: str | None = None, current_date: str | date | None = None, **_: Any) -> str:
        if continue_final_message and add_generation_prompt:
            raise InvalidRequest("continue_final_message and add_generation_prompt cannot both be true",
                                 param="continue_final_message")
        effort = harmony_effort(reasoning_effort)
        instructions = [message["content"] for message in messages if message["role"] in ("system", "developer")]
        builtin_names = {_name(tool) for tool in tools or [] if _is_builtin(tool)}
        functions = [tool for tool in tools or [] if _name(tool) not in builtin_names]
        declared = [tool for tool in ORDER if tool in {BUILTIN_FUNCTIONS[name] for name in builtin_names}]
        head = [system_message(effort, declared, bool(functions), _date(current_date)),
                developer_message(instructions, functions)]
        turns = [message for message in head if message is not None] + conversation(messages, builtin_names)
        if continue_final_message:
            return _open_final(turns, messages)
        text = "".join(message.render() for message in turns)
        return text + "<|start|>assistant" if add_generation_prompt else text


def _name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or {}).get("name", ""))


def _is_builtin(tool: dict[str, Any]) -> bool:
    return _name(tool) in BUILTIN_FUNCTIONS and (tool.get("function") or {}).get(MARKER) is True


def _date(value: str | date | None) -> date:
    if value is None:
        return date.today()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise InvalidRequest(f"current_date {value!r} is not an ISO date (YYYY-MM-DD)",
                             param="chat_template_kwargs.current_date") from exc


def _open_final(turns: list[HarmonyMessage], messages: list[dict[str, Any]]) -> str:
    """The last (assistant) message left open, so the model continues its answer."""
    last = turns[-1] if turns else None
    if not messages or messages[-1]["role"] != "assistant" or last is None or last.author != "assistant":
        raise InvalidRequest("continue_final_message needs an assistant message last", param="messages")
    return "".join(message.render() for message in turns[:-1]) + last.render(closed=False)
