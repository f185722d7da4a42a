"""The body of a llama.cpp /completion request with images, built without holding the event loop.

llama.cpp takes images as base64 strings inside the JSON body. A 32 MiB image is 44 MB of base64, and every
whole copy of that (the encoding, JSON's string, the body's concatenation) costs the loop about 0.2 s on this
machine (measured: base64 0.55 s, orjson 0.23 s, a concatenation 0.19 s on a busy 2-core box). So:

- an image's base64 is made once per image (once per request: every choice and think-first's second generation
  share the prompt's images), in a thread, in pieces small enough that the thread hands the interpreter back
  between them;
- the body is never joined: its small JSON part is encoded with the prompt's text, and the images' pieces are
  written after it as they are (the loopback client writes a list of pieces).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from rostra.core import PromptImage

# Bytes of image per base64 piece: a multiple of 3, so the pieces' concatenation is the whole image's base64;
# about 10 ms of encoding each, after which the loop gets the interpreter back.
PIECE = 3 * 256 * 1024

# Images being encoded now, by identity: concurrent choices of one request wait for the same encoding. The entry
# holds its image, so its id cannot be reused meanwhile; the result is kept on the image (see encoded_image).
_pending: dict[int, tuple[PromptImage, asyncio.Future[tuple[bytes, ...]]]] = {}


def _encode(data: bytes) -> tuple[bytes, ...]:
    return tuple(base64.b64encode(data[start:start + PIECE]) for start in range(0, len(data), PIECE))


async def encoded_image(image: PromptImage) -> tuple[bytes, ...]:
    """The image's base64 as a JSON string's pieces (the quotes included): encoded once, off the event loop."""
    done = image.__dict__.get("_json_pieces")
    if done is not None:
        return done
    entry = _pending.get(id(image))
    if entry is None:
        future = asyncio.ensure_future(asyncio.to_thread(_encode, image.data))
        entry = _pending[id(image)] = (image, future)
        future.add_done_callback(lambda _: _pending.pop(id(image), None))
    pieces = (b'"', *await asyncio.shield(entry[1]), b'"')
    # A frozen dataclass: the cache is set around its __setattr__ (it is no field: equality and repr ignore it).
    object.__setattr__(image, "_json_pieces", pieces)
    return pieces


@dataclass(frozen=True)
class MultimodalPrompt:
    """llama.cpp's text-and-images prompt, encoded: the text as JSON, each image as its JSON string's pieces."""

    text_json: bytes
    images: tuple[tuple[bytes, ...], ...]

    @classmethod
    async def of(cls, text: str, images: Sequence[PromptImage]) -> "MultimodalPrompt":
        encoded = await asyncio.gather(*(encoded_image(image) for image in images))
        return cls(orjson.dumps(text), tuple(encoded))

    def body(self, fields: dict[str, Any]) -> list[bytes]:
        """The JSON body: `fields` (the request's other fields, at least one) and this as its `prompt`, in
        pieces never joined (the images' are this prompt's own, shared by every choice)."""
        head = orjson.dumps(fields)
        pieces = [head[:-1], b',"prompt":{"prompt_string":', self.text_json, b',"multimodal_data":[']
        for index, image in enumerate(self.images):
            if index:
                pieces.append(b",")
            pieces.extend(image)
        pieces.append(b"]}}")
        return pieces
