"""Image bytes -> a checked, upright RGB image in a form every engine reads: the client's own bytes where they
already are one (a plain RGB or grey PNG or JPEG, upright), else re-encoded as PNG.

Passing the bytes on saves the re-encoding (three times the decode of a 1024x1024 PNG; a photo re-encoded as PNG
is many times its JPEG) and gives llama.cpp exactly the file its own server would have read. Only raster formats in common use are opened (`formats=` keeps Pillow from trying the rest, EPS's Ghostscript
among them). The size is checked from the header, before a pixel is decoded: a decompression bomb (a few KiB that
declare gigapixels) costs nothing. Decoding is CPU work: `decode_image` runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

from PIL import Image, ImageOps, UnidentifiedImageError

from rostra.core import PromptImage
from rostra.errors import InvalidRequest
from rostra.images.budget import ImageBudget
from rostra.images.limits import ImageLimits

# AVIF is what browsers and phones increasingly save (where this Pillow build reads it).
Image.init()
ORIENTATION = 0x0112  # the EXIF tag
AS_SENT = {"PNG": "image/png", "JPEG": "image/jpeg"}
FORMATS = tuple(name for name in ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF", "AVIF", "ICO", "TGA", "PPM", "QOI")
                if name in Image.OPEN)


def decode_image(data: bytes, param: str, limits: ImageLimits, budget: ImageBudget | None = None) -> PromptImage:
    """The first frame of the image in `data`, EXIF orientation applied, transparency over white; its pixels
    charged to the request's `budget` from the header, before any is decoded."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)  # our limits decide, not Pillow's
        try:
            with Image.open(io.BytesIO(data), formats=FORMATS) as image:
                check_size(image.size, param, limits)
                if budget is not None:
                    budget.take_pixels(image.width * image.height, param)
                image.seek(0)  # GIF, WebP, TIFF: the first frame (page)
                image.load()  # every pixel decoded: a corrupt or truncated file fails here, not in the engine
                media_type = _readable_as_is(image)
                if media_type:
                    return PromptImage(data, image.width, image.height, media_type)
                upright = ImageOps.exif_transpose(image)
                rgb = _flatten(upright)
        except UnidentifiedImageError:
            raise InvalidRequest("the image could not be read: supported formats are "
                                 + ", ".join(f.lower() for f in FORMATS), param=param,
                                 code="invalid_image_format") from None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise _too_large(param, limits) from None
        except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated or corrupt data
            raise InvalidRequest(f"the image could not be decoded: {exc}", param=param, code="invalid_image") from None
    out = io.BytesIO()
    rgb.save(out, format="PNG", compress_level=1)  # lossless; level 1: fast, the engine decodes it at once
    return PromptImage(out.getvalue(), rgb.width, rgb.height)


# Image decoding's own threads, not the default pool that tokenization, templates and file work share: a request of
# many large images then waits for these few rather than holding up every other request's work.
_DECODERS = ThreadPoolExecutor(max_workers=max(1, min(4, len(os.sched_getaffinity(0)))),
                               thread_name_prefix="rostra-image-decode")


async def decode_image_off_loop(data: bytes, param: str, limits: ImageLimits,
                                budget: ImageBudget | None = None) -> PromptImage:
    return await asyncio.get_running_loop().run_in_executor(
        _DECODERS, functools.partial(decode_image, data, param, limits, budget))


def _readable_as_is(image: Image.Image) -> str | None:
    """The media type of a file every engine decodes to these very pixels: PNG or JPEG (llama.cpp's reader takes
    both), RGB or grey (no alpha to flatten, no palette, no CMYK or 16-bit samples), no EXIF rotation to apply."""
    plain = (image.mode in ("RGB", "L") and "transparency" not in image.info
             and image.getexif().get(ORIENTATION, 1) == 1)
    return AS_SENT.get(image.format or "") if plain else None


def check_size(size: tuple[int, int], param: str, limits: ImageLimits) -> None:
    width, height = size
    if width < 1 or height < 1:
        raise InvalidRequest(f"the image has no pixels ({width}x{height})", param=param, code="invalid_image")
    if max(width, height) > limits.max_side or width * height > limits.max_pixels:
        raise InvalidRequest(f"the image is {width}x{height} pixels: this server takes images of at most "
                             f"{limits.max_pixels} pixels and {limits.max_side} pixels a side", param=param,
                             code="image_too_large")


def _too_large(param: str, limits: ImageLimits) -> InvalidRequest:
    return InvalidRequest(f"the image is larger than this server's limit of {limits.max_pixels} pixels",
                          param=param, code="image_too_large")


def _flatten(image: Image.Image) -> Image.Image:
    """RGB; transparent pixels over white (as viewers show them), not over whatever colour they happen to hold."""
    if "A" in image.getbands() or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")
