"""Thinking between markers, and an answer between markers of its own that are not the answer's text.

Command R7B / Command A write `<|START_THINKING|>…<|END_THINKING|>` and then `<|START_RESPONSE|>…<|END_RESPONSE|>`;
Hunyuan-A13B `<think>…</think>` and then `<answer>…</answer>`. The thinking is split out as every reasoning
parser does (base.py); the answer's markers are dropped wherever they stand in the answer, held back while the
text could still be the start of one, so a stream folds to the whole output's answer whatever its deltas.
"""

from __future__ import annotations

from rostra.parsing.events import Event, Text
from rostra.parsing.reasoning.base import ReasoningParser
from rostra.parsing.tools.base import merge_text, partial_suffix


class MarkerDropper:
    """Text with the given markers taken out, as it streams."""

    def __init__(self, markers: tuple[str, ...]):
        self.markers = markers
        self._held = ""  # a tail that may be the start of a marker

    def feed(self, text: str) -> str:
        text = self._held + text
        for marker in self.markers:
            text = text.replace(marker, "")
        keep = max(partial_suffix(text, marker) for marker in self.markers)
        self._held = text[len(text) - keep:]
        return text[:len(text) - keep]

    def finish(self) -> str:
        held, self._held = self._held, ""
        return held


class MarkedAnswerReasoningParser(ReasoningParser):
    answer_markers: tuple[str, ...]  # the answer's own markup: never content

    def __init__(self, prompt_text: str = "", enabled: bool = True):
        super().__init__(prompt_text, enabled)
        self._dropper = MarkerDropper(self.answer_markers)

    def feed(self, events: list[Event]) -> list[Event]:
        return self._drop(super().feed(events))

    def finish(self) -> list[Event]:
        events = self._drop(super().finish())
        rest = self._dropper.finish()
        return merge_text(events + ([Text(rest)] if rest else []))

    def _drop(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, Text) and not event.commentary:
                text = self._dropper.feed(event.text)
                out += [Text(text)] if text else []
            else:
                out.append(event)
        return out
