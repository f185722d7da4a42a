"""`OWNER/NAME[:QUANT]` and Ollama's spelling `hf.co/OWNER/NAME[:QUANT]`: a GGUF repository on the Hub."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# The Hub's repository names: letters, digits, `-`, `_`, `.` (no `--` or `..` at the ends, not checked here).
_REFERENCE = re.compile(r"^(?:(?:https?://)?(?:hf\.co|huggingface\.co)/)?"
                        r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+?)(?::(?P<quant>[\w.-]+))?$")


@dataclass(frozen=True)
class HubReference:
    repo: str  # OWNER/NAME
    quant: str | None  # what the chosen file's name must contain; None: the default preference order

    @property
    def label(self) -> str:
        """How the model is named when served: the reference as given, without the host."""
        return f"{self.repo}:{self.quant}" if self.quant else self.repo

    @staticmethod
    def parse(text: str) -> HubReference | None:
        """The reference `text` spells, or None when it is not one (a path, a file name)."""
        match = _REFERENCE.match(text.strip())
        if match is None or match["repo"].endswith(".gguf"):
            return None
        return HubReference(match["repo"], match["quant"])


def hub_reference(model: str | None) -> HubReference | None:
    """The Hub reference a MODEL argument makes: one that is not an existing path and reads as OWNER/NAME[:QUANT]."""
    if not model or Path(model).expanduser().exists():
        return None
    return HubReference.parse(model)
