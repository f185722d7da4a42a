"""A turn as the Chat Completions body an upstream serving its model is sent (a gateway's relayed models).

Chat requests go upstream as their client wrote them (relay.py); a Messages or Responses turn has no Chat
request of its own, so it goes as the one it amounts to: its messages, tools, choice, constraint, budget and the
sampling fields it set.
"""

from __future__ import annotations

from typing import Any, Mapping

from rostra.turn import ImagePart, TextPart, Turn, TurnMessage

# Chat's tool_choice for each kind a turn may hold (named: an object of its own; default: left out).
CHOICES = {"none": "none", "auto": "auto", "required": "required"}


def upstream_chat_body(turn: Turn, image_urls: dict[tuple[int, int], str]) -> dict[str, Any]:
    """`image_urls`: each image as sent upstream (a data URL), by (message, part)."""
    body: dict[str, Any] = {}
    for name, value in turn.sampling.set_fields().items():  # under Chat's names, as JSON
        if name == "samplers":
            body.update({key: list(item) if isinstance(item, tuple) else item for key, item in value.given().items()})
        elif name == "logit_bias":
            body[name] = {str(token): bias for token, bias in value.items()}
        else:
            body[name] = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value
    if turn.user is not None:
        body["user"] = turn.user
    body.update(model=turn.model,
                messages=[wire_message(message, index, image_urls) for index, message in enumerate(turn.messages)])
    if turn.tools:
        body["tools"] = [dict(tool.template) for tool in turn.tools]
    choice = turn.tool_choice
    if choice.kind == "named":
        body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    elif choice.kind in CHOICES:
        body["tool_choice"] = CHOICES[choice.kind]
    if turn.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = turn.parallel_tool_calls
    if turn.constraint is not None and turn.constraint.json_schema is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "output", "schema": turn.constraint.json_schema}}
    elif turn.constraint is not None:
        body["guided_grammar"] = turn.constraint.grammar
    if turn.budget.requested is not None:
        body["max_completion_tokens"] = turn.budget.requested
    options = turn.template
    if options.variables:
        body["chat_template_kwargs"] = dict(options.variables)
    if not options.add_generation_prompt:
        body.update(add_generation_prompt=False, continue_final_message=options.continue_final_message)
    for name, value in (("reasoning_effort", turn.reasoning_effort), ("prompt_cache_key", turn.session_key)):
        if value is not None:
            body[name] = value
    if turn.logprobs:
        body.update(logprobs=True, top_logprobs=turn.top_logprobs or 0)
    return body


def wire_message(message: TurnMessage, index: int, image_urls: dict[tuple[int, int], str]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message.content, tuple):
        out["content"] = [{"type": "text", "text": part.text} if isinstance(part, TextPart)
                          else {"type": "image_url", "image_url": {"url": image_urls.get((index, number), part.url)}}
                          for number, part in enumerate(message.content) if isinstance(part, (TextPart, ImagePart))]
    else:
        out["content"] = message.content
    if message.name is not None:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [dict(call.fields) for call in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.reasoning:
        out["reasoning_content"] = message.reasoning
    return out
