"""MiniMax-M2 thinking: the template's generation prompt ends with `<think>\n`, so the output is thinking up
to `</think>` (llama.cpp models/templates/unsloth-MiniMax-M2.jinja).

MiniMax-M2 interleaves thinking with tool calls and its model card asks that the thinking go back to it in
the history as the model wrote it, `<think>…</think>` in the assistant's content (its template splits it out
of the content again). Clients rarely send a `reasoning_content` back, so the default for MiniMax-M2 is
`minimax_m2_append_think` (what vLLM recommends for it too): the thinking stays in the content, with the
`<think>` the prompt opened. `minimax_m2` separates it into the reasoning field instead.
"""

from __future__ import annotations

from rostra.parsing.events import Event, Text, feed_texts
from rostra.parsing.reasoning.base import ReasoningParser


class MiniMaxM2ReasoningParser(ReasoningParser):
    name = "minimax_m2"
    start = "<think>"
    end = "</think>"
    unopened_is_reasoning = True  # the template opened the block


class MiniMaxM2AppendThinkReasoningParser(MiniMaxM2ReasoningParser):
    """Everything is content; the `<think>\\n` the prompt opened is put back in front of it."""

    name = "minimax_m2_append_think"

    def __init__(self, prompt_text: str = "", enabled: bool = True):
        super().__init__(prompt_text, enabled)
        self._opening = self.start + "\n" if self.state == "reasoning" else ""
        self.state = "answering"

    @property
    def in_reasoning(self) -> bool:
        return False  # nothing is ever reasoning: the thinking is part of the content

    def feed(self, events: list[Event]) -> list[Event]:
        return feed_texts(events, self._as_content)

    def finish(self) -> list[Event]:
        return []

    def _as_content(self, text: str) -> list[Event]:
        if text and self._opening:
            text, self._opening = self._opening + text, ""
        return [Text(text)] if text else []
