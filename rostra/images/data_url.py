"""`data:` URLs as clients send images: `data:image/png;base64,iVBOR...`."""

from __future__ import annotations

import binascii
import base64
import re

from rostra.errors import InvalidRequest

_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(;[^;,]*)*),(?P<data>.*)", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")


def decode_data_url(url: str, param: str, max_bytes: int) -> bytes:
    """The bytes of a base64 `data:` URL of an image media type; anything else is a 400 naming `param`."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise InvalidRequest("the image's data URL is malformed: expected data:image/<type>;base64,<data>",
                             param=param, code="invalid_image_url")
    media_type = match["type"].strip().lower()
    if not media_type.startswith("image/"):
        raise InvalidRequest(f"the image's data URL has media type {media_type or 'none'!r}: an image/* type is "
                             "needed", param=param, code="invalid_image_format")
    if "base64" not in [piece.strip().lower() for piece in match["params"].split(";")]:
        raise InvalidRequest("the image's data URL must be base64-encoded (data:image/<type>;base64,...)",
                             param=param, code="invalid_image_url")
    return decode_base64(match["data"], param, max_bytes)


def decode_base64(data: str, param: str, max_bytes: int) -> bytes:
    """Strict base64 (line breaks allowed, as some encoders wrap): a stray character is a 400, not skipped."""
    text = _WHITESPACE.sub("", data)
    if len(text) // 4 * 3 > max_bytes + 2:  # refused before decoding anything that large
        raise InvalidRequest(f"the image is larger than this server's limit of {max_bytes} bytes", param=param,
                             code="image_too_large")
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("the image's base64 data is invalid", param=param, code="invalid_base64") from None
    if not decoded:
        raise InvalidRequest("the image's data is empty", param=param, code="invalid_image")
    if len(decoded) > max_bytes:
        raise InvalidRequest(f"the image is larger than this server's limit of {max_bytes} bytes", param=param,
                             code="image_too_large")
    return decoded
