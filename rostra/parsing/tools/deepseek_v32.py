"""deepseek_v32: DeepSeek V3.2's DSML tool calls (its chat template, DeepSeek-V3.2.jinja in llama.cpp's models/templates).

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

(The bars are fullwidth "｜", U+FF5C.) One block holds every call. A value is written as is: a string raw, any
other value as JSON (`string="false"`). That is Qwen3-Coder's shape under other tags, so the block's tags are
rewritten to Qwen3-Coder's (`<function=NAME>`, `<parameter=KEY>`) as they arrive and the qwen3_coder machinery
reads it: a call starts at its `invoke` when the tool is known, string parameters stream as they are written,
other values are converted by the tool's schema once whole (without a schema type, JSON if it parses, else the
text); a block that cannot be read before a call started stays text, whole. Values are taken as written; the
`string` attribute is not needed where the tool's schema gives the type.
"""

from __future__ import annotations

import re

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, ParsedCall, partial_suffix
from rostra.parsing.tools.qwen3_coder import Qwen3CoderToolParser
from rostra.parsing.tools.tagged_calls_stream import FunctionStream

DSML = "\uff5cDSML\uff5c"
CALLS_BEGIN, CALLS_END = f"<{DSML}function_calls>", f"</{DSML}function_calls>"
TAG_OPENERS = (f"<{DSML}", f"</{DSML}")
TAG_LIMIT = 500  # an open tag not closed by ">" in this much text is not a tag: passed on as it is
_TAGS = [
    (re.compile(rf'<{DSML}invoke\s+name="([^"]*)"\s*>'), r"<function=\1>"),
    (re.compile(rf"</{DSML}invoke\s*>"), "</function>"),
    (re.compile(rf'<{DSML}parameter\s+name="([^"]*)"(?:\s+string="[^"]*")?\s*>'), r"<parameter=\1>"),
    (re.compile(rf"</{DSML}parameter\s*>"), "</parameter>"),
]


def rewrite_tag(tag: str) -> str:
    """A DSML tag as Qwen3-Coder's; any other text as it is."""
    for pattern, replacement in _TAGS:
        if pattern.fullmatch(tag):
            return pattern.sub(replacement, tag)
    return tag


class TagRewriter:
    """Rewrites DSML tags in a stream of text; holds only what could still be (the start of) a tag."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        self._held += text
        out: list[str] = []
        while self._held:
            found = [at for opener in TAG_OPENERS if (at := self._held.find(opener)) >= 0]
            if not found:
                keep = max(partial_suffix(self._held, opener) for opener in TAG_OPENERS)
                out.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep:]
                break
            at = min(found)
            close = self._held.find(">", at)
            if close < 0 and len(self._held) - at <= TAG_LIMIT:
                out.append(self._held[:at])
                self._held = self._held[at:]
                break
            end = close + 1 if close >= 0 else at + 1
            out.append(self._held[:at] + rewrite_tag(self._held[at:end]))
            self._held = self._held[end:]
        return "".join(out)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def rewrite(block: str) -> str:
    rewriter = TagRewriter()
    return rewriter.feed(block) + rewriter.flush()


class DeepSeekV32ToolParser(Qwen3CoderToolParser):
    name = "deepseek_v32"
    start = CALLS_BEGIN
    end = CALLS_END
    end_optional = True

    def new_stream(self) -> BlockStream | None:
        return DsmlStream(self)

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        return super().parse_block(rewrite(block))


class DsmlStream:
    """The block's text rewritten to Qwen3-Coder tags, streamed by a FunctionStream."""

    def __init__(self, parser: DeepSeekV32ToolParser):
        self._calls = FunctionStream(parser)
        self._rewriter = TagRewriter()

    @property
    def started(self) -> bool:
        return self._calls.started

    def feed(self, text: str) -> tuple[list[Event], str]:
        return self._calls.feed(self._rewriter.feed(text))

    def end(self) -> list[Event]:
        events, _ = self._calls.feed(self._rewriter.flush())
        return events + self._calls.end()
