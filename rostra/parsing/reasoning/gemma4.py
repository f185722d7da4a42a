"""Gemma 4: thinking in a `thought` channel, `<|channel>thought\\n…<channel|>`, then the answer.

The chat template turns thinking on with `enable_thinking` (a `<|think|>` token in the system turn); with it off
the generation prompt closes an empty channel itself (`<|channel>thought\\n<channel|>`: llama.cpp
models/templates/gemma4.jinja), so the output is all answer. Past turns' thinking is stripped from history the
same way (its `strip_thinking` macro drops what is between `<|channel>` and `<channel|>`).
"""

from __future__ import annotations

from rostra.parsing.events import Event
from rostra.parsing.reasoning.base import ReasoningParser


class Gemma4ReasoningParser(ReasoningParser):
    name = "gemma4"
    start = "<|channel>thought\n"
    end = "<channel|>"

    def finish(self) -> list[Event]:
        # An output that stops inside `<|channel>thought\n` (cut by max_tokens) opened a channel, no answer: its
        # `<|channel>` is a special token, never prose, so it is dropped rather than given as content.
        if self.state == "deciding" and self._held.strip() and self.start.startswith(self._held.lstrip()):
            self._held = ""
        return super().finish()
