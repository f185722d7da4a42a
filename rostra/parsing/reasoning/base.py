"""The reasoning-parser contract: Text in -> Reasoning (the thinking) and Text (the answer) out.

Most formats mark the thinking with a start and an end marker (<think>…</think>). The parser
is in one of three states:
- deciding: at the start of the output, holding what could still be the start marker;
- reasoning: inside the thinking, holding what could still be the end marker;
- answering: everything is answer text, passed on (to the tool parser).
A format decides what an output that does not open with the start marker means (answer, or
thinking whose start marker the chat template already wrote), and the prompt can say that the
thinking is already open (the template ended with the start marker) or closed.
"""

from __future__ import annotations

from typing import Literal

from rostra.parsing.events import Event, Reasoning, Text, feed_texts
from rostra.parsing.tools.base import merge_text, partial_suffix

State = Literal["deciding", "reasoning", "answering"]


class ReasoningParser:
    name = "base"
    start: str
    end: str
    # What an output that does not begin with `start` is: thinking (the template opened it) or answer.
    unopened_is_reasoning = False
    # Markers that also end the thinking but belong to the answer (Kimi K2 Thinking writes its tool-call
    # section without closing the thinking first): the answer begins with them.
    answer_starts: tuple[str, ...] = ()

    def __init__(self, prompt_text: str = "", enabled: bool = True):
        self.state: State = "deciding"
        if not enabled:
            self.state = "answering"  # e.g. enable_thinking=false: no thinking expected, all is answer
        else:
            opened, closed = prompt_text.rfind(self.start), prompt_text.rfind(self.end)
            if opened >= 0 and opened > closed and not prompt_text[opened + len(self.start):].strip():
                self.state = "reasoning"  # the prompt ends inside an open thinking block
        self._held = ""
        self._after_end = False  # the newlines right after the end marker separate; they are not answer

    @property
    def in_reasoning(self) -> bool:
        return self.state == "reasoning"

    def feed(self, events: list[Event]) -> list[Event]:
        return merge_reasoning(merge_text(feed_texts(events, self._feed_text)))

    def finish(self) -> list[Event]:
        held, self._held = self._held, ""
        if not held:
            return []
        if self.state == "reasoning":
            return [Reasoning(held)]  # cut off (max_tokens) inside the thinking: all of it is reasoning
        if self.state == "deciding" and self.unopened_is_reasoning:
            return [Reasoning(held)]
        return [Text(held)]

    def _feed_text(self, text: str) -> list[Event]:
        if self.state == "answering":
            if self._after_end:
                text = text.lstrip("\n")
                self._after_end = not text
            return [Text(text)] if text else []
        self._held += text
        out: list[Event] = []
        if self.state == "deciding":
            lead = self._held.lstrip()
            if lead.startswith(self.start):
                self._held = lead[len(self.start):]
                self.state = "reasoning"
            elif not lead or self.start.startswith(lead):
                return out  # still could be the start marker
            elif self.unopened_is_reasoning:
                self.state = "reasoning"
            else:
                self.state = "answering"
                held, self._held = self._held, ""
                return [Text(held)]
        # reasoning
        at, size = self._end_of_thinking()
        if at >= 0:
            thinking, rest = self._held[:at], self._held[at + size:]
            self._held = ""
            self.state = "answering"
            self._after_end = size > 0
            return out + ([Reasoning(thinking)] if thinking else []) + self._feed_text(rest)
        keep = max(partial_suffix(self._held, marker) for marker in (self.end, *self.answer_starts))
        thinking = self._held[: len(self._held) - keep]
        self._held = self._held[len(thinking):]
        return out + ([Reasoning(thinking)] if thinking else [])

    def _end_of_thinking(self) -> tuple[int, int]:
        """Where the thinking ends in what is held, and how much of it is the end marker (0: an answer start)."""
        found = [(at, len(self.end)) for at in [self._held.find(self.end)] if at >= 0]
        found += [(at, 0) for marker in self.answer_starts if (at := self._held.find(marker)) >= 0]
        return min(found) if found else (-1, 0)


def merge_reasoning(events: list[Event]) -> list[Event]:
    merged: list[Event] = []
    for event in events:
        if isinstance(event, Reasoning) and merged and isinstance(merged[-1], Reasoning):
            merged[-1] = Reasoning(merged[-1].text + event.text)
        else:
            merged.append(event)
    return merged
