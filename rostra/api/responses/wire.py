"""The objects the Responses and Conversations APIs answer with, typed: a page of items, a deletion, a
conversation, a response's usage and the small records its object holds (reasoning, error, incomplete details).

They are frozen: a service builds one and hands it up; the route (or the store, at its SQL boundary) turns it into
JSON with `wire()`, and nothing between the two edits a dict. Their shapes are OpenAI's (openapi.json's
`ConversationResource`, `ConversationItemList`, `DeletedConversation`, `ResponseItemList`, `ResponseUsage`,
`ResponseError`); where rostra adds a field it says so at the field.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class WireModel(BaseModel):
    """An object that is JSON only at the edge. Unknown keys read back from the store are kept, so what a client
    reads is what was stored (an older row, a field a later version adds)."""

    model_config = ConfigDict(extra="allow")

    # Fields left out of the JSON while they are None (rostra's additions, which say something or are absent).
    absent_unless_set: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for name in self.absent_unless_set:
            if data.get(name) is None:
                data.pop(name, None)
        return data

    def wire(self) -> dict[str, Any]:
        """The JSON object the API answers with (and the store keeps): a copy, which later changes to this object
        never reach."""
        data: dict[str, Any] = self.model_dump(mode="json")
        return data


class WireObject(WireModel):
    """A wire object that never changes once made."""

    model_config = ConfigDict(frozen=True, extra="allow")


class ItemPage(WireObject):
    """One page of a list (`object: "list"`): a conversation's items, a response's input items, conversations.
    The items themselves are the stored JSON objects, as the store returns them."""

    object: Literal["list"] = "list"
    data: list[dict[str, Any]]
    has_more: bool
    first_id: str | None
    last_id: str | None

    @classmethod
    def of(cls, items: list[dict[str, Any]], has_more: bool, empty_id: str | None) -> ItemPage:
        """`empty_id`: what first_id/last_id are on an empty page. Conversation pages answer "" (the spec's
        ConversationItemList requires strings); a response's input items answer null, as OpenAI's API does."""
        return cls(data=items, has_more=has_more, first_id=items[0]["id"] if items else empty_id,
                   last_id=items[-1]["id"] if items else empty_id)


class StoredItem(WireObject):
    """An item as a conversation (or a response's input) keeps it: every kind has its id and type; the rest is the
    kind's own, validated when it came in (items.py) and kept as sent."""

    id: str
    type: str


class Deleted(WireObject):
    """What deleting answers: `response.deleted` or `conversation.deleted`."""

    id: str
    object: Literal["response.deleted", "conversation.deleted"]
    deleted: bool = True


class Conversation(WireObject):
    """A conversation object (its items are stored apart, in order)."""

    id: str
    object: Literal["conversation"] = "conversation"
    created_at: int
    metadata: dict[str, str]

    @classmethod
    def stored(cls, row: dict[str, Any]) -> Conversation:
        return cls.model_validate(row)


class InputTokensDetails(WireObject):
    cached_tokens: int
    cache_write_tokens: int  # (OpenAI's object has cached_tokens only: rostra adds the tokens a turn cached anew)


class OutputTokensDetails(WireObject):
    reasoning_tokens: int


class OutputBudget(WireObject):
    requested: int  # the max_output_tokens asked for
    granted: int  # what the room left in the context allowed


class ResponseUsage(WireObject):
    """A response's usage: all its model turns' together."""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int
    # rostra's extension: the last turn's max_output_tokens, when it was cut to the room left in the context
    # (absent otherwise).
    output_budget: OutputBudget | None = None
    absent_unless_set = ("output_budget",)

    @classmethod
    def nothing(cls) -> ResponseUsage:
        """A response that ran no model turn (a WebSocket's `generate: false`)."""
        return cls(input_tokens=0, input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                   output_tokens=0, output_tokens_details=OutputTokensDetails(reasoning_tokens=0), total_tokens=0)


class ResponseError(WireObject):
    """Why a response failed: the response object's error codes are a closed set (rostra fails with server_error)."""

    code: str
    message: str


class IncompleteDetails(WireObject):
    reason: str  # max_output_tokens (a budget cut it), content_filter


class ReasoningEcho(WireObject):
    """The request's reasoning options as the response echoes them (null when not asked for)."""

    effort: str | None = None
    summary: str | None = None


class ConversationReference(WireObject):
    id: str
