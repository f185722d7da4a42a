"""How a chat template takes a message's content (vLLM's chat_template_content_format): `string`, the parts
joined into one string; `openai`, the list of parts ({"type": "text", "text": ...}); `auto`, read from the
template's source: one that loops over a message's content takes the list."""

from __future__ import annotations

import functools
import re
from typing import Literal

from rostra.turn import ContentFormat

ResolvedFormat = Literal["string", "openai"]

# `{% for part in message['content'] %}`, `message.content`, `messages[0]["content"]`, with filters after it.
_LOOPS_OVER_CONTENT = re.compile(r"""\{%-?\s*for\s+\w+\s+in\s+[\w.\[\]'"]*?(\[\s*['"]content['"]\s*\]|\.content(?!\w))""")


@functools.lru_cache(maxsize=32)
def iterates_content(source: str) -> bool:
    return _LOOPS_OVER_CONTENT.search(source) is not None


def resolve_content_format(chosen: ContentFormat, source: str) -> ResolvedFormat:
    if chosen == "auto":
        return "openai" if iterates_content(source) else "string"
    return chosen
