"""The Responses API's input items, typed: one model per item `type`, joined in one discriminated union.

Adding an item type is adding its model here and naming it in `InputItem` (its id prefix and what it needs
come with it). Items are validated at the boundary, then kept as the JSON objects the store holds and the API
returns (each with an id; a message's string content as a text part), so what a client sent is what it reads back.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from rostra.api.responses.objects import new_id
from rostra.api.responses.typed import Tagged, members_by_tag, parse_tagged
from rostra.errors import InvalidRequest


class Item(Tagged):
    id_prefix: ClassVar[str]
    id: str | None = None  # absent or null (as SDKs send an approval response's): one is given

    @model_validator(mode="after")
    def _named(self) -> Item:
        if not self.id:
            self.id = new_id(self.id_prefix)
        return self


class TextPart(BaseModel):
    """A text part of a message (input_text, output_text...): what rostra reads is its text."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str | None = None
    text: str


class ImagePart(BaseModel):
    """An `input_image` part (in user messages, and in a call output's list: Codex's view_image): an image by
    URL (data: or http(s)), or by `file_id`, an uploaded file (read into image_url: file_inputs.py)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: Literal["input_image"]
    image_url: str | None = None
    detail: str | None = None
    file_id: str | None = None


class FilePart(BaseModel):
    """An `input_file` part: an uploaded file (`file_id`) or one carried (`file_data`, base64), read into the message
    as its text before the model sees it (file_inputs.py)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: Literal["input_file"]
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None


class MessageItem(Item):
    id_prefix = "msg"
    requirement = "a message needs a role and content"
    field_messages = {"role": "a message needs a role: user, system, developer or assistant",
                      "content": "message content must be a string or text and image parts"}
    # An assistant message's: commentary (a preamble, a progress note) or the final answer. OpenAI asks clients to
    # send it back as given; it picks the channel a harmony model (gpt-oss) reads the message on.
    phase: Literal["commentary", "final_answer"] | None = None
    type: Literal["message"]
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[TextPart | ImagePart | FilePart]

    @model_validator(mode="after")
    def _parts(self) -> MessageItem:
        if isinstance(self.content, str):  # stored as the part the API lists it with
            self.content = [TextPart.model_validate(text_part(self.role, self.content))]
        return self


class FunctionCallItem(Item):
    id_prefix = "fc"
    requirement = "a function_call needs call_id, name and arguments"
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class FunctionCallOutputItem(Item):
    id_prefix = "fco"
    requirement = "a function_call_output needs call_id and output"
    type: Literal["function_call_output"]
    call_id: str
    output: Any  # a string, or content parts


class CustomToolCallItem(Item):
    id_prefix = "ctc"
    requirement = "a custom_tool_call needs call_id, name and input"
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str


class CustomToolCallOutputItem(Item):
    id_prefix = "ctco"
    requirement = "a custom_tool_call_output needs call_id and output"
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: Any  # a string, or content parts


class LocalShellAction(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    type: Literal["exec"]
    command: list[str]


class LocalShellCallItem(Item):
    id_prefix = "lsh"
    requirement = "a local_shell_call needs call_id and an exec action with a command"
    type: Literal["local_shell_call"]
    call_id: str
    action: LocalShellAction


class WebSearchCallItem(Item):
    """A hosted web search a tool server ran (builtin_tools.py), sent back by a stateless client: kept in the
    conversation; its results were never in it, so the model reads the answer that followed, not the search."""

    id_prefix = "ws"
    requirement = "a web_search_call needs an action"
    type: Literal["web_search_call"]
    action: dict[str, Any]
    status: str | None = None


class CodeInterpreterCallItem(Item):
    """A hosted code run sent back by a stateless client: kept in the conversation (not read by the model)."""

    id_prefix = "ci"
    requirement = "a code_interpreter_call needs its code and container_id"
    type: Literal["code_interpreter_call"]
    code: str | None
    container_id: str
    outputs: list[dict[str, Any]] | None = None
    status: str | None = None


class LocalShellCallOutputItem(Item):
    """OpenAI's schema names the call by `id` (the call's id); `call_id` is taken too."""

    id_prefix = "lsho"
    requirement = "a local_shell_call_output needs the call's id and output"
    type: Literal["local_shell_call_output"]
    output: str
    call_id: str | None = None


class ItemReference(Item):
    """An item stored earlier, by id (the Vercel AI SDK sends these with store: true): the service puts the stored
    item in its place, or refuses the request."""

    id_prefix = "ref"
    requirement = "an item_reference needs the id of a stored item"
    type: Literal["item_reference"]
    id: Annotated[str, Field(min_length=1)]  # type: ignore[assignment]  # required here


class ReasoningItem(Item):
    """Its text is read (and its content/summary/encrypted_content checked) by rostra/serving/reasoning_crypto.py,
    which names the field at fault."""

    id_prefix = "rs"
    type: Literal["reasoning"]


class CompactionItem(Item):
    """The conversation before it, summarized by a compaction turn (one whose input ends with a
    compaction_trigger): the summary is sealed in encrypted_content, as reasoning is, and opened by
    rostra/serving/reasoning_crypto.py."""

    id_prefix = "cmp"
    requirement = "a compaction needs the encrypted_content a compaction turn returned"
    type: Literal["compaction"]
    encrypted_content: str


class CompactionTriggerItem(Item):
    """Asks for the conversation before it to be summarized into one compaction item; only as the last input."""

    id_prefix = "cmpt"
    type: Literal["compaction_trigger"]


class McpListedTool(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    name: str


class McpListToolsItem(Item):
    id_prefix = "mcpl"
    requirement = "an mcp_list_tools needs server_label and tools (each with a name)"
    type: Literal["mcp_list_tools"]
    server_label: str
    tools: list[McpListedTool]


class McpCallItem(Item):
    id_prefix = "mcp"
    requirement = "an mcp_call needs server_label, name and arguments"
    type: Literal["mcp_call"]
    server_label: str
    name: str
    arguments: str


class McpApprovalRequestItem(Item):
    id_prefix = "mcpr"
    requirement = "an mcp_approval_request needs server_label, name and arguments"
    type: Literal["mcp_approval_request"]
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseItem(Item):
    id_prefix = "mcpa"
    requirement = "an mcp_approval_response needs approval_request_id and approve"
    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool


InputItem = Annotated[Union[MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem, McpListToolsItem,
                            McpCallItem, McpApprovalRequestItem, McpApprovalResponseItem, CustomToolCallItem,
                            CustomToolCallOutputItem, LocalShellCallItem, LocalShellCallOutputItem, ItemReference,
                            CompactionItem, CompactionTriggerItem, WebSearchCallItem, CodeInterpreterCallItem],
                      Field(discriminator="type")]
_ADAPTER: TypeAdapter[InputItem] = TypeAdapter(InputItem)
ITEM_KINDS = members_by_tag(InputItem)
MCP_ITEM_TYPES = {"mcp_list_tools", "mcp_call", "mcp_approval_request", "mcp_approval_response"}


def parse_item(raw: Any, param: str) -> InputItem:
    if isinstance(raw, dict) and "type" not in raw and "role" not in raw and "id" in raw:
        raw = {**raw, "type": "item_reference"}  # OpenAI's item_reference may leave out its type
    return parse_tagged(_ADAPTER, ITEM_KINDS, raw, param, "input item", default_type="message")


def normalize_input(value: str | list[Any], param: str = "input") -> list[dict[str, Any]]:
    """The input as stored items: each has a type and an id. `param` names the list in errors."""
    if isinstance(value, str):
        value = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    if not value:
        raise InvalidRequest(f"{param} must not be empty", param=param)
    return [parse_item(raw, f"{param}[{index}]").stored() for index, raw in enumerate(value)]


def text_part(role: str, text: str) -> dict[str, Any]:
    """A message's text as the part the API lists it with (an assistant's is output text)."""
    if role == "assistant":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "input_text", "text": text}


def with_status(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as the API returns them from a conversation: every one has a status."""
    return [{**item, "status": item.get("status") or "completed"} for item in items]
