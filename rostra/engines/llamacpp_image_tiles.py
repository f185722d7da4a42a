"""How llama.cpp's mtmd cuts an image into tiles, for the tiling projectors (llamacpp_images.py counts their tokens):
the grid of tiles as mtmd-image.cpp computes it, in single-precision floats as there."""

from __future__ import annotations

import numpy as np

_F32 = np.float32


def idefics3_grid(width: int, height: int, tile: int, longest_edge: int) -> tuple[int, int]:
    """(columns, rows): the image scaled (up or down) so its longer side is `longest_edge`, each side then rounded up
    to whole tiles; no tiles without a longest edge."""
    if longest_edge <= 0:
        return 0, 0
    scale = min(_F32(longest_edge) / _F32(width), _F32(longest_edge) / _F32(height))
    columns, rows = (int(np.ceil(_F32(side) * scale / _F32(tile))) for side in (width, height))
    return columns, rows


def internvl_tiles(width: int, height: int, tile: int, min_tiles: int, max_tiles: int) -> int:
    """How many tiles: none when the image fits one tile, else those of the grid (a x b tiles, min_tiles to
    max_tiles of them) that shows most of the image's pixels, the least padding breaking ties (llava-uhd's choice
    among its candidate resolutions)."""
    if (width <= tile and height <= tile) or min_tiles < 1:
        return 0
    best, most_shown, least_wasted = (0, 0), 0, 2**31 - 1  # (C's INT_MAX, as there)
    for columns in range(min_tiles, max_tiles + 1):
        for rows in range(max(-(-min_tiles // columns), min_tiles), min(max_tiles // columns, max_tiles) + 1):
            scale = min(_F32(columns * tile) / _F32(width), _F32(rows * tile) / _F32(height))
            shown = min(int(_F32(width) * scale) * int(_F32(height) * scale), width * height)
            wasted = columns * rows * tile * tile - shown
            if shown > most_shown or (shown == most_shown and wasted < least_wasted):
                best, most_shown, least_wasted = (columns, rows), shown, wasted
    return best[0] * best[1]
