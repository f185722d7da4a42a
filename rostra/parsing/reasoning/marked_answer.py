"""Thinking between markers, and an answer between markers of its own that are not the answer's text.

Command R7B / Command A write `<|START_THINKING|>…<|END_THINKING|>` and then `<|START_RESPONSE|>…<|END_RESPONSE|>`;
Hunyuan-A13B `<think>…</think>` and then `<answer>…</answer>`. The thinking is split out as every reasoning
parser does (base.py); the answer's markers are dropped wherever they stand in the answer, held back while the
text could still be the start of one, so a stream folds to the whole output's answer whatever its deltas.
"""

from __future__ import annotations

from rostra.parsing.events import Event, Text
from rostra.parsing.reasoning.base import ReasoningParser
from rostra.parsing.tools.base import merge_text


class MarkerDropper:
    """Text with the given markers taken out, as it streams. Read left to right: where a marker begins it is
    dropped (the longest that matches), and where the text so far could still become a longer marker the rest is
    held until it is known; so "<answer>" is not dropped before it is known not to be "<answer>\n", and every
    split of the text gives the same result."""

    def __init__(self, markers: tuple[str, ...]):
        self.markers = tuple(sorted(markers, key=len, reverse=True))
        self._starts = "".join(sorted({marker[0] for marker in markers}))
        self._held = ""  # from where a marker may begin

    def feed(self, text: str) -> str:
        return self._scan(self._held + text, final=False)

    def finish(self) -> str:
        held, self._held = self._held, ""
        return self._scan(held, final=True)

    def _scan(self, text: str, final: bool) -> str:
        out, i = [], 0
        while i < len(text):
            at = next((j for j in range(i, len(text)) if text[j] in self._starts), len(text))
            out.append(text[i:at])
            if at == len(text):
                break
            rest = text[at:]
            if not final and any(len(m) > len(rest) and m.startswith(rest) for m in self.markers):
                self._held = rest  # it may still become a marker: wait for more
                return "".join(out)
            whole = next((m for m in self.markers if rest.startswith(m)), None)
            out.append("" if whole else text[at])
            i = at + (len(whole) if whole else 1)
        self._held = ""
        return "".join(out)


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
