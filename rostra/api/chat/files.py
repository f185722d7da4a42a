"""Chat Completions `file` content parts, as OpenAI's Chat API defines them (`{"type": "file", "file": {"file_id"}}`
or `{"file": {"file_data": "data:application/pdf;base64,...", "filename"}}`), read into text parts before the turn
is built: `<file name="NAME">` + the file's text + `</file>`, as the Responses API reads its `input_file` parts
(rostra/file_text.py: UTF-8 text, or a PDF's text layer). An uploaded file is the asking key's."""

from __future__ import annotations

from rostra.errors import InvalidRequest
from rostra.file_text import FileReader, decode_file_data, file_text, read_uploaded
from rostra.protocol.chat import ChatCompletionRequest, ContentPart
from rostra.store.tenancy import Tenant


def has_file_parts(request: ChatCompletionRequest) -> bool:
    return any(part.type == "file" for message in request.messages if isinstance(message.content, list)
               for part in message.content)


async def with_files_read(request: ChatCompletionRequest, files: FileReader | None,
                          tenant: Tenant) -> ChatCompletionRequest:
    """The request with each `file` part replaced by a text part holding what the model reads of the file."""
    if not has_file_parts(request):
        return request
    messages = [message.model_copy(deep=True) for message in request.messages]
    for index, message in enumerate(messages):
        if not isinstance(message.content, list):
            continue
        for position, part in enumerate(message.content):
            if part.type == "file":
                message.content[position] = await _read(part, f"messages[{index}].content[{position}].file",
                                                        files, tenant)
    return request.model_copy(update={"messages": messages})


async def _read(part: ContentPart, param: str, files: FileReader | None, tenant: Tenant) -> ContentPart:
    spec = (part.model_extra or {}).get("file")
    if not isinstance(spec, dict):
        raise InvalidRequest("a file part needs a `file` object with file_id or file_data", param=param)
    if spec.get("file_id") is not None:
        name, data = await read_uploaded(spec["file_id"], f"{param}.file_id", files, tenant)
    elif isinstance(spec.get("file_data"), str):
        name, data = "file", decode_file_data(spec["file_data"], f"{param}.file_data")
    else:
        raise InvalidRequest("a file part needs file_id or file_data", param=param)
    filename = spec.get("filename")
    name = filename if isinstance(filename, str) and filename else name
    return ContentPart(type="text", text=f'<file name="{name}">\n{await file_text(data, name, param)}\n</file>')
