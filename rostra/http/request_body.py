"""Request bodies -> validated protocol models, with OpenAI's `param` paths in the errors."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import HTTPConnection, Request

from rostra.errors import InvalidRequest
from rostra.model_aliases import aliased
from rostra.protocol.strict import RequestModel

log = logging.getLogger("rostra.server")

Body = TypeVar("Body", bound=BaseModel)

# Parts of a pydantic error location that name a union member's type, not a field.
_TYPE_TAG = re.compile(r"^(str|int|float|bool|list|dict|none|json-or-python)(\[.*\])?$|^(function|constrained)-|\[")


def param_from_location(location: tuple) -> str | None:
    """('messages', 0, 'role') -> 'messages[0].role' (the JSON path OpenAI names in `param`)."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "body" and not _TYPE_TAG.search(str(part)):
            path += f".{part}" if path else str(part)
    return path or None


# Bodies larger than this are parsed in a thread: a 16 MiB body takes the parser a good part of a
# second, which the event loop (every other stream, /health) must not wait for.
INLINE_BODY_BYTES = 256 * 1024


async def parse_body(request: Request, model: type[Body]) -> Body:
    return await parse_json(request, model, await request.body())


async def parse_json(connection: HTTPConnection, model: type[Body], body: bytes) -> Body:
    """`body` (a request's, or a WebSocket message's) validated as `model`, for the app `connection` reached."""
    try:
        if len(body) > INLINE_BODY_BYTES:
            parsed = await asyncio.to_thread(model.model_validate_json, body)
        else:
            parsed = model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0]["type"] == "json_invalid":
            raise InvalidRequest(f"the request body is not valid JSON: {errors[0]['msg']}") from exc
        # A union (a message's content: a string or a list of parts) fails once per member; the member that got
        # furthest into named fields names the one at fault (`messages[0].content[1].image_url.url`, not
        # `messages[0].content`); on a tie, the first.
        located = [(param_from_location(tuple(error["loc"])), error["msg"]) for error in errors]
        param, message = max(located, key=lambda pair: (pair[0] or "").count("."))
        raise InvalidRequest(f"{param or 'body'}: {message}", param=param) from exc
    if isinstance(parsed, RequestModel):
        check_fields(parsed, connection.app.state.rostra.settings.unknown_params)
        apply_alias(connection, parsed)
    return parsed


def apply_alias(request: HTTPConnection, body: RequestModel) -> None:
    """A model name only an alias serves becomes the model it names (--model-alias), before anything reads it."""
    context = request.app.state.rostra
    name = getattr(body, "model", None)
    if not context.settings.model_aliases or not isinstance(name, str):
        return
    target = aliased(name, context.settings.model_aliases, context.models.names())
    if target != name:
        log.debug("model %r answered by %r (--model-alias)", name, target)
        body.model = target  # type: ignore[attr-defined]


def check_fields(body: RequestModel, unknown_params: str) -> None:
    """Unknown fields: a 400 naming the first (as OpenAI answers), or a warning and dropped;
    then the known fields set to what rostra cannot honour."""
    unknown = body.unknown_fields()
    if unknown and unknown_params == "error":
        raise InvalidRequest(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    if unknown:
        log.warning("ignoring unrecognized request argument(s): %s", ", ".join(unknown))
        body.drop_unknown_fields()
    refusal = body.unsupported()
    if refusal is not None:
        raise refusal


def check_page(limit: int, order: str) -> None:
    """The paging parameters of OpenAI's list endpoints."""
    if not 1 <= limit <= 100:
        raise InvalidRequest("limit must be between 1 and 100", param="limit")
    if order not in ("asc", "desc"):
        raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
