"""A turn's messages (rostra/serving/turn.py) -> the dicts chat templates expect."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rostra.core import PromptImage
from rostra.errors import InvalidRequest
from rostra.images.loader import ImageSource
from rostra.turn import ImagePart, TextPart, TurnMessage, UnreadablePart

# Where OpenAI takes images: user messages, and tool results (Codex's view_image, computer-use screenshots).
IMAGE_ROLES = frozenset({"user", "tool", "function"})
PartKey = tuple[int, int]  # (message index, part index)


@dataclass(frozen=True)
class PlacedImage:
    """A message's image part before it is loaded: where it stands (its marker goes there) and where it comes from."""

    key: PartKey
    source: ImageSource


@dataclass(frozen=True)
class PromptImages:
    """A conversation's images, loaded: the text that stands for each in its message (the engine's marker),
    and the images in the order they appear."""

    markers: dict[PartKey, str] = field(default_factory=dict)
    images: tuple[PromptImage, ...] = ()
    # To a template that loops over content parts: each image as {"type": "image"} (the template writes the marker)
    # rather than a text part holding the marker.
    as_image_parts: bool = False


def image_parts(messages: Sequence[TurnMessage]) -> list[PlacedImage]:
    """Every image part, in order; one where no image may stand is a 400 naming it."""
    parts = []
    for index, message in enumerate(messages):
        if isinstance(message.content, str) or message.content is None:
            continue
        for part_index, part in enumerate(message.content):
            if isinstance(part, TextPart) or (not isinstance(part, ImagePart) and part.type != "image_url"):
                continue
            if message.role not in IMAGE_ROLES:
                raise InvalidRequest(f"a {message.role} message cannot hold images (user and tool messages can)",
                                     param=part.param)
            if not isinstance(part, ImagePart):
                raise InvalidRequest("an image_url part needs image_url.url", param=part.param)
            parts.append(PlacedImage((index, part_index), ImageSource(part.param, url=part.url)))
    return parts


def text_only(messages: Sequence[TurnMessage]) -> PromptImages:
    """Markers that leave images out of the text (the last message's text a relayed request is logged by)."""
    return PromptImages({part.key: "" for part in image_parts(messages)})


def message_text(message: TurnMessage, index: int, images: PromptImages = PromptImages()) -> str:
    """The message's text, each loaded image as its marker where it stands. Text parts are joined by a line
    break; a marker is joined to its neighbours as it is (as llama.cpp's server places its media markers, so the
    same conversation is the same prompt there and here)."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    text = ""
    after_text = False
    for part_index, part in enumerate(content):
        marker = images.markers.get((index, part_index))
        if marker is not None:
            text, after_text = text + marker, False
            continue
        if not isinstance(part, TextPart):
            raise InvalidRequest(f"content part type {part_type(part)!r} is not supported by this model (text only)",
                                 param=part.param)
        text, after_text = text + ("\n" if after_text else "") + part.text, True
    return text


def content_parts(message: TurnMessage, index: int, images: PromptImages = PromptImages()) -> list[dict[str, Any]]:
    """The content as a template that loops over it takes it (vLLM's `openai` content format): text parts, a
    string as one. An image is a text part holding the engine's marker, so the engine finds each image where it
    stands whatever image token the template would write; or, `as_image_parts`, {"type": "image"}, where the
    template writes the engine's marker itself."""
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts = []
    for part_index, part in enumerate(content):
        marker = images.markers.get((index, part_index))
        if marker is not None:
            parts.append({"type": "image"} if images.as_image_parts else {"type": "text", "text": marker})
        elif isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            raise InvalidRequest(f"content part type {part_type(part)!r} is not supported by this model (text only)",
                                 param=part.param)
    return parts


def template_messages(messages: Sequence[TurnMessage], images: PromptImages = PromptImages(),
                      as_parts: bool = False) -> list[dict[str, Any]]:
    """Most templates know system/user/assistant/tool only: developer -> system, function -> tool. `as_parts`:
    each content a list of parts (see content_parts), else one string."""
    rendered = []
    for index, message in enumerate(messages):
        role = {"developer": "system", "function": "tool"}.get(message.role, message.role)
        content = content_parts(message, index, images) if as_parts else message_text(message, index, images)
        item: dict[str, Any] = {"role": role, "content": content}
        if message.name:
            item["name"] = message.name
        if message.tool_call_id:
            item["tool_call_id"] = message.tool_call_id
        if message.tool_calls:
            item["tool_calls"] = [_template_tool_call(call.fields, call.param) for call in message.tool_calls]
        if message.reasoning:
            item["reasoning_content"] = message.reasoning
        if message.phase:  # read by the harmony renderer (prompt/harmony.py); other templates pass it by
            item["phase"] = message.phase
        rendered.append(item)
    return rendered


def _template_tool_call(call: Mapping[str, Any], param: str) -> dict[str, Any]:
    """Templates index arguments as a mapping (`arguments | tojson`, `arguments.items()`)."""
    function = call.get("function") or {}
    if not isinstance(function, dict):
        raise InvalidRequest("a tool call's function must be an object with a name and arguments",
                             param=f"{param}.function")
    function = dict(function)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            function["arguments"] = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):  # not JSON (or nested past the parser): kept as text
            pass
    return {**call, "function": function}


def part_type(part: ImagePart | UnreadablePart) -> str:
    return "image_url" if isinstance(part, ImagePart) else part.type
