"""Chat templates, rendered in a sandboxed jinja2 environment.

The template comes from the model (GGUF metadata `tokenizer.chat_template`) unless the user
gives one. The environment mirrors what Hugging Face templates expect (trim_blocks,
lstrip_blocks, `raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII), inside
jinja2's immutable sandbox so a template cannot reach Python internals.
"""

from __future__ import annotations

import functools

import json
from datetime import datetime
from typing import Any, Callable, Mapping, Protocol

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from rostra.errors import InvalidRequest
from rostra.prompt.template_metadata import template_stop_strings

# Used when a model ships no template at all.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class PromptRenderer(Protocol):
    """What renders a chat into prompt text: a Jinja ChatTemplate, or gpt-oss's harmony (prompt/harmony.py)."""

    source: str

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
               continue_final_message: bool = False, tools: list[dict] | None = None, **kwargs: Any) -> str: ...


class TemplateRaised(Exception):
    """A template called raise_exception(): the conversation is not valid for this model."""


def _raise_exception(message: str) -> None:
    raise TemplateRaised(message)


def _tojson(value: Any, indent: int | None = None, separators=None, sort_keys: bool = False,
            ensure_ascii: bool = False) -> str:
    return json.dumps(value, indent=indent, separators=separators, sort_keys=sort_keys, ensure_ascii=ensure_ascii)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class GenerationExtension(Extension):
    """{% generation %} … {% endgeneration %}: transformers marks the assistant's tokens with it for
    apply_chat_template(return_assistant_tokens_mask=True), and templates such as LFM2.5's use it.
    rostra needs no mask, so the body renders unchanged; without the tag such templates would not
    load (issue 43)."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)  # the `generation` token
        body: list[nodes.Node] = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return body


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "",
                 named_tokens: Mapping[str, str] | None = None):
        """`named_tokens`: the tokenizer's other special tokens (unk_token, pad_token, ...), as Hugging Face
        hands a template its tokenizer's special_tokens_map."""
        self.source = source or CHATML_TEMPLATE
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols, GenerationExtension])
        env.filters["tojson"] = _tojson
        env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
        self._template = env.from_string(self.source)  # a broken template fails at start-up
        # The template's own stop strings (tabbyAPI's template metadata), stops of every request it renders.
        self.stop_strings = template_stop_strings(env, self.source)
        self._specials = {**(named_tokens or {}), "bos_token": bos_token, "eos_token": eos_token}

    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
               continue_final_message: bool = False, tools: list[dict] | None = None,
               **kwargs: Any) -> str:
        if continue_final_message and add_generation_prompt:
            raise InvalidRequest("continue_final_message and add_generation_prompt cannot both be true",
                                 param="continue_final_message")
        variables = {**self._specials, **kwargs, "messages": messages, "tools": tools,
                     "add_generation_prompt": add_generation_prompt}
        try:
            text = self._render(variables)
        except TemplateRaised as exc:
            raise InvalidRequest(f"the chat template rejected the conversation: {exc}", param="messages") from exc
        except (TemplateError, TypeError, KeyError, ValueError, AttributeError) as exc:
            raise InvalidRequest(f"the chat template could not render the conversation: {exc}",
                                 param="messages") from exc
        if continue_final_message:
            text = _cut_after_final_message(text, messages)
        return text

    def _render(self, variables: dict[str, Any]) -> str:
        """Once more with the tools flat where a template reads a tool's fields at its top level and fails on the
        OpenAI shape (Apertus's)."""
        try:
            return self._render_arguments(variables)
        except (TemplateError, TypeError, KeyError, AttributeError):
            flat = flat_tools(variables.get("tools"))
            if flat is None:
                raise
            return self._render_arguments({**variables, "tools": flat})

    def _render_arguments(self, variables: dict[str, Any]) -> str:
        """Templates get a call's arguments as a mapping (prompt/messages.py) that prints as JSON (JsonArguments);
        those written for arguments as JSON text (`'>' + arguments`: Functionary v3.1 / v3.2, DeepSeek R1) fail on
        one, so they render again with each call's arguments as JSON text (what llama.cpp does for such templates)."""
        messages = variables["messages"]
        printable = _map_arguments(messages, JsonArguments)
        try:
            return self._template.render(**{**variables, "messages": printable or messages})
        except TypeError:
            as_text = _map_arguments(messages, _arguments_as_text)
            if as_text is None:
                raise
            return self._template.render(**{**variables, "messages": as_text})


class JsonArguments(dict):  # type: ignore[type-arg]
    """A call's arguments as a template gets them: a mapping (`arguments | tojson`, `arguments.items()`) that prints
    as the JSON text a client sent (`arguments | string`, `{{ arguments }}`: InternLM2's tool template), never as a
    Python dict."""

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False)


def _map_arguments(messages: list[dict[str, Any]], convert: Callable[[dict[str, Any]], Any]
                   ) -> list[dict[str, Any]] | None:
    """The messages with every tool call's mapping arguments converted; None: no call has any."""
    changed, out = False, []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not calls or not isinstance(calls, list):
            out.append(message)
            continue
        rewritten = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), dict):
                changed = True
                call = {**call, "function": {**function, "arguments": convert(function["arguments"])}}
            rewritten.append(call)
        out.append({**message, "tool_calls": rewritten})
    return out if changed else None


def _arguments_as_text(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def flat_tools(tools: list[dict] | None) -> list[dict] | None:
    """Tools with their function's fields at the top (`{"type": "function", "name": …, "parameters": …}`), as
    templates that read `tool.name` / `tool.description` expect (Apertus's: tests/data/templates)."""
    if not tools or not any(isinstance(tool.get("function"), dict) for tool in tools):
        return None
    return [{"type": tool.get("type", "function"), **tool["function"]} if isinstance(tool.get("function"), dict)
            else tool for tool in tools]


def _cut_after_final_message(text: str, messages: list[dict[str, Any]]) -> str:
    """Leave the last (assistant) message open so the model continues it."""
    final = messages[-1]
    if final.get("role") != "assistant":
        raise InvalidRequest("continue_final_message needs an assistant message last", param="messages")
    content = final.get("content") or ""
    position = text.rfind(content) if content else -1
    if position < 0:
        raise InvalidRequest("the final message's content was not found in the rendered template",
                             param="continue_final_message")
    return text[: position + len(content)]


@functools.lru_cache(maxsize=16)
def request_template(source: str, bos_token: str, eos_token: str,
                     named_tokens: tuple[tuple[str, str], ...] = ()) -> ChatTemplate:
    """A request's chat template, sandboxed as the server's is; compiled once while clients repeat it
    (`named_tokens` as pairs: the cache's key must hash)."""
    try:
        return ChatTemplate(source, bos_token, eos_token, dict(named_tokens))
    except TemplateError as exc:
        raise InvalidRequest(f"chat_template: the template does not compile: {exc}", param="chat_template") from exc
