"""How many tokens llama.cpp gives an image, from the mmproj GGUF's metadata and the image's size.

llama.cpp's server counts a prompt with images as mtmd (tools/mtmd) tokenizes it: the text between the media
markers as text tokens, each image as the embeddings its projector makes plus the text mtmd puts around them
(`usage.prompt_tokens`, `tokens_evaluated`). xllamacpp does not expose mtmd's chunk counts, so rostra computes them
before generating, as clip.cpp and mtmd.cpp do, for the projector types real vision GGUFs use:
- `mlp`, `mlp_norm` (LLaVA 1.5 style): the image resized to the encoder's square input, one embedding per patch,
  (image_size / patch_size)^2 whatever the image's size; no text around it.
- `gemma3` (Gemma 3): the same square, its patches average-pooled by `clip.vision.projector.scale_factor` (4 unless
  given) on each side; between `<start_of_image>` and `<end_of_image>`.
- `qwen2vl_merger`, `qwen2.5vl_merger`, `qwen3vl_merger` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): the image resized to a
  multiple of patch_size x spatial_merge_size on each side, kept between 8 and 4,096 merged tokens (Qwen's
  "smart resize"), one embedding per 2x2 patches; between `<|vision_start|>` and `<|vision_end|>`.
- `pixtral` (Pixtral, Mistral Small 3.1): the same resize, kept between 8 and 1,024 tokens, one embedding per
  (merged) patch plus an `[IMG_BREAK]` embedding after every row but the last; `[IMG_END]` after it.
- `idefics3` (SmolVLM, Idefics3): the image scaled so its longer side is `clip.vision.preproc_image_size`, cut into
  tiles of the encoder's square, each tile's patches merged by `clip.vision.projector.scale_factor` on each side
  and preceded by `<fake_token_around_image><row_R_col_C>`, a newline token between rows, then the whole image
  (the overview) between `\n\n<fake_token_around_image><global-img>` and `<fake_token_around_image>`, which mtmd
  looks up as one token each.
- `internvl` (InternVL): an image larger than the encoder's square cut into the grid of tiles (1 to 12 unless
  `clip.vision.preproc_min_tiles`/`max_tiles` say) that shows most of it, the whole image after them, each
  pixel-shuffled by `clip.vision.projector.scale_factor`; between `<img>` and `</img>`.
The text around an image is tokenized with the model's own vocabulary (as special tokens where it has them).
Every other projector type (other tiled ones such as lfm2 and llava 1.6's grid pinpoints, and any newer)
is not computed: `image_counter` gives None, and such a prompt counts each image as its marker's text until
llama.cpp reports its own count at the end of the generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from rostra.core import PromptImage
from rostra.engines.llamacpp_image_tiles import idefics3_grid, internvl_tiles

_SQUARE = frozenset({"mlp", "mlp_norm", "gemma3"})
_QWEN = frozenset({"qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger"})
# the text mtmd adds around each image (mtmd.cpp's img_beg, img_end), by projector type
_WRAPPERS: dict[str, tuple[str, ...]] = {
    "gemma3": ("<start_of_image>", "<end_of_image>"),
    **{qwen: ("<|vision_start|>", "<|vision_end|>") for qwen in _QWEN},
    "pixtral": ("[IMG_END]",),
    "internvl": ("<img>", "</img>"),
}
# the fewest and most tokens an image may take (clip.cpp's set_limit_image_tokens), for the resizing projectors
# (llama.cpp's --image-min-tokens / --image-max-tokens would replace them: rostra sets neither)
_TOKEN_LIMITS = {**{qwen: (8, 4096) for qwen in _QWEN}, "pixtral": (8, 1024)}


@dataclass(frozen=True)
class ImageTokens:
    """One image as mtmd lays it out: the projector's embeddings, the text put around them (tokenized), and the
    tokens put in by id."""

    embeddings: int
    wrappers: tuple[str, ...] = ()
    looked_up: int = 0  # mtmd's lookup_token: one token each, whatever the text would tokenize to


@dataclass(frozen=True)
class ImageCounter:
    """A projector's counting rule, from its GGUF metadata (clip.cpp's hparams of the same names)."""

    projector: str
    image_size: int
    patch_size: int
    merge: int  # gemma3's pooling; idefics3's and internvl's pixel shuffle; Qwen's and Pixtral's spatial merge
    longest_edge: int = 0  # idefics3: the longer side an image is scaled to before it is tiled
    min_tiles: int = 1  # internvl: the fewest and most tiles an image is cut into
    max_tiles: int = 12

    def count(self, image: PromptImage) -> ImageTokens:
        wrappers = _WRAPPERS.get(self.projector, ())
        if self.projector in ("idefics3", "internvl"):
            return self._tiled(image.width, image.height)
        if self.projector in _SQUARE:
            patches = (self.image_size // self.patch_size) ** 2
            return ImageTokens(patches // self.merge ** 2 if self.projector == "gemma3" else patches, wrappers)
        width, height = self._resized(image.width, image.height)
        if self.projector in _QWEN:  # clip.cpp merges 2x2 patches whatever spatial_merge_size says
            return ImageTokens((width // (self.patch_size * 2)) * (height // (self.patch_size * 2)), wrappers)
        columns, rows = width // self.patch_size // self.merge, height // self.patch_size // self.merge
        return ImageTokens(rows * columns + rows - 1, wrappers)  # pixtral: one [IMG_BREAK] between rows

    def _tiled(self, width: int, height: int) -> ImageTokens:
        per_tile = (self.image_size // self.patch_size) ** 2 // self.merge ** 2
        if self.projector == "internvl":  # the tiles and the whole image (last), in one chunk between <img>, </img>
            tiles = internvl_tiles(width, height, self.image_size, self.min_tiles, self.max_tiles)
            return ImageTokens(per_tile * (tiles + 1), _WRAPPERS["internvl"])
        # idefics3: mtmd.cpp lays the tiles out row by row, each after its own text, the whole image last
        columns, rows = idefics3_grid(width, height, self.image_size, self.longest_edge)
        wrappers = tuple(f"<fake_token_around_image><row_{row}_col_{column}>"
                         for row in range(1, rows + 1) for column in range(1, columns + 1))
        # a newline between rows; "\n\n", <fake_token_around_image>, <global-img> before the overview, and
        # <fake_token_around_image> after it
        return ImageTokens(per_tile * (rows * columns + 1), wrappers, max(rows - 1, 0) + 4)

    def _resized(self, width: int, height: int) -> tuple[int, int]:
        """The size mtmd resizes an image to: sides a multiple of `align`, the area between the type's limits
        (mtmd-image.cpp's calc_size_preserved_ratio, in single-precision floats as there)."""
        align = self.patch_size * self.merge
        fewest, most = _TOKEN_LIMITS[self.projector]
        min_pixels, max_pixels = fewest * align * align, most * align * align
        f32 = np.float32

        def by_factor(rounding: Callable[[Any], Any], value: Any) -> int:
            return int(rounding(f32(value) / f32(align))) * align

        def half_up(value: Any) -> Any:  # C's round: halves away from zero (the values here are positive)
            return np.floor(value + f32(0.5))

        new_height, new_width = max(align, by_factor(half_up, height)), max(align, by_factor(half_up, width))
        if new_height * new_width > max_pixels:
            beta = np.sqrt(f32(height * width) / f32(max_pixels))
            new_height = max(align, by_factor(np.floor, f32(height) / beta))
            new_width = max(align, by_factor(np.floor, f32(width) / beta))
        elif new_height * new_width < min_pixels:
            beta = np.sqrt(f32(min_pixels) / f32(height * width))
            new_height, new_width = by_factor(np.ceil, f32(height) * beta), by_factor(np.ceil, f32(width) * beta)
        return new_width, new_height


def image_counter(metadata: dict[str, Any]) -> ImageCounter | None:
    """The counting rule for the mmproj whose metadata this is; None for a projector counted only by llama.cpp."""
    projector = metadata.get("clip.vision.projector_type", metadata.get("clip.projector_type"))
    size, patch = metadata.get("clip.vision.image_size"), metadata.get("clip.vision.patch_size")
    if not isinstance(patch, int) or patch <= 0 or not isinstance(size, int):
        return None
    if projector in ("mlp", "mlp_norm") and "clip.vision.image_grid_pinpoints" not in metadata:
        return ImageCounter(projector, size, patch, 1)
    if projector == "gemma3":
        return ImageCounter(projector, size, patch, _positive(metadata.get("clip.vision.projector.scale_factor"), 4))
    if projector == "idefics3" and size > 0:
        return ImageCounter(projector, size, patch, _positive(metadata.get("clip.vision.projector.scale_factor"), 1),
                            _positive(metadata.get("clip.vision.preproc_image_size"), 0))
    if projector == "internvl" and size > 0:
        return ImageCounter(projector, size, patch, _positive(metadata.get("clip.vision.projector.scale_factor"), 1),
                            min_tiles=_positive(metadata.get("clip.vision.preproc_min_tiles"), 1),
                            max_tiles=_positive(metadata.get("clip.vision.preproc_max_tiles"), 12))
    if projector in _QWEN or projector == "pixtral":
        merge = _positive(metadata.get("clip.vision.spatial_merge_size"), 2 if projector in _QWEN else 1)
        return ImageCounter(projector, size, patch, merge)
    return None


def _positive(value: Any, default: int) -> int:
    return value if isinstance(value, int) and value > 0 else default


async def prompt_tokens(counter: ImageCounter, pieces: Sequence[str], images: Sequence[PromptImage],
                        text_tokens: Callable[[str], Awaitable[int]]) -> int:
    """A prompt's tokens as mtmd counts them: `pieces` are the text between the images' markers (one more than
    the images), each tokenized on its own as mtmd does, and so is each text around an image."""
    wrapper_tokens: dict[str, int] = {}
    total = sum([await text_tokens(piece) for piece in pieces if piece])
    for image in images:
        layout = counter.count(image)
        for text in layout.wrappers:
            if text not in wrapper_tokens:
                wrapper_tokens[text] = await text_tokens(text)
            total += wrapper_tokens[text]
        total += layout.embeddings + layout.looked_up
    return total
