"""Messages `document` blocks read as text before the turn is built, each where it stands in its message.

Sources, as Anthropic's API defines them: `base64` (a PDF: `media_type` application/pdf; its text layer, and any
other base64 file that is UTF-8 text), `text` (plain text, `data`), `url` (a PDF or text file fetched through
the image fetcher's guard: rostra/file_fetch.py), `content` (text blocks, whose text is read in order) and `file`
(a `file_id` of Anthropic's Files API: here a file uploaded to rostra's /v1/files, the asking key's own). The model
reads `<document title="TITLE">` + the context line, if any + the text + `</document>`. What a file holds becomes text
in rostra/file_text.py (pypdf for PDFs, in a thread); every refusal names the block's source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from rostra.api.messages.models import DocumentBlock, InputMessage, MessagesRequestFields, TextBlock
from rostra.errors import InvalidRequest
from rostra.file_fetch import fetch_file
from rostra.file_text import FileReader, decode_file_data, file_text, read_uploaded
from rostra.images.limits import ImageLimits
from rostra.store.tenancy import EVERYONE, Tenant

Request = TypeVar("Request", bound=MessagesRequestFields)  # a Messages request, or a count_tokens one


def has_documents(request: MessagesRequestFields) -> bool:
    return any(isinstance(block, DocumentBlock) for message in request.messages
               if not isinstance(message.content, str) for block in message.content)


@dataclass(frozen=True)
class DocumentSources:
    """Where documents are read from: URLs within `limits`, and the Files API's `files` as `tenant`."""
    limits: ImageLimits
    files: FileReader | None = None
    tenant: Tenant = EVERYONE


async def with_documents_read(request: Request, sources: DocumentSources) -> Request:
    """The request with each document block replaced by a text block holding what the model reads of it."""
    if not has_documents(request):
        return request
    messages = []
    for index, message in enumerate(request.messages):
        if isinstance(message.content, str) or not any(isinstance(b, DocumentBlock) for b in message.content):
            messages.append(message)
            continue
        blocks: list[Any] = []
        for position, block in enumerate(message.content):
            if isinstance(block, DocumentBlock):
                text = await document_text(block, f"messages[{index}].content[{position}]", sources)
                block = TextBlock(type="text", text=text)
            blocks.append(block)
        messages.append(InputMessage(role=message.role, content=blocks))
    return request.model_copy(update={"messages": messages})


async def document_text(block: DocumentBlock, param: str, sources: DocumentSources) -> str:
    source, where = block.source, f"{param}.source"
    kind = source.get("type")
    if kind == "text" and isinstance(source.get("data"), str):
        text = source["data"]
    elif kind == "base64" and isinstance(source.get("data"), str):
        text = await file_text(decode_file_data(source["data"], f"{where}.data"), block.title or "the document", where)
    elif kind == "url" and isinstance(source.get("url"), str):
        text = await file_text(await fetch_file(source["url"], f"{where}.url", sources.limits),
                               block.title or source["url"], where)
    elif kind == "content" and isinstance(source.get("content"), (str, list)):
        text = _content_text(source["content"], f"{where}.content")
    elif kind == "file" and "file_id" in source:
        filename, data = await read_uploaded(source["file_id"], f"{where}.file_id", sources.files, sources.tenant)
        text = await file_text(data, block.title or filename, where)
    else:
        raise InvalidRequest("a document source must be {\"type\": \"base64\", \"media_type\", \"data\"}, "
                             "{\"type\": \"text\", \"data\"}, {\"type\": \"url\", \"url\"}, "
                             "{\"type\": \"content\", \"content\"} or {\"type\": \"file\", \"file_id\"}",
                             param=where)
    title = f' title="{block.title}"' if block.title else ""
    context = f"{block.context}\n" if block.context else ""
    return f"<document{title}>\n{context}{text}\n</document>"


def _content_text(content: str | list[Any], param: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for position, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            raise InvalidRequest("a document's content source holds text blocks only here", param=f"{param}[{position}]")
        texts.append(part["text"])
    return "\n".join(texts)
