"""Files as model input, for every API: a file's bytes -> the text the model reads.

Chat's `file` parts, the Responses API's `input_file` parts and the Messages API's `document` blocks all come here:
a file uploaded to /v1/files (by `file_id`, the asking key's: another key's is a 404, as on GET /v1/files/{id}) or
carried in the request (base64 `file_data`, a data URL or bare). Its text is its UTF-8 text, or a PDF's text layer
as pypdf extracts it (pypdf: pure Python, maintained, BSD; page by page, each page's text in reading order; a
scanned PDF without a text layer has none, and is refused rather than read as empty). Other binary files are
refused. Every refusal is a 400 naming the part (`messages[0].content[1].file.file_data`). PDF extraction is CPU
work: it runs in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import re
from typing import Protocol

from rostra.errors import InvalidRequest, NotFound
from rostra.store.tenancy import Tenant

MAX_FILE_BYTES = 32 * 1024 * 1024  # an image's limit (images/limits.py), and far more text than any context holds
MAX_PDF_PAGES = 2000
_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?:;[^;,]*)*;base64,(?P<data>.*)", re.DOTALL)


class FileReader(Protocol):
    """Where uploaded files are read (the Files API's service)."""

    async def read_whole(self, file_id: str, tenant: Tenant, max_bytes: int) -> tuple[str, bytes]:
        """The file's name and contents; NotFound when `tenant` has no such file; InvalidRequest past `max_bytes`."""
        ...


async def read_uploaded(file_id: object, param: str, files: FileReader | None, tenant: Tenant) -> tuple[str, bytes]:
    """An uploaded file's name and bytes, by the `file_id` at `param`."""
    if not isinstance(file_id, str):
        raise InvalidRequest("file_id must be a string", param=param)
    if files is None:
        raise InvalidRequest("this server reads no uploaded files here: send the file's data", param=param)
    try:
        return await files.read_whole(file_id, tenant, MAX_FILE_BYTES)
    except NotFound:
        raise NotFound(f"No such File object: {file_id}", param=param) from None


def decode_file_data(value: str, param: str) -> bytes:
    """`file_data`: a base64 data URL (what the SDKs send: `data:application/pdf;base64,...`), or bare base64."""
    match = _DATA_URL.fullmatch(value.strip())
    text = match["data"] if match else value
    if len(text) // 4 * 3 > MAX_FILE_BYTES + 2:
        raise InvalidRequest(f"the file is larger than this server's limit of {MAX_FILE_BYTES} bytes", param=param,
                             code="file_too_large")
    try:
        return base64.b64decode(re.sub(r"\s+", "", text), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("file data must be base64 (data:<media type>;base64,<data>)", param=param,
                             code="invalid_base64") from None


async def file_text(data: bytes, filename: str, param: str) -> str:
    """The text a model reads of the file `data` (a PDF's extracted text, else its UTF-8 text); a 400 at `param`
    for what has none."""
    if data.startswith(b"%PDF"):
        return await asyncio.to_thread(pdf_text, data, filename, param)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidRequest(f"{filename} is neither a PDF nor UTF-8 text: this server reads text files and PDFs",
                             param=param, code="unsupported_file") from None


def pdf_text(data: bytes, filename: str, param: str) -> str:
    """A PDF's text layer, its pages separated by a blank line (pypdf's extract_text, page by page)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise InvalidRequest(f"{filename} is an encrypted PDF: send it unencrypted", param=param,
                                 code="unsupported_file")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise InvalidRequest(f"{filename} has {len(reader.pages)} pages, more than this server reads "
                                 f"({MAX_PDF_PAGES})", param=param, code="file_too_large")
        pages = [page.extract_text() or "" for page in reader.pages]
    except InvalidRequest:
        raise
    except Exception as exc:  # pypdf's errors on a malformed file are many kinds: each is the client's file at fault
        raise InvalidRequest(f"{filename} is not a PDF this server can read: {exc}", param=param,
                             code="unsupported_file") from None
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not text:
        raise InvalidRequest(f"{filename} has no text layer (a scanned PDF?): this server reads a PDF's text, it "
                             "runs no OCR", param=param, code="unsupported_file")
    return text
