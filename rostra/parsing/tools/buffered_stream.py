"""BufferedStream: the feed loop of the streamers that read a block of calls state by state.

A streamer keeps the text its current state has not consumed yet in `_buf`; `feed` appends a delta and
runs `_step` until a step says it needs more text (or the buffer is empty). Each step consumes what it
can, whatever the delta boundaries were, so one delta of many tokens and many deltas of one character
make the same events. In WHOLE the block is the parser's to parse whole: nothing is read here.
"""

from __future__ import annotations

from rostra.parsing.events import Event

WHOLE = "whole"


class BufferedStream:
    state: str

    def __init__(self) -> None:
        self._buf = ""  # text of the current state not yet consumed

    def feed(self, text: str) -> tuple[list[Event], str]:
        """Events for `text`, and what follows the block (always "": the caller finds the block's end)."""
        if self.state == WHOLE:
            return [], ""
        self._buf += text
        out: list[Event] = []
        while self._buf and self._step(out):
            pass
        return out, ""

    def _step(self, out: list[Event]) -> bool:
        """One state's work on `_buf`, its events appended to `out`; whether to go on with what is left."""
        raise NotImplementedError
