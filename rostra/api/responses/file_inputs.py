"""Files as input: `input_image` and `input_file` parts that name an uploaded file (`file_id`, from POST /v1/files),
carry one (`file_data`) or point at one (`file_url`, fetched as rostra/file_fetch.py says), read into the message
before the model sees it.

An image by file_id becomes the data URL of its bytes (the image pipeline then checks it as any other); a file becomes
the text the model reads: `<file name="NAME">` ... `</file>`, its UTF-8 text between (the Agents SDK and OpenAI's
examples send source, notes, CSV and JSON this way), or a PDF's text (rostra/file_text.py); another binary file is
refused with a 400 naming the part. The input is stored as the model read it (the file's text, the image's
data URL), so a later turn reads the same even once the file is deleted. A file is the asking key's (tenancy): another
key's file_id is a 404, as on GET /v1/files/{id}.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote, urlsplit

from rostra.errors import InvalidRequest
from rostra.file_fetch import fetch_file
from rostra.file_text import FileReader, decode_file_data, file_text, read_uploaded
from rostra.images.limits import ImageLimits
from rostra.store.tenancy import Tenant
# The image formats decoded (images/decode.py), by their first bytes: the data URL needs an image/* type.
_IMAGE_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
                (b"BM", "image/bmp"), (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"))


def reads_files(items: list[dict[str, Any]]) -> bool:
    return any(_needs_reading(part) for item in items for part in _parts(item))


async def with_files_read(items: list[dict[str, Any]], files: FileReader, tenant: Tenant,
                          limits: ImageLimits) -> list[dict[str, Any]]:
    """The items with every file part read into its message (see the module's docstring); `limits`: where and how
    much a `file_url` may be fetched from."""
    out = []
    for index, item in enumerate(items):
        parts = _parts(item)
        if not any(_needs_reading(part) for part in parts):
            out.append(item)
            continue
        read = [await _read_part(part, f"input[{index}].content[{position}]", files, tenant, limits)
                if _needs_reading(part) else part for position, part in enumerate(parts)]
        out.append({**item, "content": read})
    return out


def _parts(item: dict[str, Any]) -> list[Any]:
    content = item.get("content") if item.get("type") == "message" else None
    return content if isinstance(content, list) else []


def _needs_reading(part: Any) -> bool:
    if not isinstance(part, dict):
        return False
    return part.get("type") == "input_file" or (part.get("type") == "input_image" and bool(part.get("file_id"))
                                                 and not part.get("image_url"))


async def _read_part(part: dict[str, Any], param: str, files: FileReader, tenant: Tenant,
                     limits: ImageLimits) -> dict[str, Any]:
    if part["type"] == "input_image":
        _, data = await read_uploaded(part["file_id"], f"{param}.file_id", files, tenant)
        media_type = next((kind for magic, kind in _IMAGE_MAGIC if data.startswith(magic)), None)
        if media_type is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            media_type = "image/webp"
        if media_type is None:
            raise InvalidRequest(f"the file {part['file_id']} is not an image this server reads (PNG, JPEG, GIF, "
                                 "WebP, BMP, TIFF)", param=f"{param}.file_id", code="invalid_image_format")
        return {**part, "image_url": f"data:{media_type};base64,{base64.b64encode(data).decode()}"}
    if part.get("file_url"):
        if not isinstance(part["file_url"], str):
            raise InvalidRequest("file_url must be a string", param=f"{param}.file_url")
        filename = unquote(urlsplit(part["file_url"]).path.rsplit("/", 1)[-1]) or "file"
        data = await fetch_file(part["file_url"], f"{param}.file_url", limits)
    elif part.get("file_id"):
        filename, data = await read_uploaded(part["file_id"], f"{param}.file_id", files, tenant)
    elif isinstance(part.get("file_data"), str):
        filename, data = part.get("filename") or "file", decode_file_data(part["file_data"], f"{param}.file_data")
    else:
        raise InvalidRequest("an input_file needs file_id, file_url or file_data", param=param)
    return {"type": "input_text", "text": f'<file name="{part.get("filename") or filename}">\n'
                                          f"{await file_text(data, filename, param)}\n</file>"}
