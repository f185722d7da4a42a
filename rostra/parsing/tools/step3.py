"""step3: StepFun Step-3's tool calls, steptml invoke/parameter elements inside DeepSeek-like call tokens:

    <｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather"><steptml:parameter
    name="city">Tokyo</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_sep｜><｜tool_call_begin｜>…
    <｜tool_calls_end｜>

(one line in the output; vLLM's tests/tool_parsers/test_step3_tool_parser.py, which also has a call whose
invoke follows a DeepSeek-style head `function<｜tool_sep｜>NAME\\n`). The bars are fullwidth (U+FF5C). A value is
the raw text between its tags, whitespace included (it is data: an edit tool's `old_string`), converted by the
parameter's schema type. All calls sit in one section; a call streams from its invoke on (tagged_calls_stream),
the `<｜tool_call_end｜>` / `<｜tool_sep｜>` tokens between calls are markup.
"""

from __future__ import annotations

import re

from rostra.parsing.events import Event
from rostra.parsing.tools.base import BlockStream, ParsedCall
from rostra.parsing.tools.tagged_calls import CallTags, TaggedCallsToolParser
from rostra.parsing.tools.tagged_calls_stream import AFTER, HEAD, HEAD_LIMIT, FunctionStream

BAR = "\uff5c"
CALLS_BEGIN, CALLS_END = f"<{BAR}tool_calls_begin{BAR}>", f"<{BAR}tool_calls_end{BAR}>"
CALL_BEGIN, CALL_END, SEP = f"<{BAR}tool_call_begin{BAR}>", f"<{BAR}tool_call_end{BAR}>", f"<{BAR}tool_sep{BAR}>"
BETWEEN = (CALL_END, SEP)  # markup between one call's </steptml:invoke> and the next call's begin

STEP3_TAGS = CallTags(
    function_open=CALL_BEGIN,
    function_head=re.compile(r"\s*" + re.escape(CALL_BEGIN) + r"\s*(?:function" + re.escape(SEP) + r"[^\n<]*\n?)?"
                             r'\s*<steptml:invoke name="([^"\n>]+)"\s*>'),
    parameter_open="<steptml:parameter name=", parameter_head=re.compile(r'\s*<steptml:parameter name="([^"\n>]+)"\s*>'),
    head_end=">", parameter_close="</steptml:parameter>", function_close="</steptml:invoke>", value_newlines=False)


def without_separators(block: str) -> str:
    """The section with the tokens between calls taken out (they carry nothing)."""
    return re.sub(r"(</steptml:invoke>)\s*(?:" + "|".join(map(re.escape, BETWEEN)) + r")+", r"\1", block)


class Step3ToolParser(TaggedCallsToolParser):
    name = "step3"
    start = CALLS_BEGIN
    end = CALLS_END
    tags = STEP3_TAGS

    def parse_block(self, block: str) -> list[ParsedCall] | None:
        return super().parse_block(without_separators(block))

    def new_stream(self) -> BlockStream | None:
        return Step3Stream(self)


class Step3Stream(FunctionStream):
    """FunctionStream that lets the end-of-call and separator tokens between calls go by."""

    def _step(self, out: list[Event]) -> bool:
        if self.state == AFTER:
            stripped = self._buf.lstrip()
            for token in BETWEEN:
                if stripped.startswith(token):
                    self._buf = stripped[len(token):]
                    return True
            if stripped and any(token.startswith(stripped) for token in BETWEEN):
                self._buf = stripped
                return False  # (part of) a token: wait for the rest
        if self.state == HEAD:
            stripped = self._buf.lstrip()
            # The head's own tokens end in ">": it is whole only at the invoke's closing ">".
            rest = stripped[len(CALL_BEGIN):]
            invoke = rest.find("<steptml:invoke")
            if (stripped.startswith(CALL_BEGIN) and (invoke < 0 or rest.find(">", invoke) < 0)
                    and len(stripped) < HEAD_LIMIT):
                return False
        return super()._step(out)
