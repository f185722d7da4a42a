"""Files by URL, for every API that takes one: a Responses `input_file` with `file_url`, a Messages `document`
with a `url` source. Fetched through the image fetcher's guard (rostra/images/fetch.py: http(s) only, public
addresses only unless `--image-allow-hosts` names them, redirects checked hop by hop, bounded in time), bounded at
MAX_FILE_BYTES, and only where URLs are fetched at all (`--no-image-urls` stops these too). Every refusal is a 400
naming the part that held the URL.
"""

from __future__ import annotations

import re

from rostra.errors import InvalidRequest
from rostra.file_text import MAX_FILE_BYTES
from rostra.images.fetch import FetchFailed, FetchRefused, ImageFetcher
from rostra.images.limits import ImageLimits

# What a file URL may answer: the files rostra reads (file_text.py), and the generic types servers give them.
DOCUMENT_TYPES = ("application/pdf", "text/", "application/json", "application/xml", "application/x-yaml",
                  "application/yaml")
_IMAGE_WORD = re.compile(r"(?<![-\w])image(s?)\b(?!-)")


async def fetch_file(url: str, param: str, limits: ImageLimits) -> bytes:
    """The body at `url`, or a 400 at `param` saying why not."""
    if not limits.fetch_urls:
        raise InvalidRequest("this server fetches no URLs (--no-image-urls): send the file's data or upload it",
                             param=param, code="unsupported_file")
    fetcher = ImageFetcher(limits, accepts=DOCUMENT_TYPES)
    received = 0

    def charge(count: int) -> None:
        nonlocal received
        received += count
        if received > MAX_FILE_BYTES:
            raise InvalidRequest(f"the file is larger than this server reads ({MAX_FILE_BYTES} bytes)",
                                 param=param, code="file_too_large")
    try:
        return await fetcher.fetch(url, charge)
    except FetchRefused as exc:
        raise InvalidRequest(f"the file URL is not fetched: {_as_file(exc)}", param=param) from None
    except FetchFailed as exc:
        raise InvalidRequest(f"the file could not be fetched: {_as_file(exc)}", param=param) from None
    finally:
        await fetcher.close()


def _as_file(exc: Exception) -> str:
    """The fetcher's reason, which speaks of images, said of a file (its flag's name kept)."""
    return _IMAGE_WORD.sub(r"file\1", str(exc).replace("an image", "a file"))
