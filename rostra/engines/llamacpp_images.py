"""How many tokens llama.cpp's multimodal projector gives an image, from the mmproj GGUF's metadata.

llama.cpp's server counts a prompt with images as mtmd tokenizes it: the text between the media markers as text
tokens, each image as the embeddings its projector makes (`usage.prompt_tokens`, `tokens_evaluated`). xllamacpp
does not expose mtmd's chunk counts, so the count is computed as clip.cpp computes it where the projector fixes it:
LLaVA-style projectors (`mlp`, `mlp_norm`) resize every image to the encoder's square input and emit one embedding
per patch, (image_size / patch_size)^2 whatever the image's size. Other projectors (tiling, merging by the image's
own size) are not computed here: their prompts count each image as its marker's text until llama.cpp reports its
own count at the end of the generation.
"""

from __future__ import annotations

from typing import Any

_PER_PATCH = frozenset({"mlp", "mlp_norm"})


def fixed_image_tokens(metadata: dict[str, Any]) -> int | None:
    """Tokens per image for a projector whose count does not depend on the image, else None."""
    projector = metadata.get("clip.projector_type")
    size, patch = metadata.get("clip.vision.image_size"), metadata.get("clip.vision.patch_size")
    if projector not in _PER_PATCH or not isinstance(size, int) or not isinstance(patch, int) or patch <= 0:
        return None
    return (size // patch) ** 2
