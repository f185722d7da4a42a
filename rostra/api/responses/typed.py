"""One parser for the Responses wing's tagged unions (input items, tools): a raw JSON object in, the typed model
of its `type` out, or a 400 whose message says what that kind needs and whose `param` points at the culprit.

pydantic's own messages name union tags and internal locations; a client reads a sentence about the item it sent
(`a function_call needs call_id, name and arguments`, param `input[2]`) instead.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from rostra.errors import InvalidRequest


class Tagged(BaseModel):
    """A member of a tagged union. Unknown keys are kept (the item or tool is stored and echoed as sent);
    values are not coerced (`"true"` is not a boolean)."""

    model_config = ConfigDict(extra="allow", strict=True)

    # What this kind needs, said once for the client (subclasses set it).
    requirement: ClassVar[str] = ""
    # Fields whose errors name the field itself (`input[0].role`) with their own message; the others name the
    # whole object with `requirement`.
    field_messages: ClassVar[dict[str, str]] = {}

    def stored(self) -> dict[str, Any]:
        """The object as the store keeps it and the API returns it: what was sent, as normalized."""
        return self.model_dump(exclude_unset=True)


Model = TypeVar("Model", bound=Tagged)


def parse_tagged(adapter: TypeAdapter[Model], kinds: dict[str, type[Tagged]], raw: Any, param: str,
                 what: str, default_type: str | None = None) -> Model:
    """`raw` as the member of the union its `type` names. `what` names the union in errors ("input item")."""
    if not isinstance(raw, dict):
        raise InvalidRequest(f"each {what} must be an object", param=param)
    kind = raw.get("type", default_type)
    if kind not in kinds:
        raise InvalidRequest(f"{what} type {kind!r} is not supported", param=f"{param}.type")
    try:
        return adapter.validate_python({**raw, "type": kind})
    except ValidationError as exc:
        model = kinds[kind]
        location = exc.errors(include_url=False)[0]["loc"]
        field = str(location[1]) if len(location) > 1 else ""  # location[0] is the union's tag
        if field in model.field_messages:
            raise InvalidRequest(model.field_messages[field], param=f"{param}.{field}") from None
        raise InvalidRequest(model.requirement or f"invalid {kind}", param=param) from None


def members_by_tag(union: Any) -> dict[str, type[Tagged]]:
    """{type tag: model} of an `Annotated[Union[...], Field(discriminator="type")]`: the union is the one list."""
    members = get_args(get_args(union)[0])
    return {tag: model for model in members for tag in get_args(model.model_fields["type"].annotation)}
